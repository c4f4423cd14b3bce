package codecontext

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestLateOutput: a thread, a timer or a child that writes after its cell
// ended never reaches a later cell, nor its own. The late writers wait for
// the later cell to start (it makes the file "go") and it waits for them to
// have written (they make "wrote*"), so the late writes land in its run.
func TestLateOutput(t *testing.T) {
	t.Parallel()
	cells := map[Language][2]string{
		Python: {
			`import os, subprocess, threading, time
def late():
    while not os.path.exists('go'):
        time.sleep(0.01)
    print('late thread')
    import sys; sys.stderr.write('late thread err\n')
    open('wrote1', 'w').close()
threading.Thread(target=late).start()
subprocess.Popen(['sh', '-c', 'while [ ! -e go ]; do sleep 0.01; done; echo late child; echo late child err >&2; touch wrote2'])
print('first')`,
			`open('go', 'w').close()
while not (os.path.exists('wrote1') and os.path.exists('wrote2')):
    time.sleep(0.01)
print('second')`,
		},
		JavaScript: {
			`const fs = require('fs');
const timer = setInterval(() => {
  if (!fs.existsSync('go')) return;
  clearInterval(timer);
  console.log('late timer'); console.error('late timer err');
  fs.writeFileSync('wrote1', '');
}, 10);
require('child_process').spawn('sh', ['-c', 'while [ ! -e go ]; do sleep 0.01; done; echo late child; echo late child err >&2; touch wrote2'], {stdio: 'inherit'});
console.log('first')`,
			`fs.writeFileSync('go', '');
await new Promise((resolve) => {
  const t = setInterval(() => {
    if (fs.existsSync('wrote1') && fs.existsSync('wrote2')) { clearInterval(t); resolve(); }
  }, 10);
});
console.log('second')`,
		},
	}
	for lang, cs := range cells {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang, Cwd: t.TempDir()})
			r1, out1, err1 := run(t, c, cs[0])
			require.Equal(t, 0, code(r1), err1)
			r2, out2, err2 := run(t, c, cs[1])
			require.Equal(t, 0, code(r2), err2)
			require.Equal(t, "first\n", out1)
			require.Empty(t, err1)
			require.Equal(t, "second\n", out2)
			require.Empty(t, err2)
		})
	}
}

// TestStdin: a cell reads what is written to its open stdin, and
// end-of-file with a closed one.
func TestStdin(t *testing.T) {
	t.Parallel()
	t.Run("python open", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		cell, err := c.Submit(CellOptions{Code: "print(input().upper())\nimport sys; print(repr(sys.stdin.read()))", Stdin: process.StdinOpen})
		require.NoError(t, err)
		require.NoError(t, cell.WriteStdin([]byte("abc\nrest")))
		require.NoError(t, cell.CloseStdin())
		require.Equal(t, 0, code(wait(t, cell)))
		out, _ := output(cell)
		require.Equal(t, "ABC\n'rest'\n", out)
		_, out, errOut := run(t, c, "input()")
		require.Empty(t, out)
		require.Contains(t, errOut, "EOFError")
	})
	t.Run("javascript open", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		cell, err := c.Submit(CellOptions{Code: "let s = ''; for await (const b of process.stdin) s += b; s.toUpperCase()", Stdin: process.StdinOpen})
		require.NoError(t, err)
		require.NoError(t, cell.WriteStdin([]byte("abc")))
		require.NoError(t, cell.CloseStdin())
		require.Equal(t, 0, code(wait(t, cell)))
		out, errOut := output(cell)
		require.Equal(t, "'ABC'\n", out, errOut)
		_, out, _ = run(t, c, "require('child_process').execSync('cat', {stdio: ['inherit', 'pipe', 'inherit']}).length")
		require.Equal(t, "0\n", out)
	})
}

