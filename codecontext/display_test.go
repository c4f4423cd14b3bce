package codecontext

import (
	"slices"
	"strings"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestDisplayThrows: a last value whose display throws (a custom inspect
// that throws, a Symbol.toStringTag getter that throws; in Python a
// __repr__ that raises) fails its cell with exit 1 and the error on stderr,
// as an uncaught exception does, and the context lives on.
func TestDisplayThrows(t *testing.T) {
	t.Parallel()
	for lang, cells := range map[Language][]string{
		Python: {"class R:\n    def __repr__(self): raise ValueError('insp')\nR()"},
		JavaScript: {
			`({ [Symbol.for("nodejs.util.inspect.custom")]() { throw new Error("insp") } })`,
			`await null; ({ get [Symbol.toStringTag]() { throw new Error("insp") } })`,
		},
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			for _, cell := range cells {
				r, out, errOut := run(t, c, cell)
				require.Equal(t, 1, code(r), "%s: %+v", cell, r)
				require.Empty(t, out, cell)
				require.Contains(t, errOut, "insp", cell)
				require.NotContains(t, errOut, "driver", cell)
				require.NotContains(t, errOut, "node:internal", cell)
			}
			_, out, _ := run(t, c, "1 + 1")
			require.Equal(t, "2\n", out)
		})
	}
}

// TestPromiseDisplay: a displayed Promise (the last value, console.log, in
// an array, of the cell's realm or of Node's) shows as Node shows one
// without async hooks: nothing of what Node keeps on it for the driver's
// AsyncLocalStorage (its hooks' ids, the cell's token), a property of the
// cell's own kept. Before, "Promise { 4, [Symbol(async_id_symbol)]: 10,
// [Symbol(trigger_async_id_symbol)]: 4, [Symbol(kResourceStore)]: ConchCell
// {} }". And never anything of the cell's record: not its code, its end
// marker's nonce, nor its FIFOs' paths.
func TestPromiseDisplay(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for cell, want := range map[string]string{
		"async function secretive() { return 3 }; secretive()": "Promise { 3 }\n",
		"console.log(Promise.resolve(4)); undefined":           "Promise { 4 }\n",
		"await null; Promise.resolve(5)":                       "Promise { 5 }\n",
		"const r = Promise.reject(7); r.catch(() => {}); r":    "Promise { <rejected> 7 }\n",
		"const q = new Promise(() => {}); q.mine = 1; [q]":     "[ Promise { <pending>, mine: 1 } ]\n",
		"require('fs').promises.access('/')":                   "Promise { <pending> }\n",
		"class P extends Promise {}; P.resolve(8)":             "P [Promise] { 8 }\n",
	} {
		r, out, errOut := run(t, c, cell)
		require.Equal(t, 0, code(r), "%s: %s", cell, errOut)
		require.Equal(t, want, out, cell)
		for _, private := range []string{"secretive", "nonce", c.dir.Path(), "stdout", "code"} {
			require.NotContains(t, out, private, cell)
		}
	}
	// The hooks' keys stay on the promise, hidden.
	_, out, _ := run(t, c, "Object.getOwnPropertySymbols(q).length > 0 && Object.keys(q).join()")
	require.Equal(t, "'mine'\n", out)
}

// TestNonceOutOfFrames: no frame under a running Python cell holds its end
// marker's nonce in a local (the driver's main loop kept the cell's JSON
// line, _run its message): a cell that walks the frames under it finds
// nothing to forge its end with.
func TestNonceOutOfFrames(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	cell, _, err := c.Run(t.Context(), CellOptions{Code: `import sys
f, seen = sys._getframe(), []
while f is not None:
    seen.append(repr(f.f_locals)); f = f.f_back
print("\n".join(seen))`})
	require.NoError(t, err)
	out, errOut := output(cell)
	require.Empty(t, errOut)
	require.Contains(t, out, "'n': 1") // _execute's locals are there
	cell.mu.Lock()
	nonce := string(cell.nonce)
	cell.mu.Unlock()
	require.NotEmpty(t, nonce)
	require.NotContains(t, out, nonce)
}

