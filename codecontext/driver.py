# The conch code-context driver for Python. The engine starts it with the
# path of a Unix socket, sends one JSON line per cell on it, and reads each
# cell's output from FIFOs whose end markers carry the exit status and the
# directory. Cells run in a fresh __main__; nothing of this file shows in
# their tracebacks. Standard library only; Python 3.9 or later.
import _signal as _csignal
import _thread
import __future__
import ast
import builtins
import contextvars
import io
import itertools
import json
import linecache
import os
import select
import signal
import socket
import sys
import threading
import traceback
import types

_DRIVER = os.path.abspath(__file__)

# What the driver calls, taken before any cell runs: a cell that replaces
# os.write (mock.patch("os.write") does, for the time of its with block),
# json.loads, ast.parse, a method of socket.socket or the builtins exec,
# eval and compile changes its own calls, not the driver's.
_os = types.SimpleNamespace(**{n: getattr(os, n) for n in (
    "write", "writev", "read", "open", "close", "dup", "dup2", "getcwdb", "getpid", "_exit",
    "fstat", "stat", "lstat", "geteuid", "devnull", "O_RDONLY", "O_WRONLY", "O_RDWR", "O_CREAT", "O_EXCL", "O_NOFOLLOW")})
_loads = json.loads
_import = builtins.__import__
_exec, _eval, _compile_code = builtins.exec, builtins.eval, builtins.compile
_ONLY_AST, _Expr, _Expression = ast.PyCF_ONLY_AST, ast.Expr, ast.Expression
_Call, _Name, _Load, _ast_walk = ast.Call, ast.Name, ast.Load, ast.walk
_io_open = io.open
_poll, _POLLOUT = select.poll, select.POLLOUT
# Its exit functions run first as the interpreter exits, before it waits
# for the threads (see _exit).
_register_atexit = threading._register_atexit
_gettrace, _settrace, _getprofile, _setprofile = sys.gettrace, sys.settrace, sys.getprofile, sys.setprofile
# Reentrant: a cell's trace function may print from within the driver's
# write of the cell's output, which holds the lock.
_Lock = threading.RLock
_TracebackException = traceback.TracebackException
_from_list = traceback.StackSummary.from_list
_extract, _walk_tb = traceback.StackSummary.extract, traceback.walk_tb
_format_exception_only = traceback.format_exception_only
# What an exception, or its class, holds, read as the interpreter reads it:
# a class a cell made may raise on any attribute read (its own
# __getattribute__, a property at __traceback__, a metaclass's
# __getattribute__), which must not end the driver.
_get_tb, _set_tb = BaseException.__traceback__.__get__, BaseException.__traceback__.__set__
_get_cause, _get_context = BaseException.__cause__.__get__, BaseException.__context__.__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_getattr = builtins.getattr  # a cell may replace the builtin
_walk_stack, _takewhile, _filter = traceback.walk_stack, itertools.takewhile, builtins.filter
# The C module's: signal.getsignal makes an enum of what it finds, through
# builtins a cell may have replaced.
_signal, _getsignal, _SIGINT = _csignal.signal, _csignal.getsignal, int(signal.SIGINT)
_EXCEPTHOOK = sys.excepthook  # Python's own, which the driver's formatting stands for (see _print_exc)


class _S:
    lock = threading.RLock()  # held while writing cell output or switching cells
    hooks = (None, None)  # the cells' trace and profile functions, off between cells (see _execute)
    cell = None  # the id of the running cell
    out = err = -1  # the driver's own descriptors of the running cell's FIFOs
    armed = False  # SIGINT raises KeyboardInterrupt in the cell
    cells_code = False  # the cell's own code runs: what a cell's handler raises is the cell's (see _guarded_handler)
    interrupts = 0  # how many times it did (see _print_exc_armed)
    diag = -1  # the interpreter's first stdout: where fds 1 and 2 point between cells
    null = -1
    intfile = ""  # where the engine names the cell it interrupts
    here = None  # (path, file) of the directory intfile is in, as the running cell found it
    pid = 0  # the interpreter's: a process with another pid was forked by a cell
    conn = -1  # the socket the engine sends cells on
    own = ()  # (fd, file) of the driver's lasting descriptors, to tell them closed (see _closed)
    paths = ()  # the paths of the running cell's stdout and stderr FIFOs
    report = ""  # where the driver says why it failed, a file in the context's directory
    send = None  # its sendall, bound once
    handler = None  # the SIGINT handler a cell set, in place only while cells run
    signals = ()  # the signals but SIGINT whose handlers a cell may set (see _guarded_handler)
    marker = None  # returns the running cell's end marker (see _sealed)
    loop = None  # the event loop of cells with top-level await, made at the first
    futures = 0  # the flags of the __future__ imports cells made
    from_loop = None  # the exception that ended the last such cell, raised through the loop
    sources = {}  # the names of the cells whose source linecache holds, oldest first, with their sizes
    sources_size = 0  # the sum of those sizes


# The cell the main thread runs for: an asyncio task (or callback) copies it
# as it is made, so a task a cell left running that goes on while a later
# cell awaits is told apart from that cell (see _cell_of_thread).
_cell_var = contextvars.ContextVar("conch_cell", default=None)
# What compiles a cell: top-level await allowed, as in IPython and
# "python -m asyncio"; the code object of text that uses it is a coroutine
# function's (CO_COROUTINE), which _awaited runs.
_TOP_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80
# The flags of __future__ imports: one a cell made holds for the cells
# after it, as at the REPL (from __future__ import annotations).
_FUTURES = 0
for _feature in __future__.all_feature_names:
    _FUTURES |= getattr(__future__, _feature).compiler_flag