// TestNoLeaks: a context's descriptors, FIFOs and processes are gone once
// it is closed.
func TestNoLeaks(t *testing.T) {
	for _, lang := range languages {
		c := newContext(t, Options{Language: lang})
		run(t, c, "1") // whatever the runtime opens once for all has been opened
		c.Close()
		before := openFDs(t)
		c = newContext(t, Options{Language: lang})
		for i := range 5 {
			cell, err := c.Submit(CellOptions{Code: strconv.Itoa(i), Stdin: process.StdinOpen})
			require.NoError(t, err)
			require.NoError(t, cell.CloseStdin())
			wait(t, cell)
		}
		dir, pid := c.dir.Path(), c.Info().PID
		require.NoError(t, c.Close())
		_, err := os.Stat(dir)
		require.True(t, os.IsNotExist(err), "the context's directory is removed")
		require.False(t, stillAlive(pid))
		// A descriptor another test's goroutine holds a moment (a look at
		// /proc of an escalation due) goes; a leaked one stays.
		require.Eventually(t, func() bool { return openFDs(t) <= before }, deadline, 10*time.Millisecond,
			"%s: descriptors %d, %d before", lang, openFDs(t), before)
	}
}

func stillAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && !strings.HasPrefix(target, "anon_inode:") {
			n++
		}
	}
	return n
}

// TestErrorFormat: a traceback or stack shows the cell's frames, also of
// code defined in an earlier cell, and nothing of the driver.
func TestErrorFormat(t *testing.T) {
	t.Parallel()
	for lang, cs := range map[Language][3]string{
		Python:     {"def g():\n    raise TypeError('deep')", "g()", "<cell 1>"},
		JavaScript: {"function g() { throw new TypeError('deep') }", "g()", "<cell 1>:1"},
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			run(t, c, cs[0])
			r, _, errOut := run(t, c, cs[1])
			require.Equal(t, 1, code(r))
			require.Contains(t, errOut, cs[2])
			require.Contains(t, errOut, "TypeError")
			require.NotContains(t, errOut, "driver")
		})
	}
	t.Run("javascript error properties", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		r, _, errOut := run(t, c, "require('./nonexistent')")
		require.Equal(t, 1, code(r))
		require.Contains(t, errOut, " {\n  code: 'MODULE_NOT_FOUND'")
		require.True(t, strings.HasSuffix(errOut, "}\n"), errOut)
		require.NotContains(t, errOut, "driver")
	})
}