// TestTracebackCarets: the carets under the failing part of a Python
// traceback's line start under it, also on a cell's last line, which has no
// newline of its own (they were one column to its right).
func TestTracebackCarets(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	for _, cell := range []string{"x = 1 + undefined_name", "y = 2\nx = 1 + undefined_name"} {
		r, _, errOut := run(t, c, cell)
		require.Equal(t, 1, code(r))
		lines := strings.Split(errOut, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "x = 1 + undefined_name") })
		require.GreaterOrEqual(t, i, 0, errOut)
		if !strings.Contains(lines[i+1], "^") { // Python before 3.11 draws no carets here
			continue
		}
		require.Equal(t, strings.Index(lines[i], "undefined_name"), strings.Index(lines[i+1], "^"), errOut)
	}
}

// TestStdoutStreamAPI: Python's sys.stdout takes what a TextIOWrapper
// does that agents write often: reconfigure(encoding=...), and its buffer
// can be wrapped in an io.TextIOWrapper; closing that wrapper leaves the
// cells' stdout open.
func TestStdoutStreamAPI(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import io, sys
sys.stdout.reconfigure(encoding="utf-8")
w = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=True)
w.write("wrapped\n"); w.close()
sys.stdout.reconfigure(encoding="latin-1"); print("\u00e9"); sys.stdout.reconfigure(encoding="utf-8")
print("\u00e9", sys.stdout.encoding, sys.stdout.buffer.writable(), sys.stdout.buffer.seekable())`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "wrapped\n\xe9\n\u00e9 utf-8 True False\n", out)
	_, out, _ = run(t, c, "print('next')")
	require.Equal(t, "next\n", out)
}

// TestStackWithoutDriver: an error's stack, as a cell reads it or a
// displayed value shows it, has the cell's frames and none of the driver's
// (nor node:vm's, through which the driver runs the cell), also for a
// function a cell defined that a later cell calls.
func TestStackWithoutDriver(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for _, cell := range []string{
		"console.log(new Error('x').stack); undefined",
		"({ e: new Error('x') })",
		"function made() { return new Error('y') }; undefined",
		"made().stack",
		"await null; new Error('z').stack",
	} {
		r, out, errOut := run(t, c, cell)
		require.Equal(t, 0, code(r), "%s: %s", cell, errOut)
		if out == "" {
			continue
		}
		require.Contains(t, out, "<cell ", cell)
		require.NotContains(t, out, "driver", cell)
		require.NotContains(t, out, "node:vm", cell)
	}
}

// TestThrownValueThatThrows: a thrown value whose every property read
// throws (a Proxy) fails its cell, exit 1, and the context lives: the
// driver read its code to tell an interrupt, and the throw from that read
// ended node (lost, every later cell 409).
func TestThrownValueThatThrows(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for _, cell := range []string{
		`throw new Proxy({}, { get() { throw new Error("px") } })`,
		`await null; throw new Proxy({}, { get() { throw new Error("px") } })`,
	} {
		r, _, _ := run(t, c, cell)
		require.Equal(t, 1, code(r), "%s: %+v", cell, r)
	}
	_, out, _ := run(t, c, "1 + 1")
	require.Equal(t, "2\n", out)
}

// TestExceptionThatCannotBeFormatted: an exception whose class breaks
// what reads it (its own __getattribute__ that raises, a property at
// __traceback__, a __cause__ that is not an exception, a metaclass's
// __getattribute__) fails its cell, exit 1, printed as the REPL prints it,
// the cell's frame then "name: text"; the context lives. SystemExit of a
// value whose class raises on every read exits 1 naming it, as python does.
// The driver's isinstance read the exception's __class__ and raised, which
// ended the context (exit 125); the others printed "Uncaught <E object at
// ...> (it could not be formatted)", a metaclass's from its first
// formatting, which raised in the driver. As the REPL does, the module is
// read through the metaclass and, when that read fails, is "<unknown>"
// (it was left out, "E3: f"), while the name is the type's own.
func TestExceptionThatCannotBeFormatted(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	for _, tc := range []struct{ code, last string }{
		{"class E(Exception):\n    def __getattribute__(self, n):\n        raise RuntimeError('no attr ' + n)\nraise E('x')", "E: x\n"},
		{"class E1(Exception):\n    @property\n    def __traceback__(self): raise RuntimeError('tb')\nraise E1('a')", "E1: a\n"},
		{"class E2(Exception): __cause__ = property(lambda s: 5)\nraise E2('b')", "E2: b\n"},
		{"class M(type):\n    def __getattribute__(cls, name):\n        raise RuntimeError('meta')\nclass E3(Exception, metaclass=M): pass\nraise E3('f')", "<unknown>.E3: f\n"},
		{"class M(type):\n    def __getattribute__(cls, name):\n        raise RuntimeError('meta')\nclass E4(Exception, metaclass=M): pass\nraise E4()", "<unknown>.E4\n"},
		{"class M5(type):\n    def __getattribute__(cls, name):\n        if name == '__module__': raise AttributeError(name)\n        return type.__getattribute__(cls, name)\nclass E5(Exception, metaclass=M5): pass\nraise E5('g')", "<unknown>.E5: g\n"},
		{"class M6(type):\n    def __getattribute__(cls, name):\n        if name == '__qualname__': raise AttributeError(name)\n        return type.__getattribute__(cls, name)\nclass E6(Exception, metaclass=M6): pass\nraise E6('h')", "E6: h\n"},
	} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 1, code(r), "%s: %+v %s", tc.code, r, errOut)
		require.Empty(t, out, tc.code)
		require.Regexp(t, `^Traceback \(most recent call last\):\n  File "<cell \d+>", line \d+, in <module>\n    raise E`, errOut, tc.code)
		require.True(t, strings.HasSuffix(errOut, "\n"+tc.last), "%s: %q", tc.code, errOut)
		require.NotContains(t, errOut, "driver", tc.code)
	}
	// With a sys.excepthook, which gets the traceback the exception holds,
	// and sys.last_* are set, as at the REPL.
	r, out, errOut := run(t, c, `import sys