def _forked():
    # A child forked by a cell runs its part of the cell, then exits (see
    # _run): only the interpreter reads cells. Its copy of the socket goes
    # to /dev/null at once, so that nothing it does can read a cell or
    # write to the engine.
    _S.lock = _Lock()
    if _S.conn >= 0:
        _os.dup2(_S.null, _S.conn)


def _forked_child():
    return _os.getpid() != _S.pid


def _cell_of_thread():
    # A thread belongs to the cell that started it; the main thread to the
    # running cell. Output of a thread whose cell has ended goes nowhere.
    # Code run in a context a cell set (an asyncio task, a callback,
    # asyncio.to_thread's function) belongs to that cell.
    c = _cell_var.get()
    if c is not None:
        return c
    t = threading.current_thread()
    if t is threading.main_thread():
        return _S.cell
    return getattr(t, "_conch_cell", _S.cell)


_thread_start = threading.Thread.start
_start_new_thread = _thread.start_new_thread


def _start(self):
    self._conch_cell = _cell_of_thread()
    return _thread_start(self)


def _start_new(function, args, kwargs=None):
    # _thread.start_new_thread, whose thread has no threading.Thread to
    # carry its cell (a dummy one stands in for it): the function runs in
    # a context that names the cell that started it.
    return _start_new_thread(_in_cell(function, _cell_of_thread()), args, kwargs or {})


def _pooled():
    # The thread pools, once imported: concurrent.futures' (asyncio's
    # run_in_executor uses one) and multiprocessing's ThreadPool. What a
    # cell gives one runs as that cell's, on a worker thread that an earlier
    # cell may have started, as asyncio.to_thread's function does.
    m = sys.modules.get("concurrent.futures.thread")
    pool = getattr(m, "ThreadPoolExecutor", None)
    if pool is not None and not getattr(pool.submit, "_conch", False):
        submit = pool.submit

        def submit_in_cell(self, fn, /, *args, **kwargs):
            ctx = contextvars.copy_context()
            ctx.run(_cell_var.set, _cell_of_thread())
            return submit(self, ctx.run, fn, *args, **kwargs)
        submit_in_cell._conch = True
        submit_in_cell.__doc__ = submit.__doc__
        pool.submit = submit_in_cell
    m = sys.modules.get("multiprocessing.pool")
    pool = getattr(m, "ThreadPool", None)
    if pool is not None and "_conch" not in vars(pool):
        # Every way to give it work (apply, map, starmap and their async
        # forms, imap) goes through these; the function and the callbacks
        # run on the pool's threads.
        for name in ("apply_async", "_map_async", "imap", "imap_unordered"):
            method = getattr(pool, name, None)
            if method is not None:
                setattr(pool, name, _tasks_in_cell(method))
        pool._conch = True


def _tasks_in_cell(method):
    def in_cell(self, func, *args, **kwargs):
        cell = _cell_of_thread()
        for k in ("callback", "error_callback"):
            if kwargs.get(k) is not None:
                kwargs[k] = _in_cell(kwargs[k], cell)
        return method(self, _in_cell(func, cell), *args, **kwargs)
    in_cell.__doc__ = method.__doc__
    return in_cell


def _in_cell(fn, cell):
    # fn, run as cell's on whatever thread calls it, at once on several.
    def run(*args, **kwargs):
        token = _cell_var.set(cell)
        try:
            return fn(*args, **kwargs)
        finally:
            _cell_var.reset(token)
    return run


def _emit(which, b):
    with _S.lock:
        if _S.cell is None or _cell_of_thread() != _S.cell:
            return
        _write_all(_S.out if which == 1 else _S.err, b)


def _write_all(fd, b):
    # The driver's writes to the running cell's FIFOs. fd 1 and 2 are dup2s
    # of fd, sharing its open file and so its O_NONBLOCK: a cell that makes
    # its stdout non-blocking (os.set_blocking(1, False)) makes these
    # writes fail with EAGAIN while the FIFO is full. They wait until the
    # engine has read some instead, as they would on a blocking FIFO.
    while b:
        try:
            b = b[_os.write(fd, b):]
        except BlockingIOError:
            p = _poll()
            p.register(fd, _POLLOUT)
            p.poll()


def _raw_dropped(fd):
    # Whether a raw write to fd (os.write, os.writev) is dropped: to fd 1 or
    # 2 from a thread whose cell has ended, which would write into the cell
    # running then (or between cells into the interpreter's own output).
    return (fd == 1 or fd == 2) and (_S.cell is None or _cell_of_thread() != _S.cell)


def _guarded(write, size):
    # Not under the driver's output lock: fd 1 may be a pipe a cell put
    # there (dup2) that another of its threads drains through print, which
    # takes the lock. A write that starts as its cell ends can still land.
    def guarded(fd, data):
        if _raw_dropped(fd):
            return size(data)
        return write(fd, data)
    guarded.__name__ = write.__name__
    guarded.__doc__ = write.__doc__
    return guarded


def _nbytes(data):
    return memoryview(data).nbytes


def _nbytes_all(buffers):
    return sum(memoryview(b).nbytes for b in buffers)


class _Bin(io.BufferedIOBase):
    # sys.stdout.buffer: a binary stream, which io.TextIOWrapper takes. It
    # serves every cell, so closing it (a wrapper's close does) closes
    # nothing.
    def __init__(self, fd):
        self._fd = fd

    def writable(self):
        return True

    def write(self, b):
        _emit(self._fd, bytes(b))
        return len(b)

    def flush(self):
        pass

    def close(self):
        pass

    def fileno(self):
        return self._fd

    def isatty(self):
        return False