// TestPythonStackShowsCellsOnly: a live stack a Python cell prints or
// formats with the traceback module, and the one logging's stack_info
// prints, ends at the cell's own frames, as plain "python3 -i" ends it at
// "<stdin>", on the main thread, in a cell with top-level await, in a
// signal handler and on a thread; limit counts the cell's frames. A cell
// that wraps those functions itself gets its own. Before, the driver's
// frames (main, _run, _execute) came first. inspect.stack, sys._getframe
// and a warning's stacklevel walk the real frames, the driver's under the
// cell's, as the docs say.
func TestPythonStackShowsCellsOnly(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	stack := func(cell, wantErr string) {
		t.Helper()
		r, out, errOut := run(t, c, cell)
		require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
		require.Equal(t, wantErr, errOut, "cell %q", cell)
	}
	stack("import traceback; traceback.print_stack()",
		"  File \"<cell 1>\", line 1, in <module>\n    import traceback; traceback.print_stack()\n")
	stack("import logging; logging.error('x', stack_info=True)",
		"ERROR:root:x\nStack (most recent call last):\n  File \"<cell 2>\", line 1, in <module>\n    import logging; logging.error('x', stack_info=True)\n")
	stack("def f():\n    return traceback.format_stack()\nimport sys; sys.stderr.write(''.join(f()))",
		"  File \"<cell 3>\", line 3, in <module>\n    import sys; sys.stderr.write(''.join(f()))\n"+
			"  File \"<cell 3>\", line 2, in f\n    return traceback.format_stack()\n")
	stack("import asyncio\nawait asyncio.sleep(0)\ntraceback.print_stack()",
		"  File \"<cell 4>\", line 3, in <module>\n    traceback.print_stack()\n")
	// The handler runs under the driver's guard of it, from the second
	// cell on (see _guarded_handler).
	stack("import os, signal\nsignal.signal(signal.SIGUSR1, lambda s, f: traceback.print_stack())", "")
	stack("def g():\n    os.kill(os.getpid(), signal.SIGUSR1)\ng()",
		"  File \"<cell 6>\", line 3, in <module>\n    g()\n"+
			"  File \"<cell 6>\", line 2, in g\n    os.kill(os.getpid(), signal.SIGUSR1)\n"+
			"  File \"<cell 5>\", line 2, in <lambda>\n    signal.signal(signal.SIGUSR1, lambda s, f: traceback.print_stack())\n")
	stack("signal.signal(signal.SIGUSR1, lambda s, f: traceback.print_stack(limit=2))\ng()",
		"  File \"<cell 6>\", line 2, in g\n    os.kill(os.getpid(), signal.SIGUSR1)\n"+
			"  File \"<cell 7>\", line 1, in <lambda>\n    signal.signal(signal.SIGUSR1, lambda s, f: traceback.print_stack(limit=2))\n")
	stack("import _thread, threading\ndone = threading.Event()\n_thread.start_new_thread(lambda: (traceback.print_stack(), done.set()), ())\ndone.wait(20)",
		"  File \"<cell 8>\", line 3, in <lambda>\n    _thread.start_new_thread(lambda: (traceback.print_stack(), done.set()), ())\n")

	r, out, errOut := run(t, c, "t = threading.Thread(target=lambda: print(''.join(traceback.format_stack()))); t.start(); t.join()")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	require.Contains(t, out, "in _bootstrap\n", "the thread's frames, as plain Python shows them")
	require.Contains(t, out, "File \"<cell 9>\", line 1, in <lambda>\n")
	require.NotContains(t, out, "driver")

	// A cell's own wrapper of walk_stack runs, and sees what the driver's shows.
	r, out, errOut = run(t, c, "walk = traceback.walk_stack\ncalls = []\n"+
		"traceback.walk_stack = lambda f: (calls.append(1), walk(f))[1]\n"+
		"s = traceback.extract_stack(); traceback.walk_stack = walk\n[x.filename for x in s], len(calls)")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	require.Equal(t, "(['<cell 10>'], 1)\n", out)

	// What walks the real frames goes on into the driver's.
	r, out, errOut = run(t, c, "import inspect, warnings\nwarnings.warn('w', stacklevel=2)\n"+
		"any(f.filename.endswith('driver.py') for f in inspect.stack()), sys._getframe(1).f_code.co_filename.endswith('driver.py')")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	require.Equal(t, "(True, True)\n", out)
	require.Contains(t, errOut, "driver.py:")
	require.Contains(t, errOut, "UserWarning: w\n")
}

// TestPythonLateRawWrites: raw writes to fds 1 and 2 (os.write, os.writev)
// from a thread of a Python cell that has ended reach neither a later cell
// nor the interpreter's own output, and report every byte written, while
// the running cell's own raw writes, also from its threads, stay in its log.
// Before, they went to fd 1 or 2 as it was then: the running cell's FIFO.
func TestPythonLateRawWrites(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, `import os, threading
go, done, res = threading.Event(), threading.Event(), []
def late():
    go.wait()
    res.append(os.write(1, b"late raw\n"))
    res.append(os.writev(2, [b"late ", b"rawv\n"]))
    done.set()
threading.Thread(target=late, daemon=True).start()`)
	require.Equal(t, 0, code(r), errOut)
	r, out, errOut := run(t, c, `go.set(); done.wait(20)
os.write(1, b"own\n")
t = threading.Thread(target=lambda: os.writev(2, [b"own thread\n"])); t.start(); t.join()
res`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "own\n[9, 10]\n", out)
	require.Equal(t, "own thread\n", errOut)
	require.NotContains(t, c.h.Diag().Tail(), "late")
}

// TestPythonLateOutputOtherWays: a thread started with _thread (no
// threading.Thread to carry its cell), also under threading's own name for
// that function, and posix.write (os.write under its own module's name) are
// kept to their cell as threading's threads and os.write are: what they
// write after the cell ended reaches no later cell. Before, the raw thread
// was taken for the running cell's, and posix.write was not looked at; a
// thread of threading._start_new_thread was until now.
func TestPythonLateOutputOtherWays(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, `import _thread, posix, threading
go, done, done2 = threading.Event(), threading.Event(), threading.Event()
def late():
    go.wait()
    print("late print")
    posix.write(1, b"late posix\n")
    done.set()
_thread.start_new_thread(late, ())
def late2():
    go.wait()
    print("late private")
    done2.set()
threading._start_new_thread(late2, ())
def late_posix():
    go.wait()
    posix.write(1, b"late thread posix\n")
threading.Thread(target=late_posix, daemon=True).start()`)
	require.Equal(t, 0, code(r), errOut)
	r, out, errOut := run(t, c, `go.set(); done.wait(20); done2.wait(20); import time; time.sleep(0.2)
print("own")`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "own\n", out)
}