def hook(t, v, tb): print("hook", t.__name__, str(v), type(tb).__name__, tb.tb_frame.f_code.co_filename)
sys.excepthook = hook
raise E1("c")`)
	require.Equal(t, 1, code(r), "%+v %s", r, errOut)
	require.Regexp(t, `^hook E1 c traceback <cell \d+>\n$`, out)
	require.Empty(t, errOut)
	runEach(t, c, []cellOut{{"sys.excepthook = sys.__excepthook__\n[sys.last_type.__name__, str(sys.last_value), sys.last_traceback is BaseException.__traceback__.__get__(sys.last_value)]", "['E1', 'c', True]\n"}})

	r, _, errOut = run(t, c, "class W:\n    def __getattribute__(self, n):\n        raise RuntimeError('no attr ' + n)\nraise SystemExit(W())")
	require.Equal(t, process.Exited, r.Reason, "%+v, stderr %q", r, errOut)
	require.Equal(t, 1, code(r), "%+v, stderr %q", r, errOut)
	require.Regexp(t, `^<__main__\.W object at 0x[0-9a-f]+>\n$`, errOut)
}

// TestPythonDisplayFrees: what a value's display frees (the value it
// replaces as "_") warns as the REPL's does from "<stdin>", from the cell:
// a coroutine never awaited, shown by one cell and replaced by the next
// one's value, warns "<cell 3>:2: RuntimeWarning: ...", from the line of
// the value, where the warning named the driver's file and line. A display
// that raises shows, as the REPL does, the cell's frame at the line of the
// value, then those of what the display called.
func TestPythonDisplayFrees(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	run(t, c, "async def f():\n    return 1")
	_, out, _ := run(t, c, "f()")
	require.True(t, strings.HasPrefix(out, "<coroutine object f at "), out)
	r, out, errOut := run(t, c, "x = 2\nx")
	require.Equal(t, 0, code(r))
	require.Equal(t, "2\n", out)
	require.True(t, strings.HasPrefix(errOut, "<cell 3>:2: RuntimeWarning: coroutine 'f' was never awaited\n"), errOut)
	require.NotContains(t, errOut, "driver")

	r, out, errOut = run(t, c, "class R:\n    def __repr__(self):\n        raise ValueError('no repr')\nr = R()\nr")
	require.Equal(t, 1, code(r))
	require.Empty(t, out)
	require.Equal(t, "Traceback (most recent call last):\n  File \"<cell 4>\", line 5, in <module>\n    r\n  File \"<cell 4>\", line 3, in __repr__\n    raise ValueError('no repr')\nValueError: no repr\n", errOut)
}

// TestPythonDisplayhook: a cell's value goes to sys.displayhook as at the
// REPL, also when a cell broke it: None fails the cell with the TypeError
// of calling it, and a deleted one with "RuntimeError: lost
// sys.displayhook", both shown at the cell's frame and line as the REPL
// shows them (a deleted hook failed in the driver, with an AttributeError,
// and neither showed a frame).
func TestPythonDisplayhook(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	for _, tc := range []struct{ code, errEnd string }{
		{"import sys\nsys.displayhook = None\n1 + 1", "TypeError: 'NoneType' object is not callable\n"},
		{"x = 1\ndel sys.displayhook\n2 + 2", "RuntimeError: lost sys.displayhook\n"},
	} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 1, code(r), "%s: %+v", tc.code, r)
		require.Empty(t, out, tc.code)
		require.True(t, strings.HasPrefix(errOut, "Traceback (most recent call last):\n  File \"<cell "), "%s: %q", tc.code, errOut)
		require.Contains(t, errOut, "\", line 3, in <module>\n", tc.code)
		require.True(t, strings.HasSuffix(errOut, tc.errEnd), "%s: %q", tc.code, errOut)
		require.NotContains(t, errOut, "driver", tc.code)
	}
	_, out, _ := run(t, c, "sys.displayhook = sys.__displayhook__\n3")
	require.Equal(t, "3\n", out)
}

// TestPythonExcepthook: an exception that ends a cell goes to the
// sys.excepthook a cell set, as at the REPL, with a traceback of the cell's
// frames only (the exception's own too); the driver printed it itself. A
// hook that raises, is None or was deleted is reported as the REPL reports
// it, and one that raises SystemExit ends the context with its status.
func TestPythonExcepthook(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, `import sys, traceback
def hook(t, v, tb):
    print("hook", t.__name__, v, v.__traceback__ is tb, [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(tb)])