class _Out(io.TextIOBase):
    encoding = "utf-8"
    errors = "strict"  # (a plain attribute, which reconfigure can set: TextIOBase's is read-only)
    line_buffering = False
    write_through = True

    def __init__(self, fd, name, errors):
        self._fd = fd
        self.name = name
        self.errors = errors
        self.buffer = _Bin(fd)

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def detach(self):
        # The binary stream, for a wrapper of another encoding
        # (io.TextIOWrapper(sys.stdout.detach(), encoding="utf-8")). Unlike
        # a TextIOWrapper, this stream stays usable: it is sys.__stdout__
        # (or __stderr__), which a later cell may put back.
        return self.buffer

    def reconfigure(self, *, encoding=None, errors=None, newline=None, line_buffering=None,
                    write_through=None):
        # As TextIOWrapper's, for what a stream that writes at once has.
        if encoding is not None:
            "".encode(encoding)  # LookupError for an unknown one
            self.encoding = encoding
            if errors is None:
                errors = "strict"
        if errors is not None:
            self.errors = errors
        if line_buffering is not None:
            self.line_buffering = bool(line_buffering)

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not " + type(s).__name__)
        _emit(self._fd, s.encode(self.encoding, self.errors))
        return len(s)


def _on_int(signum, frame):
    # The engine names the cell it interrupts in the file "int": a signal
    # handled late, when another cell runs, is not for that one.
    if _S.armed and _interrupted() == _S.cell:
        _S.interrupts += 1
        raise KeyboardInterrupt


def _cells_handler():
    # Put back the SIGINT handler a cell set, for the cells' code.
    if _S.handler is not None:
        _signal(_SIGINT, _S.handler)


def _guarded_handler(h):
    # A cell's handler of a signal but SIGINT, as the driver keeps it in
    # place: in a cell's code it runs as it is, and what it raises is the
    # cell's, as at a REPL; anywhere else (an alarm's, while the driver
    # waits for the next cell, ends one, or formats the exception that
    # ended one, _S.cells_code unset) what it raises has no cell to be
    # raised in, and in the driver's own code it would end the interpreter:
    # it goes where a cell's late output goes. SystemExit ends the
    # interpreter, as a handler may ask at any time. Kept in place for
    # good, rather than put in and taken out around each cell, so that
    # the handler has no moment to raise in the driver's own code but the
    # one between the end of the cell that set it and _drivers_handler.
    def guarded(signum, frame):
        if _S.cells_code:
            return h(signum, frame)
        try:
            h(signum, frame)
        except SystemExit:
            raise
        except BaseException:
            pass
    guarded._conch_handler = h
    return guarded


_GUARDED = _guarded_handler(None).__code__


def _cells_own(h):
    # What a cell set, for a handler the driver guards (see signal.signal
    # and signal.getsignal as main sets them).
    if type(h) is types.FunctionType and h.__code__ is _GUARDED:
        return h._conch_handler
    return h


def _drivers_handler():
    # Take SIGINT back from a handler a cell set (signal.default_int_handler,
    # say), which would raise in the driver's own code between cells: a late
    # interrupt, or one of the engine's that lands as a cell ends, would end
    # the interpreter. Kept for the cells' code (see _cells_handler).
    h = _getsignal(_SIGINT)
    if h is _on_int:
        _S.handler = None
    elif h is not None:  # None: set outside Python, which cannot be put back
        _S.handler = h
        _signal(_SIGINT, _on_int)
    # And the other signals' handlers a cell set are guarded.
    for sig in _S.signals:
        h = _getsignal(sig)
        if callable(h) and _cells_own(h) is h:
            _signal(sig, _guarded_handler(h))


def _interrupted():
    # The cell "int" names, read only from a directory as the engine makes
    # its own. A cell that removed the directory, or put another at its
    # name, took the file: the engine then makes its directory anew, maybe
    # under a new name this cell does not know, and sends the signal all
    # the same; it is for the running cell.
    path, file = _S.here or ("", None)
    try:
        st = _os.lstat(path)
    except OSError:
        st = None
    if st is not None and _own_dir(st):
        try:
            with _io_open(_S.intfile, "rb") as f:
                return int(f.read())
        except (OSError, ValueError):
            pass
    if file is not None and (st is None or _file(st) != file):
        return _S.cell
    return None


def _own_dir(st):
    # As the engine makes its directories: not a link, the user's own, with
    # no access for others (see resident.Dir).
    return (st.st_mode & 0o170000 == 0o040000 and st.st_uid == _os.geteuid()
            and st.st_mode & 0o077 == 0)


def _strip(te, seen):
    # Drop the driver's frames from te and the exceptions chained to it.
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = _from_list(
            [f for f in te.stack if f.filename != _DRIVER])
        _strip(te.__cause__, seen)
        te = te.__context__


def _cells_walk_stack(f):
    # traceback.walk_stack, which extract_stack, print_stack and
    # format_stack (and so logging's stack_info) walk a live stack with:
    # the driver's frames are left out, as from a traceback (see _strip),
    # and the walk ends where the cell's code starts, as plain "python3 -i"
    # ends it at "<stdin>". A cell that puts its own function there has
    # its own. The frames go through C iterators only: a frame of the
    # driver's here would be the caller that walk_stack(None) counts from.
    return _filter(_not_drivers, _takewhile(_cells_part, _walk_stack(f)))