// TestPythonThreadPoolOutput: work a cell gives a multiprocessing
// ThreadPool that an earlier cell made runs as the giving cell's: its
// output is that cell's, by every way to give it work. It was dropped, the
// pool's threads being the earlier cell's.
func TestPythonThreadPoolOutput(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	// say writes a whole line at once: two of the pool's threads may write
	// at the same time.
	r, out, errOut := run(t, c, "import sys\nfrom multiprocessing.pool import ThreadPool\ndef say(s): sys.stdout.write(s + '\\n')\ntp = ThreadPool(2)\ntp.map(say, ['first'])")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "first\n[None]\n", out)
	r, out, errOut = run(t, c, "tp.map(say, ['a', 'b']); tp.apply(say, ('c',)); list(tp.imap(say, ['d'])); list(tp.imap_unordered(say, ['e']))\n"+
		"tp.starmap(say, [('f',)]); tp.apply_async(say, ('g',), callback=lambda r: say('callback')).wait(); import time; time.sleep(0.2); say('own')")
	require.Equal(t, 0, code(r), errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(lines)
	require.Equal(t, []string{"a", "b", "c", "callback", "d", "e", "f", "g", "own"}, lines, "%q", out)
}

// TestPythonTracersSeeCellsOnly: a trace or profile function a cell sets
// (sys.settrace, sys.setprofile, as a debugger does) runs for the cells'
// code, this cell's and the next ones', never for the driver's between
// them: a tracer that printed was called for the driver's own code as it
// wrote the end markers under its output lock, and the context hung.
func TestPythonTracersSeeCellsOnly(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]string{
		"settrace":   "def tr(frame, event, arg):\n    print(event, frame.f_code.co_name)\n    return tr\nsys.settrace(tr)",
		"setprofile": "sys.setprofile(lambda frame, event, arg: print(event, frame.f_code.co_name))",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			// No frame of the driver's is entered while they are on (a
			// profile function still sees the driver take it off: its
			// c_call events name the frame the cell returned to).
			noDriver := func(out string) {
				t.Helper()
				require.NotRegexp(t, `(?m)^(call|line|return) (_execute|_display|_end_cell|_drivers_handler|_emit|write|_run)$`, out,
					"the driver's code was traced")
			}
			r, out, _ := run(t, c, "import sys\n"+set)
			require.Equal(t, 0, code(r), "%+v %q", r, out)
			noDriver(out) // the cell's own frame's return, for a profile function, and nothing else
			r, out, _ = run(t, c, "def cell_function():\n    return 41\nx = cell_function() + 1")
			require.Equal(t, 0, code(r), "%+v %q", r, out)
			require.Contains(t, out, "call cell_function")
			noDriver(out)
			r, out, _ = run(t, c, "sys.settrace(None); sys.setprofile(None); x")
			require.Equal(t, 0, code(r), "%+v %q", r, out)
			require.Contains(t, out, "42")
		})
	}
}