sys.excepthook = hook`)
	require.Equal(t, 0, code(r), errOut)
	for _, tc := range []struct{ code, out string }{
		{"def f(): 1/0\nf()", "hook ZeroDivisionError division by zero True [('<cell 2>', 2, '<module>'), ('<cell 2>', 1, 'f')]\n"},
		{"import asyncio\nawait asyncio.sleep(0)\nraise KeyError('k')", "hook KeyError 'k' True [('<cell 3>', 3, '<module>')]\n"},
	} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 1, code(r), "%s: %+v", tc.code, r)
		require.Equal(t, tc.out, out, tc.code)
		require.Empty(t, errOut, tc.code)
	}
	for _, tc := range []struct{ hook, errStart, errHas string }{
		{"def hook(t, v, tb): raise KeyError('k')", "Error in sys.excepthook:\nTraceback (most recent call last):\n", "KeyError: 'k'\n\nOriginal exception was:\nTraceback (most recent call last):\n"},
		{"hook = None", "Error in sys.excepthook:\nTypeError: 'NoneType' object is not callable\n\nOriginal exception was:\nTraceback (most recent call last):\n", ""},
		{"del hook", "sys.excepthook is missing\nTraceback (most recent call last):\n", ""},
	} {
		set := "sys.excepthook = hook"
		if tc.hook == "del hook" {
			set = "del sys.excepthook"
		}
		r, _, errOut := run(t, c, tc.hook+"\n"+set)
		require.Equal(t, 0, code(r), "%s: %s", tc.hook, errOut)
		r, out, errOut := run(t, c, "1/0")
		require.Equal(t, 1, code(r), "%s: %+v", tc.hook, r)
		require.Empty(t, out, tc.hook)
		require.True(t, strings.HasPrefix(errOut, tc.errStart), "%s: %q", tc.hook, errOut)
		require.Contains(t, errOut, tc.errHas, tc.hook)
		require.True(t, strings.HasSuffix(errOut, "ZeroDivisionError: division by zero\n"), "%s: %q", tc.hook, errOut)
		require.NotContains(t, errOut, "During handling", tc.hook)
		require.NotContains(t, errOut, "driver", tc.hook)
	}
	r, out, errOut := run(t, c, "def hook(t, v, tb):\n    print('exiting')\n    raise SystemExit(4)\nsys.excepthook = hook\n1/0")
	require.Equal(t, 4, code(r), "%+v %s", r, errOut)
	require.Equal(t, "exiting\n", out)
	_, _, err := c.Run(t.Context(), CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
}

// TestPythonSurrogates: sys.stdout and sys.stderr encode as the
// interpreter's own streams do: stdout with the error handler its locale
// or PYTHONIOENCODING gives (a lone surrogate raises UnicodeEncodeError
// under "strict", as at the REPL), stderr with "backslashreplace". Both
// backslash-escaped what they could not encode.
func TestPythonSurrogates(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python, Env: map[string]string{"PYTHONIOENCODING": "utf-8:strict"}})
	r, out, errOut := run(t, c, `print("\ud800")`)
	require.Equal(t, 1, code(r), "%+v", r)
	require.Empty(t, out)
	require.True(t, strings.HasSuffix(errOut, "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 0: surrogates not allowed\n"), errOut)
	r, out, errOut = run(t, c, `import sys; print("\ud800", file=sys.stderr); sys.stdout.errors`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "'strict'\n", out)
	require.Equal(t, "\\ud800\n", errOut)
	c = newContext(t, Options{Language: Python, Env: map[string]string{"PYTHONIOENCODING": "utf-8:replace"}})
	_, out, _ = run(t, c, `print("\ud800")`)
	require.Equal(t, "?\n", out)
}

// TestPythonLastException: as the REPL does, a cell that fails leaves its
// exception in sys.last_type, sys.last_value and sys.last_traceback (and
// sys.last_exc from Python 3.12 on), with the traceback of the cell's
// frames only, so that pdb.pm() and traceback.print_last() work in the
// next cell. A syntax error is kept too, with no traceback.
func TestPythonLastException(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, _ := run(t, c, "def f(): 1/0\nf()")
	require.Equal(t, 1, code(r))
	runEach(t, c, []cellOut{
		{"import sys, traceback\n[sys.last_type.__name__, str(sys.last_value), sys.last_value.__traceback__ is sys.last_traceback, getattr(sys, 'last_exc', sys.last_value) is sys.last_value, [(f.filename, f.name) for f in traceback.extract_tb(sys.last_traceback)]]",
			"['ZeroDivisionError', 'division by zero', True, True, [('<cell 1>', '<module>'), ('<cell 1>', 'f')]]\n"},
		{"import pdb\npdb.pm()", "> <cell 1>(1)f()\n-> def f(): 1/0\n(Pdb) \n"}, // stdin is at its end: pdb quits
	})
	r, out, errOut := run(t, c, "traceback.print_last()")
	require.Equal(t, 0, code(r), errOut)
	require.Empty(t, out)
	require.True(t, strings.HasPrefix(errOut, "Traceback (most recent call last):\n  File \"<cell 1>\", line 2, in <module>\n"), errOut)
	require.Contains(t, errOut, "  File \"<cell 1>\", line 1, in f\n")
	require.True(t, strings.HasSuffix(errOut, "ZeroDivisionError: division by zero\n"), errOut)
	require.NotContains(t, errOut, "driver")
	r, _, _ = run(t, c, "1 +")
	require.Equal(t, 1, code(r))
	_, out, _ = run(t, c, "[sys.last_type.__name__, sys.last_traceback, getattr(sys, 'last_exc', sys.last_value) is sys.last_value]")
	require.Equal(t, "['SyntaxError', None, True]\n", out)
}

// TestPythonExcepthookHandlesNothing: the sys.excepthook a cell set is
// called as the REPL calls it, with no exception being handled
// (sys.exc_info() gave the one it was given, as the driver called it from
// its own except clause), for a syntax error too, which the driver printed
// without the hook.
func TestPythonExcepthookHandlesNothing(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "import sys\ndef hook(t, v, tb): print('hook', t.__name__, sys.exc_info())\nsys.excepthook = hook")
	require.Equal(t, 0, code(r), errOut)
	for _, tc := range []struct{ code, name string }{{"1/0", "ZeroDivisionError"}, {"1 +", "SyntaxError"}, {"raise KeyboardInterrupt", "KeyboardInterrupt"}} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 1, code(r), "%s: %+v", tc.code, r)
		require.Equal(t, "hook "+tc.name+" (None, None, None)\n", out, tc.code)
		require.Empty(t, errOut, tc.code)
	}
}