def _not_drivers(frame_and_line):
    return frame_and_line[0].f_code.co_filename != _DRIVER


def _cells_part(frame_and_line):
    # False at the driver's frame that runs the cell (_execute, or
    # _cell_coro in the event loop), or that ran the code which walks (an
    # exception's text, a stream's flush): under it are only the driver's
    # frames, or the event loop's. A frame of the driver's with code of the
    # cells' under it (the guard of a signal handler a cell set, the
    # wrapper of a thread pool's task) is only left out.
    f = frame_and_line[0]
    if f.f_code.co_filename != _DRIVER:
        return True
    if f.f_code is _cell_coro.__code__:
        return False
    while f is not None and f.f_code.co_filename == _DRIVER:
        f = f.f_back
    return f is not None


def _print_exc(e):
    # As the REPL does, an exception that ends a cell goes to
    # sys.excepthook when a cell put its own function there: called with
    # the traceback the REPL would give it, without the driver's frames,
    # it prints what it likes; one that raises is reported as the REPL
    # reports it ("Error in sys.excepthook:", then the original). Python's
    # own hook would show the driver's frames: the driver formats the
    # exception as it would.
    _cells_traceback(e, set())
    _set_last(e)
    try:
        hook = sys.excepthook
    except AttributeError:
        _err("sys.excepthook is missing\n")
        hook = _EXCEPTHOOK
    if hook is _EXCEPTHOOK:
        _err(_format_exc(e))
        return
    try:
        hook(type(e), e, _traceback_of(e))
    except SystemExit as x:
        # It ends the interpreter, as it ends the REPL's.
        _S.armed = _S.cells_code = False
        status = _exit_status(x)
        _flush_streams()
        _exit(status)
    except BaseException as x:
        # An interrupt too (the engine's, while the hook ran): reported as
        # CPython reports it, the original with it; the cell ends as
        # interrupted all the same, the interrupt having been counted (see
        # _print_exc_armed).
        _err("Error in sys.excepthook:\n" + _format_exc(x) + "\nOriginal exception was:\n" + _format_exc(e))


def _set_last(e):
    # As the REPL keeps the exception that ended a statement, for the cells
    # after it (pdb.pm(), traceback.print_last()): sys.last_type,
    # last_value and last_traceback, and sys.last_exc from Python 3.12 on,
    # with the traceback of the cell's frames only. Set before the hook is
    # called, as the REPL sets them.
    try:
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, _traceback_of(e)
        if sys.version_info >= (3, 12):
            sys.last_exc = e
    except KeyboardInterrupt:
        raise  # (see _print_exc_armed)
    except BaseException:  # an exception whose attributes raise (see _format_exc)
        pass


def _cells_traceback(e, seen):
    # Drops the driver's frames from the tracebacks of e and the exceptions
    # chained to it, as _strip does from their text, and the event loop's
    # before the cell's first (see _format_exc).
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        try:
            kept, tb = [], _get_tb(e)
            while tb is not None:
                name = tb.tb_frame.f_code.co_filename
                if name != _DRIVER and (kept or e is not _S.from_loop or name.startswith("<cell ")):
                    kept.append(tb)
                tb = tb.tb_next
            for a, b in zip(kept, kept[1:] + [None]):
                a.tb_next = b
            _set_tb(e, kept[0] if kept else None)
            _cells_traceback(_get_cause(e), seen)
            e = _get_context(e)
        except KeyboardInterrupt:
            raise
        except BaseException:  # a class whose attributes raise (see _format_exc)
            return


def _format_exc(e):
    # As the traceback module formats e, or, for an exception whose class
    # breaks that (an attribute read that raises, a __cause__ that is not an
    # exception), as much of it as can be had, step by step, as the REPL
    # prints it: the cell's frames, then the last line as the traceback
    # module makes it, or else from the type's own name and the text.
    try:
        te = _TracebackException(type(e), e, _traceback_of(e))
        _strip(te, set())
        te.stack = _cells_frames(te.stack, e)
        try:
            return "".join(te.format())
        except Exception:
            # Python 3.13 places a line's carets with ast.parse, which a
            # cell may have replaced: the frames without them.
            return _plain_frames(te.stack) + "".join(te.format_exception_only())
    except KeyboardInterrupt:
        raise  # an interrupt while the cell's code formats it (see _print_exc_armed)
    except BaseException:
        pass
    try:
        stack = _cells_frames(_extract(_walk_tb(_traceback_of(e))), e)
        try:
            text = "".join(stack.format())
            if text:
                text = "Traceback (most recent call last):\n" + text
        except Exception:
            text = _plain_frames(stack)
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = ""
    try:
        return text + "".join(_format_exception_only(type(e), e))
    except KeyboardInterrupt:
        raise
    except BaseException:
        pass
    line = _exception_line(e)
    if line is None:
        # Not even the type's name: object.__repr__ reads its C name only.
        return text + "Uncaught %s (it could not be formatted)\n" % object.__repr__(e)
    return text + line


def _traceback_of(e):
    # The traceback the exception holds, as the interpreter reads it (a
    # class may put a property at __traceback__); None for no exception.
    try:
        return _get_tb(e)
    except TypeError:
        return None


def _cells_frames(stack, e):
    # The cell's frames of stack, which e's traceback gave.
    stack = [f for f in stack if f.filename != _DRIVER]
    if e is _S.from_loop:
        # It ended a cell with top-level await: the frames before the
        # cell's first are the event loop's that ran it (all of them for
        # an interrupt that came as the loop waited).
        i = 0
        while i < len(stack) and not stack[i].filename.startswith("<cell "):
            i += 1
        stack = stack[i:]
    return _from_list(stack)