// TestPythonTracerSeesAwaitCellsLoop pins what a trace function the cells
// set sees of a cell with top-level await: that cell runs in the context's
// asyncio event loop, and the tracer sees the loop's code and the driver's
// frames that run the cell there (_awaited, _cell_coro), as well as the
// cell's own, as the README says. The driver cannot take them away without
// wrapping every callback the loop runs and the cell's coroutine in code
// of its own, which the cells' tasks and callbacks would then run under.
// The driver's work between cells stays untraced, after such a cell too.
func TestPythonTracerSeesAwaitCellsLoop(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import sys
def tr(frame, event, arg):
    if event == "call":
        print("call", frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name)
    return tr
sys.settrace(tr)`)
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	r, out, errOut = run(t, c, "async def cell_coroutine():\n    return 41\nx = await cell_coroutine() + 1")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	require.Contains(t, out, "call <cell 2> cell_coroutine\n")
	require.Contains(t, out, "call base_events.py run_until_complete\n", "the event loop's code")
	require.Contains(t, out, "call driver.py _cell_coro\n", "the driver's frame that runs the cell in the loop")
	r, out, errOut = run(t, c, "def cell_function():\n    return x\ncell_function()")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
	require.Equal(t, "call <cell 3> <module>\ncall <cell 3> <module>\ncall <cell 3> cell_function\n42\n", out) // its statements, then its expression
	r, out, errOut = run(t, c, "sys.settrace(None)")
	require.Equal(t, 0, code(r), "%+v %q %q", r, out, errOut)
}

// TestPythonBufferedStreamsFlushed: a buffered stream a cell puts in place
// of sys.stdout or sys.stderr (io.TextIOWrapper(sys.stdout.buffer), to
// choose an encoding) is flushed as the cell ends, as the REPL flushes both
// after each statement and the interpreter at its exit: what the cell
// printed, its traceback and its value are in its own log. Before, they
// stayed in the wrapper's buffer until a later cell flushed it, and landed
// in that cell's log, or were lost with sys.exit. A flush that never ends
// is the cell's own code: an interrupt ends the cell and the context lives.
func TestPythonBufferedStreamsFlushed(t *testing.T) {
	t.Parallel()
	const wrap = "import io, sys\n" +
		"sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\n" +
		"sys.stderr = io.TextIOWrapper(sys.stderr.buffer, encoding='utf-8')\n"
	t.Run("cells", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		r, out, errOut := run(t, c, wrap+"print('one'); print('e1', file=sys.stderr)")
		require.Equal(t, 0, code(r), errOut)
		require.Equal(t, "one\n", out)
		require.Equal(t, "e1\n", errOut)
		r, out, errOut = run(t, c, "print('two'); 2")
		require.Equal(t, 0, code(r), errOut)
		require.Equal(t, "two\n2\n", out)
		r, out, errOut = run(t, c, "1/0")
		require.Equal(t, 1, code(r), errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, "ZeroDivisionError")
		r, out, errOut = run(t, c, "print('four')")
		require.Equal(t, 0, code(r), errOut)
		require.Equal(t, "four\n", out)
		require.Empty(t, errOut)
	})
	t.Run("exit", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		r, out, errOut := run(t, c, wrap+"print('bye'); sys.exit(3)")
		require.Equal(t, 3, code(r), errOut)
		require.Equal(t, "bye\n", out)
	})
	t.Run("flush never ends", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		r, _, errOut := run(t, c, "import sys, time\nkept = 1\n"+
			"class Stuck:\n    def write(self, s): return len(s)\n    def flush(self): time.sleep(60)\n")
		require.Equal(t, 0, code(r), errOut)
		interruptRunning(t, c, CellOptions{Code: "sys.stdout = Stuck(); kept = 2"})
		r, out, errOut := run(t, c, "sys.stdout = sys.__stdout__; kept")
		require.Equal(t, 0, code(r), errOut)
		require.Equal(t, "2\n", out)
	})
}

// TestPythonNonBlockingStdout: a cell that makes its stdout non-blocking
// (os.set_blocking(1, False)) and fills its FIFO gets what plain Python
// gives, partial counts and BlockingIOError from its own raw writes, and
// its print and its end still reach the engine: fd 1 shares its open file,
// and with it O_NONBLOCK, with the driver's descriptor of the cell's FIFO,
// whose writes failed with EAGAIN, which ended the context. The cell fills
// the FIFO until a write fails (or 2 MiB are written, the engine reading
// as fast) just before its print and its end.
func TestPythonNonBlockingStdout(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "import os\nx = 1\n"+
		"def fill():\n    n = 0\n    while n < 2 << 20:\n"+
		"        try:\n            n += os.write(1, b'x' * 65536)\n"+
		"        except BlockingIOError:\n            return n")
	require.Equal(t, 0, code(r), errOut)
	for range 5 {
		r, out, errOut := run(t, c, "os.set_blocking(1, False)\nfill()\nprint('end')\nn = fill()")
		require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
		require.Equal(t, 0, code(r), errOut)
		require.Empty(t, errOut)
		// x's, the print's line, x's unless the second fill found the
		// FIFO still full; at most 4 MiB, all of which the log keeps.
		require.Equal(t, 1, strings.Count(out, "\n"))
		require.Equal(t, len(out)-len("end\n"), strings.Count(out, "x"))
		require.Contains(t, out, "xend\n")
	}
	r, out, errOut := run(t, c, "x")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "1\n", out)
}

// TestPythonStreamDetached: the idiom that rewraps sys.stdout with another
// encoding, io.TextIOWrapper(sys.stdout.detach(), ...), works: what the
// cell prints through the wrapper is in its log, and in later cells'. The
// driver's stream had no detach (io.UnsupportedOperation). It serves every
// cell, as sys.__stdout__, and stays usable once detached.
func TestPythonStreamDetached(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, "import io, sys\n"+
		"sys.stdout = io.TextIOWrapper(sys.stdout.detach(), encoding='utf-8')\n"+
		"sys.stderr = io.TextIOWrapper(sys.stderr.detach(), encoding='utf-8')\n"+
		"print('héllo'); print('érr', file=sys.stderr)")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "héllo\n", out)
	require.Equal(t, "érr\n", errOut)
	r, out, errOut = run(t, c, "print('next')")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "next\n", out)
	r, out, errOut = run(t, c, "sys.stdout = sys.__stdout__; print('back')")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "back\n", out)
}

// TestStdinUnreadAfterEOFIsDropped: what a cell left in its stdin FIFO
// after end-of-file is dropped and counted, though the feeder had closed
// its end of the FIFO by the cell's end (it was counted as none); what the
// cell read is not.
func TestStdinUnreadAfterEOFIsDropped(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	// The cell waits on gate before it reads: until the feeder has written
	// everything and closed its end.
	gate := filepath.Join(t.TempDir(), "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	g, err := os.OpenFile(gate, os.O_RDWR, 0)
	require.NoError(t, err)
	defer g.Close()
	cell, err := c.Submit(CellOptions{Code: "import os\nopen(" + strconv.Quote(gate) + ").readline()\n" +
		"n = 0\nwhile n < 10: n += len(os.read(0, 10 - n))", Stdin: process.StdinOpen})
	require.NoError(t, err)
	const total = 1000 // what the FIFO holds
	require.NoError(t, cell.WriteStdin(make([]byte, total)))
	require.NoError(t, cell.CloseStdin())
	dir, err := filepath.EvalSymlinks(c.dir.Path())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return cell.StdinQueued() == 0 && !slices.ContainsFunc(stdinFDs(dir), writes)
	}, 10*time.Second, time.Millisecond, "the feeder writes everything and closes its end")
	_, err = g.Write([]byte("\n"))
	require.NoError(t, err)
	r := wait(t, cell)
	require.Equal(t, 0, code(r), "%+v", r)
	require.Equal(t, int64(total-10), cell.Info().StdinDroppedBytes)
	require.Empty(t, stdinFDs(dir), "no descriptor of the FIFO is left")
}

// stdinFDs returns this process's descriptors of the cells' stdin FIFOs in
// dir.
func stdinFDs(dir string) []string {
	var found []string
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, ".in") {
			found = append(found, fd.Name())
		}
	}
	return found
}

// writes reports whether this process's descriptor fd is open for writing.
func writes(fd string) bool {
	info, _ := os.ReadFile("/proc/self/fdinfo/" + fd)
	for _, line := range strings.Split(string(info), "\n") {
		if flags, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(flags), 8, 32)
			return err == nil && n&syscall.O_ACCMODE != syscall.O_RDONLY
		}
	}
	return false
}

// TestStdinUnreadIsDropped: what a cell left of its stdin is dropped and
// counted, what was still queued and what its FIFO held alike.
func TestStdinUnreadIsDropped(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	cell, err := c.Submit(CellOptions{Code: "import os\nn = 0\nwhile n < 10: n += len(os.read(0, 10 - n))\nos.close(0)", Stdin: process.StdinOpen})
	require.NoError(t, err)
	const total = 500_000 // more than the FIFO holds
	require.NoError(t, cell.WriteStdin(make([]byte, total)))
	r := wait(t, cell)
	require.Equal(t, 0, code(r), "%+v", r)
	require.Equal(t, int64(total-10), cell.Info().StdinDroppedBytes)
}