def _plain_frames(stack):
    if not stack:
        return ""
    text = "Traceback (most recent call last):\n"
    for f in stack:
        text += '  File "%s", line %s, in %s\n' % (f.filename, f.lineno, f.name)
        if f.line:
            text += "    %s\n" % f.line.strip()
    return text


def _exception_line(e):
    # "name: text", as the REPL prints an exception the traceback module
    # cannot format: the qualified name read from the type itself (no
    # metaclass of a cell's in the way), the module as CPython's own report
    # reads it, through the type's attribute (a metaclass's
    # __getattribute__ included), "<unknown>" when that read fails or is
    # no str; the text as str gives it. None when even the name cannot be
    # had.
    try:
        cls = type(e)
        name = _type_qualname(cls)
        try:
            module = _getattr(cls, "__module__")
        except KeyboardInterrupt:
            raise
        except BaseException:
            module = None
        if type(module) is not str:
            module = "<unknown>"
        if module not in ("__main__", "builtins"):
            name = module + "." + name
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None
    try:
        text = str(e)
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = "<exception str() failed>"
    return "%s: %s\n" % (name, text) if text else name + "\n"


def _err(text):
    # Writes what the driver reports for a cell to sys.stderr, as the REPL
    # does, or, when the cell made that unusable (sys.stderr = None, or an
    # object whose write raises, KeyboardInterrupt or any BaseException),
    # to the cell's stderr: the report is not lost, nor the cell's end, nor
    # the driver. An interrupt that comes as the write runs is counted all
    # the same (see _print_exc_armed). But SystemExit ends the interpreter,
    # as the cell's code may anywhere.
    try:
        sys.stderr.write(text)
    except SystemExit:
        raise
    except BaseException:
        _emit(2, text.encode("utf-8", "backslashreplace"))


def _compile(src, name):
    # Both parts compile before either runs, so text with a syntax error
    # never runs at all.
    tree = _compile_code(src, name, "exec", _ONLY_AST)  # ast.parse, whose code calls builtins.compile
    flags = _TOP_AWAIT | _S.futures
    last = display = None
    if tree.body and isinstance(tree.body[-1], _Expr):
        value = tree.body.pop().value
        last = _compile_code(_Expression(value), name, "eval", flags, True)
        display = _display_code(value, name)
    body = _compile_code(tree, name, "exec", flags, True)
    _S.futures |= body.co_flags & _FUTURES
    return body, last, display


def _display_code(value, name):
    # h(v), the call of sys.displayhook with the cell's value, placed where
    # the cell's last expression is: what the display raises (a __repr__'s
    # error, a displayhook that is None) shows the cell's frame and line,
    # as the REPL shows the statement's ("<stdin>", line 1, in <module>),
    # and what it frees warns from that line.
    call = _Expression(_Call(_Name("h", _Load()), [_Name("v", _Load())], []))
    for node in _ast_walk(call.body):
        node.lineno, node.col_offset = value.lineno, value.col_offset
        node.end_lineno, node.end_col_offset = value.end_lineno, value.end_col_offset
    return _compile_code(call, name, "eval", 0, True)


def _uses_await(code):
    return code is not None and code.co_flags & _CO_COROUTINE


async def _cell_coro(body, last, ns):
    # A cell with top-level await: both of its parts run in the event loop,
    # the statements before an await too (asyncio.create_task needs it
    # running), as IPython runs such a cell.
    r = _eval(body, ns)
    if _uses_await(body):
        await r
    if last is None:
        return None
    v = _eval(last, ns)
    if _uses_await(last):
        v = await v
    return v


def _awaited(coro):
    # Runs a cell's coroutine to its end on the context's event loop, which
    # lives from cell to cell (as IPython's does): tasks a cell started go on
    # while later cells await, their output dropped (see _cell_of_thread).
    # An interrupt, or any exception that leaves the coroutine unfinished,
    # cancels it and lets it run its cleanup.
    asyncio = _import("asyncio")
    loop = _S.loop
    if loop is None or loop.is_closed():
        loop = _S.loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException as e:
        _S.from_loop = e
        if not task.done():
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise


def _lost_displayhook(v):
    raise RuntimeError("lost sys.displayhook")


def _display(v, code):
    # Shows a cell's value through sys.displayhook, called from a frame of
    # the cell's (see _display_code): what the display frees (the value it
    # replaces as "_") warns from there, as from "<stdin>" at the REPL
    # ("<cell 3>:1: RuntimeWarning: coroutine 'f' was never awaited"), not
    # from the driver's file. As at the REPL, a cell that deleted
    # sys.displayhook gets "RuntimeError: lost sys.displayhook", raised
    # from a frame of the driver's, which its traceback leaves out.
    _eval(code, {"h": getattr(sys, "displayhook", _lost_displayhook), "v": v})


def _exit_status(e):
    # As CPython reads it: the exception's code, or the exception itself
    # when that cannot be read; an int by its type, not by isinstance,
    # which reads the value's __class__, whose class may make that raise.
    try:
        code = e.code
    except BaseException:
        code = e
    if code is None:
        return 0
    if issubclass(type(code), int):
        # As CPython takes it: as a C long long, cut to an int, of which
        # exit keeps the low byte; -1 for one that does not fit, 255.
        code = int.__index__(code)
        return code & 0xFF if -1 << 63 <= code < 1 << 63 else 255
    try:
        text = str(code)
    except BaseException:  # the cell's own __str__
        text = "<%s object (it could not be formatted)>" % _type_name(code)
    _err(text + "\n")
    return 1


def _execute(ns, body, last, display, n):
    # The cell's trace and profile functions (sys.settrace, sys.setprofile,
    # a debugger's) are for the cells' code: they are off while the driver
    # works between cells, and on again as the next cell's code runs. Taken
    # off here with calls of builtins only, which start no frame a tracer
    # would be told of. A tracer that printed, called for the driver's own
    # code as it wrote the end markers under its lock, deadlocked the
    # context, and a debugger stepped out of the cell into the driver.
    seen = _S.interrupts
    _S.armed = True
    hooks = None
    try:
        try:
            _S.send(b"S %d\n" % n)
            _cells_handler()
            _S.cells_code = True
            awaits = _uses_await(body) or _uses_await(last)
            trace, profile = _S.hooks
            if profile is not None:
                _setprofile(profile)
            if trace is not None:
                _settrace(trace)
            if awaits:
                v = _awaited(_cell_coro(body, last, ns))
            else:
                _exec(body, ns)
                v = _eval(last, ns) if last is not None else None
            hooks = _gettrace(), _getprofile()
            _setprofile(None)
            _settrace(None)
            if last is not None:
                _display(v, display)
        finally:
            _S.cells_code = False
            if hooks is None:
                hooks = _gettrace(), _getprofile()
                _setprofile(None)
                _settrace(None)
            _S.hooks = hooks
            _S.armed = False
            _drivers_handler()
    except SystemExit as e:
        _S.cells_code = False
        status = _exit_status(e)
        _flush_streams()
        _exit(status)
    except BaseException as e:
        _S.cells_code = False  # (a handler that raised at the finally's start left it set)
        failed = e
    else:
        return 0
    # Reported out of the except clause, as the REPL reports it: the
    # sys.excepthook a cell set sees no exception being handled
    # (sys.exc_info() is (None, None, None)), and what it raises is not
    # chained to the one it was given.
    interrupted = _print_exc_armed(failed)
    _S.from_loop = None
    if issubclass(type(failed), KeyboardInterrupt):  # (not isinstance: see _exit_status)
        # The engine's interrupt (raised by _on_int, or by a SIGINT handler
        # the cell set, the engine having named the cell) ends the cell
        # with 130; one the cell raised itself is an uncaught exception.
        interrupted = interrupted or _S.interrupts != seen or _interrupted() == n
    return 130 if interrupted else 1


def _exit(status):
    # Ends the context as the interpreter's own exit would: the SystemExit
    # goes up through main to the interpreter, which waits for the
    # non-daemon threads, runs the atexit handlers, flushes the files still
    # open as it frees them, and exits with status. What they print is the
    # cell's, still the running one, whose end marker is never written.
    # That is the cell's code, run as the cell ran: from the first of the
    # threading module's exit functions on, the cell's SIGINT handler (or
    # Python's) is in place, so that the engine's interrupt, or its
    # timeout, ends a wait for a thread or a handler that never ends (and
    # the engine kills the interpreter if it goes on). Not before: an
    # interrupt on the way up, in the driver's own code, would stop the
    # exit there.
    try:
        _register_atexit(_exit_armed)
    except BaseException:  # the threading module is shutting down already
        _exit_armed()
    raise SystemExit(status)


def _exit_armed():
    # Python's own handler when the cell set none, rather than _on_int:
    # what the interpreter prints of an interrupted handler or wait shows
    # the handler's frame, which would be the driver's. The interrupt is
    # the exiting cell's: no other cell runs after it.
    _S.cells_code = True
    _signal(_SIGINT, _S.handler if _S.handler is not None else _csignal.default_int_handler)


def _print_exc_armed(e):
    # An exception's text is the cell's own code (its __str__), which may
    # never return: it is formatted with the interrupt armed, as the cell
    # ran, and one that comes meanwhile ends the cell as interrupted
    # (True) with the exception named without its text. Formatted
    # unarmed, a __str__ that looped could not be interrupted, and the
    # context was ended with all its state. Disarmed inside the try: an
    # interrupt that lands as it is disarmed is taken here too. One that
    # the traceback module takes for a __str__ that failed, which it
    # catches whatever it raises ("<exception str() failed>"), stopped the
    # formatting all the same: the cell was interrupted, not ended by
    # itself (see Cell.resultFor).
    interrupted = False
    seen = _S.interrupts
    while True:
        try:
            if not interrupted:
                _S.armed = True
                _print_exc(e)
            _S.armed = False
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        _err("%s: (its text was interrupted as it was formatted)\n" % _type_name(e))
    return interrupted or _S.interrupts != seen


def _flush_streams():
    # Flushes sys.stderr and sys.stdout, as the REPL does after each
    # statement and the interpreter at its exit: a buffered stream a cell
    # put there (io.TextIOWrapper(sys.stdout.buffer), to choose an
    # encoding) gives up what the cell wrote before the cell's end marker,
    # not into a later cell's log. The flush is the cell's code, run armed
    # as the cell ran: an interrupt that ends it ends the cell (True).
    # Anything else it raises is ignored, as the REPL ignores it.
    seen = _S.interrupts
    for name in ("stderr", "stdout"):
        pending = True
        while True:
            try:
                if pending:
                    pending = False
                    _S.armed = True
                    try:
                        getattr(sys, name).flush()
                    except KeyboardInterrupt:
                        raise
                    except BaseException:
                        pass
                _S.armed = False  # inside the try, as in _print_exc_armed
                break
            except KeyboardInterrupt:
                pass
    return _S.interrupts != seen


def _type_name(e):
    try:
        return _type_qualname(type(e))
    except BaseException:
        return "exception"


def _open_cell(msg):
    stdin = _os.open(msg["stdin"] or _os.devnull, _os.O_RDONLY)
    out = _os.open(msg["stdout"], _os.O_WRONLY)
    err = _os.open(msg["stderr"], _os.O_WRONLY)
    with _S.lock:
        _os.dup2(stdin, 0)
        _os.dup2(out, 1)
        _os.dup2(err, 2)
        _os.close(stdin)
        _S.out, _S.err, _S.cell = out, err, msg["id"]
        _S.paths = (msg["stdout"], msg["stderr"])
        # The engine's directory may have moved (made anew under a new
        # name): the files it shares with the driver are beside the
        # cell's streams.
        here = msg["stdout"].rpartition("/")[0]
        _S.intfile, _S.report = here + "/int", here + "/failed"
        try:
            _S.here = (here, _file(_os.lstat(here)))
        except OSError:
            _S.here = None
        _cell_var.set(msg["id"])
    sys.stdin = _io_open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)


def _sealed(nonce):
    # The end marker, kept from here on by a closure only: no frame on the
    # stack of a running cell holds it in a local (see main and _run). Code
    # in the same interpreter can still find it (the driver's globals, gc):
    # the nonce guards against output that imitates the marker, not against
    # a cell that goes looking for it.
    marker = b"\x1eCONCH" + nonce.encode()
    return lambda: marker


def _end_cell(status):
    try:
        cwd = _os.getcwdb()
    except OSError:
        cwd = b""
    marker = _S.marker()
    _S.marker = None
    with _S.lock:
        _S.cell = None
        for fd, m in ((_S.err, marker), (_S.out, marker + b"_%d_  " % status + cwd + b"\0")):
            _write_all(fd, m)
            _os.close(fd)
        _os.dup2(_S.diag, 1)
        _os.dup2(_S.diag, 2)
        _os.dup2(_S.null, 0)


# How much of the cells' source linecache keeps for tracebacks: the latest
# cells, within both bounds, and always the running one. A context lives
# long and its cells can be megabytes each; an entry with no mtime is never
# dropped by linecache itself. A function defined in an evicted cell shows
# no source line in a traceback.
_SOURCE_BYTES = 16 << 20
_SOURCE_CELLS = 1000


def _keep_source(name, src, lines):
    linecache.cache[name] = (len(src), None, lines, name)
    kept = _S.sources
    kept[name] = len(src)
    _S.sources_size += len(src)
    while len(kept) > 1 and (_S.sources_size > _SOURCE_BYTES or len(kept) > _SOURCE_CELLS):
        oldest = next(iter(kept))
        _S.sources_size -= kept.pop(oldest)
        linecache.cache.pop(oldest, None)


def _run(ns, msg):
    _S.marker = _sealed(msg.pop("nonce"))
    n = msg["id"]
    name = "<cell %d>" % n
    src = msg["code"]
    lines = src.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        # As linecache.updatecache reads a file: the traceback's carets
        # count on the newline.
        lines[-1] += "\n"
    _keep_source(name, src, lines)
    _pooled()
    _open_cell(msg)
    _S.send(b"O %d\n" % n)
    try:
        body, last, display = _compile(src, name)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
        # RecursionError: text nested too deep for the parser or the
        # compiler (1+1+...+1 a thousand times, from the driver's depth).
        failed = e
    else:
        failed = None
        status = _execute(ns, body, last, display, n)
    if failed is not None:
        # Reported as the REPL reports a syntax error: through the
        # sys.excepthook a cell set, with no traceback (the frames are all
        # the driver's), kept in sys.last_value; out of the except clause,
        # as _execute reports what a cell raised.
        status = 130 if _print_exc_armed(failed) else 1
        failed = None
    if _flush_streams():
        status = 130
    if _forked_child():
        # Its part of the cell is done; the cell is the interpreter's to
        # end. Checked by pid, as a native module's fork runs no hook.
        _os._exit(status)
    _end_cell(status)


def _lines(fd):
    # The lines the engine sends on fd, read with the driver's own os.read
    # (a socket's file object would call socket.socket.recv_into, which a
    # cell can replace). A line is looked for in each new chunk alone: a
    # cell of megabytes comes in many.
    pending = []
    while True:
        try:
            chunk = _os.read(fd, 1 << 16)
        except KeyboardInterrupt:  # a late interrupt, under a handler a cell set
            continue
        except OSError:  # the read's own: the driver cannot go on
            raise
        except Exception:
            # Raised by a signal handler a cell set, run between cells (an
            # alarm's): a terminal's REPL prints it and reads on. There is
            # no cell to print it in: it goes where a cell's late output
            # goes, nowhere.
            continue
        if not chunk:
            return
        while True:
            i = chunk.find(b"\n")
            if i < 0:
                pending.append(chunk)
                break
            pending.append(chunk[:i + 1])
            yield b"".join(pending)
            pending = []
            chunk = chunk[i + 1:]


def _file(st):
    return (st.st_dev, st.st_ino)


def _closed():
    # Whether one of the driver's descriptors was closed (os.closerange,
    # os.close), or holds another file since: its lasting ones, and the
    # running cell's FIFOs, whose paths say which file they were.
    def differs(fd, file):
        try:
            return _file(_os.fstat(fd)) != file
        except OSError:
            return True

    if any(differs(fd, file) for fd, file in _S.own):
        return True
    if _S.cell is None:
        return False
    for fd, path in zip((_S.out, _S.err), _S.paths):
        try:
            file = _file(_os.stat(path))
        except OSError:
            continue  # the cell removed the FIFO: its descriptor says nothing
        if differs(fd, file):
            return True
    return False


def main():
    if sys.version_info < (3, 9):
        sys.stderr.write("conch needs Python 3.9 or later, not %s\n" % sys.version.split()[0])
        sys.exit(1)
    _S.diag = _os.dup(1)
    _S.null = _os.open(_os.devnull, _os.O_RDWR)
    _S.pid = _os.getpid()
    os.register_at_fork(after_in_child=_forked)
    threading.Thread.start = _start
    _thread.start_new_thread = _start_new
    if hasattr(threading, "_start_new_thread"):  # threading's own name for it, until Python 3.13
        threading._start_new_thread = _start_new
    if hasattr(_thread, "start_new"):  # its old name, until Python 3.13
        _thread.start_new = _start_new
    os.write = _guarded(_os.write, _nbytes)
    os.writev = _guarded(_os.writev, _nbytes_all)
    # The same functions under their own module's name.
    posix = sys.modules.get("posix")
    if posix is not None:
        posix.write, posix.writev = os.write, os.writev
    _cells_walk_stack.__name__, _cells_walk_stack.__doc__ = "walk_stack", _walk_stack.__doc__
    traceback.walk_stack = _cells_walk_stack
    signal.signal(signal.SIGINT, _on_int)
    _S.signals = tuple(int(sig) for sig in signal.valid_signals()
                       if sig not in (signal.SIGINT, signal.SIGKILL, signal.SIGSTOP))
    # A cell sees the handlers it set, not the driver's guards of them.
    py_signal, py_getsignal = signal.signal, signal.getsignal

    def cells_signal(signalnum, handler):
        return _cells_own(py_signal(signalnum, handler))

    def cells_getsignal(signalnum):
        return _cells_own(py_getsignal(signalnum))
    cells_signal.__doc__, cells_getsignal.__doc__ = py_signal.__doc__, py_getsignal.__doc__
    signal.signal, signal.getsignal = cells_signal, cells_getsignal
    # The error handlers are the interpreter's own for its streams, as the
    # REPL's are: stdout's as the locale and PYTHONIOENCODING make it
    # ("strict" in a UTF-8 locale, so that print("\ud800") raises
    # UnicodeEncodeError; "surrogateescape" in the C locale), stderr's
    # always "backslashreplace".
    sys.stdout = sys.__stdout__ = _Out(1, "<stdout>", getattr(sys.stdout, "errors", None) or "strict")
    sys.stderr = sys.__stderr__ = _Out(2, "<stderr>", "backslashreplace")
    sock = sys.argv[1]
    _S.intfile = os.path.join(os.path.dirname(sock), "int")
    sys.argv = [""]
    sys.path[0] = ""
    main_mod = types.ModuleType("__main__")
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock)
    _S.conn = conn.fileno()
    _S.send = conn.sendall
    _S.report = os.path.join(os.path.dirname(sock), "failed")
    _S.own = tuple((fd, _file(_os.fstat(fd))) for fd in (_S.diag, _S.null, _S.conn))
    for line in _lines(_S.conn):
        if _forked_child():
            _os._exit(1)  # never read cells in a child
        msg = _loads(line)
        del line  # the text with the nonce, in a frame under the cell's
        try:
            _run(main_mod.__dict__, msg)
        except KeyboardInterrupt:  # an interrupt that came too late for its cell
            if _forked_child():
                _os._exit(130)
    if _closed():
        # The end of what a cell put on the socket's descriptor (os.dup2
        # of /dev/null), not of the engine, which has more cells to send:
        # the failure says so.
        raise OSError("the driver's socket was replaced")


try:
    main()
except SystemExit:  # main's own (an interpreter too old): its message is written
    raise
except BaseException as e:  # the driver's own failure: say why where the engine keeps it
    try:
        _why = traceback.format_exc()
    except BaseException:  # the traceback module may be what a cell broke
        _why = ""
    try:
        _last = "%s: %s\n" % (type(e).__name__, e)
    except BaseException:
        _last = type(e).__name__ + "\n"
    try:
        # The driver cannot go on without them: the engine says so.
        _closing = b"conch: a cell closed the driver's descriptors\n" if _closed() else b""
    except BaseException:
        _closing = b""
    _report = b"conch: the driver failed:\n" + (_why or _last).encode("utf-8", "backslashreplace") + _closing
    _filed = False
    try:
        # The report also goes to a file the engine reads, which no
        # descriptor the cell could close is needed for.
        _fd = _os.open(_S.report, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL | _os.O_NOFOLLOW, 0o600)
        try:
            _filed = _os.write(_fd, _report) == len(_report)
        finally:
            _os.close(_fd)
    except BaseException:
        pass
    try:
        _os.write(_S.diag if _S.diag >= 0 else 2, _report)
    except BaseException:
        # A cell closed the driver's descriptors (os.closerange): fd 2 is
        # the running cell's stderr, where the engine looks when the
        # interpreter exits 70 and its own output says nothing. Only when
        # the file could not be written (a cell removed the context's
        # directory): nothing of the driver's belongs in a cell's output.
        if not _filed:
            try:
                _os.write(2, b"\nconch: the driver failed:\n" + _last.encode("utf-8", "backslashreplace") + _closing)
            except BaseException:
                pass
    _os._exit(70)  # as driver.js: nothing more written after why
