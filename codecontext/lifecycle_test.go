package codecontext

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/require"
)

// waitStarted waits until the driver has said it runs cell, or cell has
// ended: a cell that ends at once can be over before the engine reads the
// driver's word that it started, which is then for no running cell and
// never heard (under load, time.sleep(0.02) was).
func waitStarted(t *testing.T, cell *Cell) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	for {
		cell.mu.Lock()
		started := cell.isStarted
		cell.mu.Unlock()
		if started {
			return
		}
		select {
		case <-cell.Done():
			return
		case <-ctx.Done():
			t.Fatal("cell never started")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestInterrupt: kill INT stops a busy loop, a sleep, a blocked read of an
// open stdin, a pending await; the cell is signaled INT, the context keeps
// its state, and no driver frame shows.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lang  Language
		name  string
		code  string
		stdin process.Stdin
	}{
		{Python, "busy loop", "while True: pass", ""},
		{Python, "sleep", "import time; time.sleep(60)", ""},
		{Python, "input", "input()", process.StdinOpen},
		{Python, "program", "import subprocess; subprocess.run(['sleep', '60'])", ""},
		{JavaScript, "busy loop", "for(;;){}", ""},
		{JavaScript, "await", "await new Promise(r => setTimeout(r, 60000))", ""},
		{JavaScript, "stdin", "for await (const b of process.stdin) {}", process.StdinOpen},
		{JavaScript, "program", "require('child_process').execSync('sleep 60')", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang)+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: tc.lang})
			set := map[Language]string{Python: "kept = 1", JavaScript: "var kept = 1"}[tc.lang]
			run(t, c, set)
			interruptKeeps(t, c, CellOptions{Code: tc.code + "\nkept = 2", Stdin: tc.stdin})
		})
	}
}

// interruptRunning submits the cell, interrupts it once it runs, and
// requires that it ends signaled INT.
func interruptRunning(t *testing.T, c *Context, opts CellOptions) *Cell {
	t.Helper()
	cell, err := c.Submit(opts)
	require.NoError(t, err)
	waitStarted(t, cell)
	time.Sleep(100 * time.Millisecond) // let it get into the loop, also on a busy machine
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, cell)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "INT", r.Signal, "%+v", r)
	return cell
}

// interruptKeeps runs the cell, interrupts it once it runs, and requires
// that it ends signaled INT with no driver frame in its stderr and that
// kept, which the cell would have set to 2, is still 1.
func interruptKeeps(t *testing.T, c *Context, opts CellOptions) {
	t.Helper()
	cell := interruptRunning(t, c, opts)
	_, errOut := output(cell)
	require.NotContains(t, errOut, "driver")
	require.NotContains(t, errOut, "node:vm")
	_, out, _ := run(t, c, "kept")
	require.Equal(t, "1\n", out)
}

// TestExecutionTimeout: the cell is interrupted at its deadline, reports
// timed_out, and the context lives on.
func TestExecutionTimeout(t *testing.T) {
	t.Parallel()
	for lang, code := range map[Language]string{
		Python:     "import time; time.sleep(60)",
		JavaScript: "await new Promise(r => setTimeout(r, 60000))",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			r, _, _ := runOpts(t, c, CellOptions{Code: code, ExecutionTimeout: 200 * time.Millisecond})
			require.Equal(t, process.TimedOut, r.Reason)
			_, out, _ := run(t, c, "1 + 1")
			require.Equal(t, "2\n", out)
		})
	}
}

// TestTimeoutEndsStuckContext: a cell that goes on after the interrupt at its
// timeout ends its context StopGrace later; queued cells fail.
func TestTimeoutEndsStuckContext(t *testing.T) {
	t.Parallel()
	for lang, code := range map[Language]string{
		Python:     "import time\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass",
		JavaScript: "({ [Symbol.for('nodejs.util.inspect.custom')]() { for(;;){} } })", // the driver prints the value: out of reach of the interrupt
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			cell, err := c.Submit(CellOptions{Code: code, ExecutionTimeout: 100 * time.Millisecond})
			require.NoError(t, err)
			queued, err := c.Submit(CellOptions{Code: "1"})
			require.NoError(t, err)
			require.Equal(t, process.TimedOut, wait(t, cell).Reason)
			require.Equal(t, process.Failed, wait(t, queued).Reason)
			<-c.Done()
			require.Equal(t, process.Terminal, c.Info().State)
			_, err = c.Submit(CellOptions{Code: "1"})
			require.ErrorIs(t, err, ErrContextEnded)
		})
	}
}

// TestExitAsInterruptorLooks: a cell that exits as the JavaScript driver's
// worker looks at the main thread, its inspector session connected, gets
// none of Node's "Waiting for the debugger to disconnect..." in its stderr.
// The look comes when a cell was sent while the main thread was held (here
// by a callback an earlier cell left, blocked in execSync), and one in
// flight as the cell exits is a matter of timing: 12 contexts.
func TestExitAsInterruptorLooks(t *testing.T) {
	t.Parallel()
	for i := range 12 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			r, _, errOut := run(t, c, "await null; 1") // starts the worker
			require.Equal(t, 0, code(r), errOut)
			r, _, errOut = run(t, c, "setTimeout(() => { require('child_process').execSync('sleep 0.5') }, 0); 2")
			require.Equal(t, 0, code(r), errOut)
			cell, err := c.Submit(CellOptions{Code: "console.log('bye'); process.exit(3)"})
			require.NoError(t, err)
			r = wait(t, cell)
			require.Equal(t, process.Exited, r.Reason)
			require.Equal(t, 3, code(r))
			out, errOut := output(cell)
			require.Equal(t, "bye\n", out)
			require.Empty(t, errOut)
		})
	}
}

// TestExitEndsContext: sys.exit(3) / process.exit(3) report 3, fail the
// queued cells and end the context with 3, with the cell's output and no
// more: after a cell that awaited, which starts the JavaScript driver's
// worker, Node wrote "Waiting for the debugger to disconnect..." to the
// exiting cell's stderr, for the worker's inspector session.
func TestExitEndsContext(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"python":             "import sys; print('bye'); sys.exit(3)",
		"javascript":         "console.log('bye'); process.exit(3)",
		"javascript awaited": "console.log('bye'); process.exit(3)",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lang := Language(strings.Fields(name)[0])
			c := newContext(t, Options{Language: lang})
			if strings.HasSuffix(name, "awaited") {
				r, _, errOut := run(t, c, "await null; 1")
				require.Equal(t, 0, code(r), errOut)
			}
			cell, err := c.Submit(CellOptions{Code: src})
			require.NoError(t, err)
			queued, err := c.Submit(CellOptions{Code: "1"})
			require.NoError(t, err)
			r := wait(t, cell)
			require.Equal(t, process.Exited, r.Reason)
			require.Equal(t, 3, code(r))
			out, errOut := output(cell)
			require.Equal(t, "bye\n", out)
			require.Empty(t, errOut)
			q := wait(t, queued)
			require.Equal(t, process.Failed, q.Reason)
			<-c.Done()
			require.Equal(t, 3, code(*c.Info().Result))
			_, err = c.Submit(CellOptions{Code: "1"})
			require.ErrorIs(t, err, ErrContextEnded)
			require.ErrorIs(t, err, process.ErrUnsupported)
		})
	}
}

// TestJavaScriptThrowingAsyncHookEndsContext: an async_hooks hook whose
// callback throws ends the interpreter as it ends plain node, which prints
// the error and exits 1: the cell and the context end exited 1, the error
// on the cell's stderr. Node exits from inside its own bookkeeping, where
// the driver cannot take the throw for the cell's.
func TestJavaScriptThrowingAsyncHookEndsContext(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `require("async_hooks").createHook({ init() { throw new Error("hook") } }).enable(); setTimeout(() => {}, 1)`)
	require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
	require.Equal(t, 1, code(r))
	require.Contains(t, errOut, "Error: hook")
	<-c.Done()
	require.Equal(t, 1, code(*c.Info().Result))
	_, err := c.Submit(CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
}

// TestPythonExitStatus: sys.exit with an int ends the context with the
// status plain python3 exits with, for one that does not fit a C long too
// (2**64: 255, where the low byte alone gave 0).
func TestPythonExitStatus(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"2**64", "-2**64", "2**63", "2**63 - 2", "2**40 + 3", "-1", "True"} {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			want := exitCode(t, exec.Command("python3", "-c", "import sys; sys.exit("+n+")"))
			c := newContext(t, Options{Language: Python})
			r, _, errOut := run(t, c, "import sys; sys.exit("+n+")")
			require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
			require.Equal(t, want, code(r), errOut)
			<-c.Done()
			require.Equal(t, want, code(*c.Info().Result))
		})
	}
}

// TestPythonExecEndsContext: a cell that replaces the interpreter
// (os.execv) ends the context as sys.exit does: the cell has the new
// program's output and reports its exit status, and so does the context.
// Nothing is left to read cells, and the program gets none of the driver's
// descriptors but the cell's fds 0 to 2.
func TestPythonExecEndsContext(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import os; os.execv("/bin/sh", ["sh", "-c", "echo out; echo err >&2; ls /proc/self/fd; exit 7"])`)
	require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
	require.Equal(t, 7, code(r))
	require.Equal(t, "out\n0\n1\n2\n3\n", out) // 3: ls's own directory
	require.Equal(t, "err\n", errOut)
	<-c.Done()
	require.Equal(t, 7, code(*c.Info().Result))
	_, err := c.Submit(CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
}

// TestCwdFollows: the context's cwd is the interpreter's after each cell,
// and so is the cwd of the cell's result, as a session command's.
func TestCwdFollows(t *testing.T) {
	t.Parallel()
	for lang, code := range map[Language]string{
		Python:     "import os; os.chdir(%q)",
		JavaScript: "process.chdir(%q)",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			dir, err := os.MkdirTemp(t.TempDir(), "a b'")
			require.NoError(t, err)
			c := newContext(t, Options{Language: lang, Cwd: t.TempDir()})
			r, _, _ := run(t, c, strings.Replace(code, "%q", strconv.Quote(dir), 1))
			require.Equal(t, dir, r.Cwd, "the result's cwd")
			require.Equal(t, dir, c.Cwd())
			require.Equal(t, dir, c.Info().Cwd)
			cell, err := c.Submit(CellOptions{Code: "1"})
			require.NoError(t, err)
			wait(t, cell)
			require.Equal(t, dir, cell.Info().Cwd, "a cell starts where the last left off")
		})
	}
}

// TestCwdRemoved: a cell that moves to a directory and removes it leaves
// the context's cwd at the path that directory had, as a session's: the
// interpreter finds no path to it, and the context's cwd once stayed where
// the cell started.
func TestCwdRemoved(t *testing.T) {
	t.Parallel()
	for lang, text := range map[Language]string{
		Python:     "import os; os.chdir(%q); os.rmdir(%q)",
		JavaScript: "process.chdir(%q); require('fs').rmdirSync(%q)",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "gone")
			require.NoError(t, os.Mkdir(dir, 0o755))
			c := newContext(t, Options{Language: lang, Cwd: t.TempDir()})
			r, _, errOut := run(t, c, strings.ReplaceAll(text, "%q", strconv.Quote(dir)))
			require.Equal(t, 0, code(r), errOut)
			require.Equal(t, dir, r.Cwd, "the result's cwd")
			require.Equal(t, dir, c.Cwd())
		})
	}
}

// TestCwdPastBound: a cell in a directory whose path is longer than the
// interpreter or the engine can name ends with its status, no cwd and an
// error saying why, and the context's cwd is left out too until a cell
// moves back: Python past sentinel.MaxCwd (its getcwd walks up past
// PATH_MAX), JavaScript past PATH_MAX (Node's process.cwd fails, ERANGE,
// and so does the kernel's link), where the context kept the directory it
// had before and the cell said nothing.
func TestCwdPastBound(t *testing.T) {
	t.Parallel()
	name := strconv.Quote(strings.Repeat("d", 250))
	for _, tc := range []struct {
		lang          Language
		deeper, chdir string // chdir: %s is the path
		why           string
	}{
		{Python, "import os\nfor i in range(" + strconv.Itoa(sentinel.MaxCwd/251+20) + "):\n    os.mkdir(" + name + "); os.chdir(" + name + ")",
			"os.chdir(%s)", sentinel.CwdTooLong},
		{JavaScript, "const fs = require('fs');\nfor (let i = 0; i < 20; i++) { fs.mkdirSync(" + name + "); process.chdir(" + name + ") }",
			"process.chdir(%s)", cwdUnnamed},
	} {
		t.Run(string(tc.lang), func(t *testing.T) {
			t.Parallel()
			base, err := filepath.EvalSymlinks(t.TempDir()) // removed with what is under it, however deep
			require.NoError(t, err)
			c := newContext(t, Options{Language: tc.lang, Cwd: base})
			r, _, errOut := run(t, c, tc.deeper)
			require.Equal(t, 0, code(r), "%s %q, stderr %q", r.Reason, r.Error, errOut)
			require.Zero(t, len(r.Cwd), "bytes of cwd")
			require.Equal(t, tc.why, r.Error)
			require.Zero(t, len(c.Cwd()), "bytes of the context's cwd")

			r, _, _ = run(t, c, fmt.Sprintf(tc.chdir, strconv.Quote(base)))
			require.Equal(t, 0, code(r), "%s %q", r.Reason, r.Error)
			require.Equal(t, base, r.Cwd)
			require.Empty(t, r.Error)
			require.Equal(t, base, c.Cwd())
		})
	}
}

// TestDeleteRunningCell: a running cell cannot be deleted; an ended one can.
func TestDeleteRunningCell(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	cell, err := c.Submit(CellOptions{Code: "import time; time.sleep(60)"})
	require.NoError(t, err)
	waitStarted(t, cell)
	err = cell.Stop(t.Context())
	require.ErrorIs(t, err, process.ErrUnsupported)
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	wait(t, cell)
	require.NoError(t, cell.Stop(t.Context()))
}

// TestCloseKillsChildren: deleting a context ends its interpreter and what
// it started, also a child that left its session.
func TestCloseKillsChildren(t *testing.T) {
	t.Parallel()
	for lang, code := range map[Language]string{
		Python:     "import subprocess; a = subprocess.Popen(['sleep', '100']); b = subprocess.Popen(['setsid', 'sleep', '100']); print(a.pid, b.pid)",
		JavaScript: "const cp = require('child_process'); console.log(cp.spawn('sleep', ['100']).pid, cp.spawn('sleep', ['100'], {detached: true}).pid)",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			c, err := New(ctx, Options{Language: lang})
			require.NoError(t, err)
			_, out, errOut := run(t, c, code)
			require.Empty(t, errOut)
			var pids []int
			for _, f := range strings.Fields(out) {
				pid, err := strconv.Atoi(f)
				require.NoError(t, err)
				pids = append(pids, pid)
			}
			pids = append(pids, c.Info().PID)
			require.Len(t, pids, 3)
			require.NoError(t, c.Close())
			for _, pid := range pids {
				for proctree.Alive(pid) {
					select {
					case <-ctx.Done():
						t.Fatalf("process %d outlived its context", pid)
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
		})
	}
}

// TestRefused: an unknown language and a missing interpreter are invalid
// arguments that say what to do.
func TestRefused(t *testing.T) {
	_, err := New(t.Context(), Options{Language: "cobol"})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
	require.Contains(t, err.Error(), "python or javascript")

	t.Setenv("PATH", t.TempDir())
	for _, lang := range languages {
		_, err := New(t.Context(), Options{Language: lang})
		require.ErrorIs(t, err, process.ErrInvalidArgument)
		require.Contains(t, err.Error(), "install")
		require.True(t, errors.Is(err, process.ErrInvalidArgument))
	}
}

// TestDiesBetweenCells: an interpreter that exits while no cell runs ends
// its context with its exit status.
func TestDiesBetweenCells(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	run(t, c, "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.1), os._exit(5))).start()")
	select {
	case <-c.Done():
	case <-time.After(deadline):
		t.Fatal("the context did not end")
	}
	r := c.Info().Result
	require.Equal(t, process.Exited, r.Reason)
	require.Equal(t, 5, code(*r))
	_, err := c.Submit(CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
}

// TestOtherSignalsReachChildren: a signal other than INT reaches the cell's
// child processes, never the interpreter, which goes on with the cell.
func TestOtherSignalsReachChildren(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	cell, err := c.Submit(CellOptions{Code: "import subprocess; print(subprocess.run(['sleep', '60']).returncode)"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	for len(proctree.Descendants(c.Info().PID)) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the cell's child never started")
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.NoError(t, cell.Kill(syscall.SIGTERM, 0, 0))
	r := wait(t, cell)
	require.Equal(t, process.Exited, r.Reason)
	out, _ := output(cell)
	require.Equal(t, "-15\n", out)
	_, out, _ = run(t, c, "1 + 1")
	require.Equal(t, "2\n", out)
}

// TestKillQueuedCell: a cell killed in the queue never runs.
func TestKillQueuedCell(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	first, err := c.Submit(CellOptions{Code: "await new Promise(r => setTimeout(r, 60000))"})
	require.NoError(t, err)
	queued, err := c.Submit(CellOptions{Code: "globalThis.ran = true"})
	require.NoError(t, err)
	require.NoError(t, queued.Kill(syscall.SIGINT, 0, 0))
	require.Equal(t, process.Signaled, wait(t, queued).Reason)
	waitStarted(t, first)
	require.NoError(t, c.Kill(syscall.SIGINT, 0, 0))
	require.Equal(t, "INT", wait(t, first).Signal)
	_, out, _ := run(t, c, "typeof ran")
	require.Equal(t, "'undefined'\n", out)
}

// TestInterruptEndsWedgedContext: a cell busy where no interrupt reaches it
// (a JavaScript callback it left behind, before its end; a Python loop
// that swallows KeyboardInterrupt) and that has no timeout is still running
// StopGrace after kill INT: the interpreter is killed, the cell and the
// context are lost with the reason said, and the cells queued behind it
// fail at once with that reason.
func TestInterruptEndsWedgedContext(t *testing.T) {
	t.Parallel()
	for lang, code := range map[Language]string{
		Python:     "while True:\n    try:\n        print('ready', flush=True)\n        while True: pass\n    except KeyboardInterrupt:\n        pass",
		JavaScript: "setImmediate(() => { console.log('ready'); while (true) {} }); undefined",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang, StopGrace: 300 * time.Millisecond})
			cell, err := c.Submit(CellOptions{Code: code})
			require.NoError(t, err)
			queued, err := c.Submit(CellOptions{Code: "1"})
			require.NoError(t, err)
			waitOutput(t, cell, "ready")
			require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
			r := wait(t, cell)
			require.Equal(t, process.Lost, r.Reason, "%+v", r)
			require.Contains(t, r.Error, "did not stop")
			q := wait(t, queued)
			require.Equal(t, process.Failed, q.Reason)
			require.Contains(t, q.Error, "did not stop")
			<-c.Done()
			ci := c.Info()
			require.Equal(t, process.Lost, ci.Result.Reason, "%+v", ci.Result)
			require.Contains(t, ci.Result.Error, "did not stop")
			_, err = c.Submit(CellOptions{Code: "1"})
			require.ErrorIs(t, err, ErrContextEnded)
		})
	}
}

// TestQueuedTimeout: a cell's execution timeout counts from its submission:
// queued behind a cell that does not end, it ends timed_out without having
// run, and the context lives on.
func TestQueuedTimeout(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	first, err := c.Submit(CellOptions{Code: "await new Promise(r => setTimeout(r, 60000))"})
	require.NoError(t, err)
	queued, err := c.Submit(CellOptions{Code: "globalThis.ran = true", ExecutionTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	r := wait(t, queued)
	require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
	require.Contains(t, r.Error, "queue")
	require.Equal(t, process.Running, first.Info().State)
	require.NoError(t, first.Kill(syscall.SIGINT, 0, 0))
	require.Equal(t, "INT", wait(t, first).Signal)
	_, out, _ := run(t, c, "typeof ran")
	require.Equal(t, "'undefined'\n", out)
}

// waitOutput waits until the cell's stdout holds want.
func waitOutput(t *testing.T, cell *Cell, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	for {
		if out, _ := output(cell); strings.Contains(out, want) {
			return
		}
		select {
		case <-ctx.Done():
			out, errOut := output(cell)
			t.Fatalf("no %q in the cell's output: %q, %q", want, out, errOut)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestDriverKeepsWhatItCalls: a cell that replaces what the driver calls in
// what the cell shares with it — the os, json, ast, io and socket modules
// and the builtins exec, eval and compile in Python (mock.patch does, for
// a with block), the fs, vm, util and module
// modules, Buffer and AsyncLocalStorage in Node — and an
// Error.prepareStackTrace that throws change the cell's own calls only:
// later cells run and report their output.
func TestDriverKeepsWhatItCalls(t *testing.T) {
	t.Parallel()
	for lang, breaks := range map[Language][]string{
		Python: {
			"import os; os.write = os.open = os.close = os.dup2 = os.read = None",
			"import json, ast; json.loads = None; ast.parse = None",
			"import io; io.open = None",
			"import socket; socket.socket.recv_into = socket.socket.sendall = socket.socket.makefile = None",
			"import builtins; builtins.exec = builtins.eval = lambda *a, **k: None",
			"import builtins; builtins.exec = builtins.eval = None",
			"import builtins; builtins.compile = None",
		},
		JavaScript: {
			"const fs = require('fs'); fs.writeSync = fs.openSync = fs.closeSync = null",
			"Buffer.from = Buffer.concat = Buffer.byteLength = null",
			"const { AsyncLocalStorage: A } = require('async_hooks'); A.prototype.getStore = () => undefined; A.prototype.run = null",
			"require('vm').Script = null; require('util').inspect = () => 'X'; require('module').createRequire = null",
			"Error.prepareStackTrace = () => { throw 1 }",
		},
	} {
		for _, brk := range breaks {
			t.Run(string(lang)+"/"+brk, func(t *testing.T) {
				t.Parallel()
				c := newContext(t, Options{Language: lang})
				r, _, errs := run(t, c, brk)
				require.Equal(t, 0, code(r), "%+v %q", r, errs)
				r, out, _ := run(t, c, map[Language]string{Python: "print('still here')", JavaScript: "console.log('still here')"}[lang])
				require.Equal(t, 0, code(r), "%+v", r)
				require.Equal(t, "still here\n", out)
				r, _, errs = run(t, c, map[Language]string{Python: "1/0", JavaScript: "throw new Error('boom')"}[lang])
				require.Equal(t, 1, code(r), "%+v", r)
				require.Contains(t, errs, map[Language]string{Python: "ZeroDivisionError", JavaScript: "boom"}[lang])
			})
		}
	}
}

// TestDriverFailureSaysWhy: a cell that breaks what the driver calls beyond
// its reach ends the context, and the next cell ends lost, saying that the
// driver failed and why, not exited with the status the driver's failure
// left.
func TestDriverFailureSaysWhy(t *testing.T) {
	t.Parallel()
	for lang, brk := range map[Language]string{
		// json.loads's own code looks up the builtins the cell replaced.
		Python:     "import builtins; builtins.isinstance = None",
		JavaScript: "require('net').Socket.prototype.write = function () { throw new Error('no write') }",
	} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: lang})
			run(t, c, brk)
			cell, err := c.Submit(CellOptions{Code: "1"})
			require.NoError(t, err)
			r := wait(t, cell)
			require.Equal(t, process.Lost, r.Reason, "%+v", r)
			require.Contains(t, r.Error, "driver failed")
			require.Contains(t, r.Error, map[Language]string{Python: "TypeError", JavaScript: "no write"}[lang])
			<-c.Done()
		})
	}
}

// TestPlantedDirectoryLink: a cell that replaces its context's directory
// with a symbolic link to another does not make the engine make its FIFOs
// there: the link goes, the directory is made anew, and later cells run as
// usual.
func TestPlantedDirectoryLink(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	elsewhere := t.TempDir()
	run(t, c, "import os, shutil; shutil.rmtree("+strconv.Quote(c.dir.Path())+"); os.symlink("+strconv.Quote(elsewhere)+", "+strconv.Quote(c.dir.Path())+")")
	for range 2 { // while a cell runs, its FIFOs are in the context's directory
		res, stdout, _ := run(t, c, "print(os.listdir("+strconv.Quote(elsewhere)+"))")
		require.Equal(t, 0, code(res), "%+v", res)
		require.Equal(t, "[]\n", stdout, "the engine made files in the link's target")
	}
}

// TestDirBaseRemoved removes the directory every context's directory is
// made in (a daemon's instance directory, which a host's clean-up of
// /dev/shm/conch-* takes with it): the next context is made there all the
// same, and runs.
func TestDirBaseRemoved(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "instance")
	require.NoError(t, os.Mkdir(base, 0o700))
	newContext(t, Options{Language: Python, Dir: base})
	require.NoError(t, os.RemoveAll(base))
	next := newContext(t, Options{Language: Python, Dir: base})
	r, out, errOut := run(t, next, "print('next')")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "next\n", out)
}

// TestDirBaseTaken: when the directory the contexts' directories are made
// in (the daemon's instance directory) is removed, and another user makes
// a directory of their own at its name, or puts a symbolic link there, a
// context whose directory went with it moves to a new one made beside it,
// where its cells run and are interrupted, and so do new contexts: nothing
// of theirs is made in the other user's directory or where the link
// points. Before, both made their FIFOs there.
func TestDirBaseTaken(t *testing.T) {
	t.Parallel()
	for _, lang := range []Language{Python, JavaScript} {
		for _, how := range []string{"foreign", "link"} {
			t.Run(string(lang)+"/"+how, func(t *testing.T) {
				t.Parallel()
				if how == "foreign" && os.Geteuid() != 0 {
					t.Skip("needs root, to make a directory another user owns")
				}
				elsewhere := t.TempDir()
				base := filepath.Join(t.TempDir(), "conch-instance")
				require.NoError(t, os.Mkdir(base, 0o700))
				c := newContext(t, Options{Language: lang, Dir: base})
				set := map[Language]string{Python: "kept = 1", JavaScript: "var kept = 1"}[lang]
				run(t, c, set)
				require.NoError(t, os.RemoveAll(base))
				if how == "link" {
					require.NoError(t, os.Symlink(elsewhere, base))
				} else {
					require.NoError(t, os.Mkdir(base, 0o777))
					require.NoError(t, os.Chmod(base, 0o777))
					require.NoError(t, os.Chown(base, 65534, 65534))
				}
				wait := map[Language]string{Python: "import time; time.sleep(60)", JavaScript: "await new Promise(r => setTimeout(r, 60000))"}[lang]
				interruptKeeps(t, c, CellOptions{Code: wait + "\nkept = 2"})
				next := newContext(t, Options{Language: lang, Dir: base})
				_, out, errOut := run(t, next, "1 + 1")
				require.Equal(t, "2\n", out, errOut)
				in := base
				if how == "link" {
					in = elsewhere
				}
				entries, err := os.ReadDir(in)
				require.NoError(t, err)
				require.Empty(t, entries, "the contexts made their files in %s", in)
				require.True(t, strings.HasPrefix(c.dir.Path(), base+"-"), c.dir.Path())
			})
		}
	}
}

// TestLateInterruptUnderCellsHandler: a cell that puts Python's own
// signal.default_int_handler back (or another handler that raises) keeps it
// for the cells' code, but an interrupt that comes between cells, where the
// driver runs, raises nothing there: the context lives on, and the handler
// still raises KeyboardInterrupt in a later cell. Interrupts that land as
// each of a row of cells ends leave the context as they find it too. The
// late interrupt is sent once the cell has ended (the file ended is
// there): a thread that slept 0.2 s first sent it, under load, while the
// cell still ran, and ended it.
func TestLateInterruptUnderCellsHandler(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	dir := t.TempDir()
	ended, done := filepath.Join(dir, "ended"), filepath.Join(dir, "done")
	r, _, errOut := run(t, c, `import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
def late():
    while not os.path.exists(`+strconv.Quote(ended)+`):
        time.sleep(0.01)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    time.sleep(0.2)
    open(`+strconv.Quote(done)+`, "w").close()
threading.Thread(target=late).start()`)
	require.Equal(t, 0, code(r), errOut)
	require.NoError(t, os.WriteFile(ended, nil, 0o600))
	for { // the late interrupt has come when done is there
		if _, err := os.Stat(done); err == nil {
			break
		}
		select {
		case <-c.Done():
			t.Fatalf("the late interrupt ended the context: %+v", c.Info().Result)
		case <-time.After(5 * time.Millisecond):
		}
	}
	for range 2 {
		r, out, errOut := run(t, c, "print('alive'); signal.getsignal(signal.SIGINT) is signal.default_int_handler")
		require.Equal(t, 0, code(r), "%+v %s", r, errOut)
		require.Equal(t, "alive\nTrue\n", out)
	}
	// Interrupts as cells end: each cell either ends by itself or is
	// interrupted, and the context goes on.
	for i := range 20 {
		cell, err := c.Submit(CellOptions{Code: "time.sleep(0.02)"})
		require.NoError(t, err)
		waitStarted(t, cell)
		time.Sleep(time.Duration(i) * 2 * time.Millisecond)
		require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
		r := wait(t, cell)
		require.Contains(t, []process.Reason{process.Exited, process.Signaled}, r.Reason, "%+v", r)
	}
	interruptKeeps(t, c, CellOptions{Code: "kept = 1\ntime.sleep(60)\nkept = 2"})
}

// TestPythonDriverFailsOnABrokenModule: a cell that breaks what the driver
// uses as it reads the next cell (json's decoder) makes the driver fail:
// the next cell ends lost, saying that the driver failed and why, and so
// does the context, and later submissions say so too.
func TestPythonDriverFailsOnABrokenModule(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "import json; json._default_decoder = None")
	require.Equal(t, 0, code(r), errOut)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	_, r, err := c.Run(ctx, CellOptions{Code: "1"})
	require.NoError(t, err)
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	require.Contains(t, r.Error, "driver failed")
	require.Contains(t, r.Error, "AttributeError")
	<-c.Done()
	res := c.Info().Result
	require.Equal(t, process.Lost, res.Reason, "%+v", res)
	require.Contains(t, res.Error, "AttributeError")
	_, err = c.Submit(CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
	require.Contains(t, err.Error(), "AttributeError")
}

// TestJavaScriptDriverFailsOnABrokenBuiltin: a cell that breaks a built-in
// of Node's own context (through vm.runInThisContext, as a module that
// patches Array.prototype would), which the driver uses as it reads the
// next cell, makes the driver fail: the next cell ends lost, saying that
// the driver failed and why. It was never run, and the context waited for
// ever.
func TestJavaScriptDriverFailsOnABrokenBuiltin(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `require("vm").runInThisContext("Array.prototype.push = function () { throw new Error('push broken') }"); 1`)
	require.Equal(t, 0, code(r), errOut)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	_, r, err := c.Run(ctx, CellOptions{Code: "2"})
	require.NoError(t, err, "the next cell hung")
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	require.Contains(t, r.Error, "driver failed")
	require.Contains(t, r.Error, "push broken")
}

// TestLongControlLine: a cell that writes a line longer than 64 KiB on the
// driver's socket does not stop the engine's reading of it: a later
// interrupt still finds its cell started and interrupts it. Before, the
// reader ended at that line, and every later interrupt ended its context.
func TestLongControlLine(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import os, stat
fds = [f for f in range(3, 64) if os.path.exists("/proc/self/fd/%d" % f) and stat.S_ISSOCK(os.fstat(f).st_mode)]
for fd in fds:
    os.write(fd, b"x" * 70000 + b"\n")
len(fds)`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "1\n", out)
	run(t, c, "kept = 1")
	interruptKeeps(t, c, CellOptions{Code: "import time; time.sleep(60)\nkept = 2"})
}

// TestCwdWithoutOption: a context made without a cwd reports the
// directory its interpreter starts in, the daemon's, at once, and so does
// its first cell (both were empty until the first cell ended).
func TestCwdWithoutOption(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	for _, lang := range languages {
		c := newContext(t, Options{Language: lang})
		require.Equal(t, wd, c.Cwd())
		require.Equal(t, wd, c.Info().Cwd)
		cell, _, err := c.Run(t.Context(), CellOptions{Code: "1"})
		require.NoError(t, err)
		require.Equal(t, wd, cell.Info().Cwd)
	}
}

// TestDriverDeathsReported: what a cell does to the driver beyond an
// exception it raises is reported for what it is. A JavaScript
// cell that removes every listener of process leaves the driver's: an
// exception a later cell's timer throws fails that cell, and the context
// lives on. A Python cell that sets sys.stderr = None and raises gets its
// traceback on its stderr, and the context lives on; so does one whose
// sys.stderr raises as it is written, KeyboardInterrupt or another
// BaseException (the cell hung for ever with the first, and the context
// was lost with the second). (A Python cell that closes the driver's
// descriptors: TestDescriptorsClosed.)
func TestDriverDeathsReported(t *testing.T) {
	t.Parallel()
	t.Run("removeAllListeners", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		r, _, errOut := run(t, c, "process.removeAllListeners(); 1")
		require.Equal(t, 0, code(r), errOut)
		r, _, errOut = run(t, c, `setTimeout(() => { throw new Error("boom") }, 10); await new Promise(r => setTimeout(r, 200)); 2`)
		require.Equal(t, 1, code(r), "%+v %q", r, errOut)
		require.Contains(t, errOut, "boom")
		require.NotContains(t, errOut, "value:")
		_, out, _ := run(t, c, "3")
		require.Equal(t, "3\n", out)
	})
	// Within the cell that removed them too: the exception, or the
	// rejection, fails that cell. Node found no listener and ended the
	// interpreter, its report naming the driver's rewrite of the cell.
	t.Run("removeAllListeners in the failing cell", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		for _, failing := range []string{
			`setTimeout(() => { throw new Error("boom") }, 10); await new Promise(r => setTimeout(r, 200)); 1`,
			`await null; Promise.reject(new Error("boom")); await new Promise(r => setTimeout(r, 50)); 2`,
		} {
			r, _, errOut := run(t, c, "process.removeAllListeners(); "+failing)
			require.Equal(t, 1, code(r), "%q: %+v %q", failing, r, errOut)
			require.Contains(t, errOut, "Error: boom", failing)
			require.NotContains(t, errOut, "value:", failing)
			require.NotContains(t, errOut, "Node.js v", failing)
		}
		_, out, _ := run(t, c, "3")
		require.Equal(t, "3\n", out)
	})
	t.Run("stderr None", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		r, _, errOut := run(t, c, "import sys; sys.stderr = None; 1/0")
		require.Equal(t, 1, code(r), "%+v", r)
		require.Contains(t, errOut, "ZeroDivisionError")
		_, out, _ := run(t, c, "sys.stderr = sys.__stderr__; 3")
		require.Equal(t, "3\n", out)
	})
	for _, raised := range []string{"KeyboardInterrupt", "E('from write')"} {
		t.Run("stderr raises "+raised, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			r, _, errOut := run(t, c, "import sys\n"+
				"class E(BaseException): pass\n"+
				"class W:\n    def write(self, s): raise "+raised+"\n    def flush(self): pass\n"+
				"sys.stderr = W()\n1/0")
			require.Equal(t, 1, code(r), "%+v", r)
			require.Contains(t, errOut, "ZeroDivisionError")
			_, out, _ := run(t, c, "sys.stderr = sys.__stderr__; 3")
			require.Equal(t, "3\n", out)
		})
	}
}

// TestNegativeTimeoutRefused: a cell's negative ExecutionTimeout is an
// invalid argument, as a command's and a process's are; it ran with no
// timeout.
func TestNegativeTimeoutRefused(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	_, err := c.Submit(CellOptions{Code: "1", ExecutionTimeout: -time.Second})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
}

// TestDescriptorsClosed: a Python cell that closes the driver's descriptors
// (os.closerange, os.close in a loop; fds 0 to 2 too, or from a thread
// after the cell ended) ends the context: the cell then running is lost,
// and so is the context, both saying that a cell closed the driver's
// descriptors. Before, the error said the driver had failed with EBADF,
// as if a cell had replaced what it calls, the context ended exited 70
// with no reason given, and when the cell closed fds 0 to 2 as well the
// cell itself ended exited 70, saying nothing.
func TestDescriptorsClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, code string }{
		{"closerange", `import os; os.closerange(3, 1 << 16); print("closed all")`},
		{"closerange from 0", `import os; os.closerange(0, 1 << 16); print("closed all")`},
		{"close loop", `import os
for fd in range(3, 1024):
    try:
        os.close(fd)
    except OSError:
        pass`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			r, _, errOut := run(t, c, tc.code)
			require.Equal(t, process.Lost, r.Reason, "%+v %q", r, errOut)
			require.Equal(t, descriptorsClosedWhy, r.Error)
			require.NotContains(t, errOut, "Fatal Python error")
			ended := wait(t, c)
			require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
			require.Equal(t, descriptorsClosedWhy, ended.Error)
		})
	}
	// From a thread of a cell that has ended: the driver, blocked reading
	// the next cell, finds its descriptors closed once it is sent.
	t.Run("between cells", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: Python})
		dir := t.TempDir()
		ended, done := filepath.Join(dir, "ended"), filepath.Join(dir, "closed")
		r, _, errOut := run(t, c, `import os, threading, time
def close():
    while not os.path.exists(`+strconv.Quote(ended)+`):
        time.sleep(0.01)
    os.closerange(0, 1 << 16)
    os.close(os.open(`+strconv.Quote(done)+`, os.O_CREAT | os.O_WRONLY))
threading.Thread(target=close).start()`)
		require.Equal(t, 0, code(r), "%+v %q", r, errOut)
		require.NoError(t, os.WriteFile(ended, nil, 0o600))
		// The thread makes its file once it has closed them all, or the
		// context ends first, as the interpreter may once they are closed;
		// either way the context must end lost, and say why.
		require.Eventually(t, func() bool {
			_, err := os.Stat(done)
			return err == nil || c.h.Ended()
		}, deadline, 10*time.Millisecond, "neither the thread's file nor the context's end came")
		cell, err := c.Submit(CellOptions{Code: "1"})
		if err == nil { // the driver's end may come first
			r = wait(t, cell)
			require.Contains(t, []string{descriptorsClosedWhy, ErrContextEnded.Error()}, r.Error, "%+v", r)
		}
		end := wait(t, c)
		require.Equal(t, process.Lost, end.Reason, "%+v", end)
		require.Equal(t, descriptorsClosedWhy, end.Error)
	})
}

// TestDescriptorsClosedUnderLaterCell: a thread of an earlier cell that
// closes the driver's descriptors while a later cell runs ends the context
// and that cell lost, saying why, and nothing of the driver's failure is
// in that cell's stderr. Before, its stderr ended with the driver's report
// ("conch: the driver failed: OSError: ..."), written there although the
// engine had read it from the driver's file.
func TestDescriptorsClosedUnderLaterCell(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	running := filepath.Join(t.TempDir(), "running")
	r, _, errOut := run(t, c, `import os, threading, time
def close():
    while not os.path.exists(`+strconv.Quote(running)+`):
        time.sleep(0.01)
    os.closerange(3, 1 << 16)
threading.Thread(target=close).start()`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	r, out, errOut := run(t, c, `import time; open(`+strconv.Quote(running)+`, "w").close(); time.sleep(2); print("slept")`)
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	require.Equal(t, descriptorsClosedWhy, r.Error)
	require.NotContains(t, out+errOut, "conch")
	ended := wait(t, c)
	require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
	require.Equal(t, descriptorsClosedWhy, ended.Error)
}

// TestDescriptorsClosedWithoutReportFile: a Python cell that removes the
// context's directory, where the driver writes why it failed, and closes
// the driver's descriptors still ends lost saying why: the driver, which
// can write no file, says so on the cell's stderr, the one descriptor of
// it left, where the engine finds it.
func TestDescriptorsClosedWithoutReportFile(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, `import os, shutil; shutil.rmtree(`+strconv.Quote(c.dir.Path())+`); os.closerange(3, 1 << 16); print("closed all")`)
	require.Equal(t, process.Lost, r.Reason, "%+v %q", r, errOut)
	require.Equal(t, descriptorsClosedWhy, r.Error)
	ended := wait(t, c)
	require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
	require.Equal(t, descriptorsClosedWhy, ended.Error)
}

// TestPythonDriverSocketReplaced: a Python cell that puts another file on
// the driver's socket (os.dup2 of /dev/null) ends, and the driver, which
// then reads end-of-file, ends the context lost, saying that a cell closed
// its descriptors. Before, the context ended exited 0 with no reason, and
// a later submission was refused saying only that it had ended.
func TestPythonDriverSocketReplaced(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, `import os
for f in os.listdir("/proc/self/fd"):
    try:
        if os.readlink("/proc/self/fd/" + f).startswith("socket"):
            os.dup2(os.open("/dev/null", os.O_RDWR), int(f))
    except OSError:
        pass`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	ended := wait(t, c)
	require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
	require.Equal(t, descriptorsClosedWhy, ended.Error)
	_, err := c.Submit(CellOptions{Code: "1"})
	require.ErrorIs(t, err, ErrContextEnded)
	require.ErrorContains(t, err, descriptorsClosedWhy)
}

// TestPythonExitFinalizes: sys.exit in a cell ends the context as the
// interpreter's own exit does: it waits for the non-daemon threads, runs
// the atexit handlers, their output the cell's, and flushes a file left
// open, as plain python3 does; it used to end the interpreter at once.
// A thread or a handler that never ends is ended by the cell's timeout,
// and the context ends all the same.
func TestPythonExitFinalizes(t *testing.T) {
	t.Parallel()
	t.Run("finalized", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		c := newContext(t, Options{Language: Python, Cwd: dir})
		r, _, errOut := run(t, c, "import atexit, sys, threading, time\n"+
			"atexit.register(lambda: print('handler'))\n"+
			"f = open('kept.txt', 'w'); f.write('kept')")
		require.Equal(t, 0, code(r), errOut)
		r, out, errOut := run(t, c, "def late():\n    time.sleep(0.3)\n    print('thread')\n"+
			"threading.Thread(target=late).start()\nprint('bye'); sys.exit(3)")
		require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
		require.Equal(t, 3, code(r), errOut)
		require.Equal(t, "bye\nthread\nhandler\n", out)
		require.Empty(t, errOut)
		<-c.Done()
		require.Equal(t, 3, code(*c.Info().Result))
		b, err := os.ReadFile(filepath.Join(dir, "kept.txt"))
		require.NoError(t, err)
		require.Equal(t, "kept", string(b))
	})
	for name, src := range map[string]string{
		"handler": "import atexit, sys, time\natexit.register(lambda: time.sleep(60))\nsys.exit(0)",
		"thread":  "import sys, threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\nsys.exit(0)",
	} {
		t.Run(name+" never ends", func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			start := time.Now()
			r, _, errOut := runOpts(t, c, CellOptions{Code: src, ExecutionTimeout: 300 * time.Millisecond})
			require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
			require.Contains(t, errOut, "KeyboardInterrupt")
			require.NotContains(t, errOut, "driver")
			<-c.Done()
			require.Less(t, time.Since(start), 5*time.Second, "ended by the interrupt, not killed after StopGrace")
		})
	}
}

// TestJavaScriptNodesBuiltinsReplaced: a cell that replaces builtins of
// Node's own context (through vm.runInThisContext) that the driver calls —
// the timers it ends each cell with, looks for an interrupt at a cell's
// first await with and ends an interrupted cell's code with;
// Promise.prototype.then and Reflect.apply, through which it waits for its
// promises — changes its own calls, not the driver's, which took them at
// start: the next cell runs (one that awaits ends with its value), and a
// cell busy after its first await is still interrupted. Before, with the
// timers replaced the driver failed at the end of the next cell, and with
// a then that never calls back every later cell that awaited hung until
// its execution timeout killed the interpreter 5 s later.
func TestJavaScriptNodesBuiltinsReplaced(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ brk, next, want string }{
		{"setImmediate = clearImmediate = setInterval = clearInterval = () => { throw new Error('timers broken') }", "kept + 1", "2\n"},
		{"Promise.prototype.then = function () { return this }", `await 1; "next"`, "'next'\n"},
		{"Reflect.apply = null", `await 1; "next"`, "'next'\n"},
	} {
		t.Run(tt.brk, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			r, _, errOut := run(t, c, "require('vm').runInThisContext("+strconv.Quote(tt.brk)+"); var kept = 1")
			require.Equal(t, 0, code(r), errOut)
			r, out, errOut := runOpts(t, c, CellOptions{Code: tt.next, ExecutionTimeout: 10 * time.Second})
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			require.Equal(t, tt.want, out)
			interruptBusy(t, c, "await null; require('fs').writeFileSync(%q, ''); for (;;) {}", 0)
		})
	}
}

// TestJavaScriptNodesApplyReplaced pins what the driver cannot keep: a cell
// that replaces Function.prototype.apply of Node's own context breaks
// Node's own code (its event emitter calls it), which then fails to report
// an exception: the interpreter ends as node does then, with status 7 and
// Node's report (the driver's frames among it) on the running cell's
// stderr, and the cell and its context end exited 7.
func TestJavaScriptNodesApplyReplaced(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `require("vm").runInThisContext("Function.prototype.apply = null"); 1`)
	require.Equal(t, process.Exited, r.Reason, "%+v", r)
	require.Equal(t, 7, code(r), "%+v", r)
	require.Contains(t, errOut, "apply is not a function")
	<-c.Done()
}

// closeSockets is a JavaScript cell's code that closes every socket the
// interpreter holds: the driver's connection to the engine among them.
const closeSockets = `{ const fs = require("fs"); for (const f of fs.readdirSync("/proc/self/fd")) { try { if (fs.readlinkSync("/proc/self/fd/" + f).startsWith("socket")) fs.closeSync(+f) } catch (e) {} } }`

// TestJavaScriptSocketClosed: a JavaScript cell that closes the driver's
// socket (fs.closeSync) leaves a driver that hears no cell, and Node, which
// never learns of the close, runs on: the engine kills the interpreter, and
// the context, and a cell then running, end lost, saying that a cell closed
// the driver's socket; a later submission is refused with that. Before,
// the next cell hung running for ever, and its interrupt ended the context
// saying that the cell had not stopped.
func TestJavaScriptSocketClosed(t *testing.T) {
	t.Parallel()
	t.Run("cell ends", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		r, out, errOut := run(t, c, closeSockets+` "closed"`)
		// Its own end comes first, or the engine's kill does.
		if r.Reason != process.Lost {
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			require.Equal(t, "'closed'\n", out)
		} else {
			require.Equal(t, socketClosedWhy, r.Error)
		}
		cell, err := c.Submit(CellOptions{Code: `"next"`})
		if err == nil { // sent before the engine ended the context
			r = wait(t, cell)
			require.Contains(t, r.Error, socketClosedWhy, "%+v", r)
		} else {
			require.ErrorIs(t, err, ErrContextEnded)
			require.ErrorContains(t, err, socketClosedWhy)
		}
		ended := wait(t, c)
		require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
		require.Equal(t, socketClosedWhy, ended.Error)
		_, err = c.Submit(CellOptions{Code: "1"})
		require.ErrorIs(t, err, ErrContextEnded)
		require.ErrorContains(t, err, socketClosedWhy)
	})
	t.Run("cell runs on", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		r, _, errOut := run(t, c, closeSockets+` const t = Date.now(); while (Date.now() - t < 60000) {}`)
		require.Equal(t, process.Lost, r.Reason, "%+v %q", r, errOut)
		require.Equal(t, socketClosedWhy, r.Error)
		ended := wait(t, c)
		require.Equal(t, process.Lost, ended.Reason, "%+v", ended)
		require.Equal(t, socketClosedWhy, ended.Error)
	})
}

// TestLostCellEndsContextFirst: whoever sees a cell end lost, because its
// interpreter died under it, sees its context terminal too, with its own
// result, and the cell queued behind it failed: at the moment the cell's
// Done closes. Before, the cell's end came first, and the context read
// running (or exited 70, not yet lost) while its end was recorded. Both
// ways a context ends under a cell are tried, a few times each: a driver
// that fails, and says why, and an interpreter killed.
func TestLostCellEndsContextFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, code, why string }{
		{"driver failed", "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass", descriptorsClosedWhy},
		{"interpreter killed", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "the context's interpreter was killed by SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 3 {
				c := newContext(t, Options{Language: Python})
				cell, err := c.Submit(CellOptions{Code: tc.code})
				require.NoError(t, err)
				queued, err := c.Submit(CellOptions{Code: "1"})
				require.NoError(t, err)
				select {
				case <-cell.Done():
				case <-time.After(deadline):
					t.Fatal("the cell never ended")
				}
				info := c.Info() // at once: nothing may be on its way
				require.Equal(t, process.Terminal, info.State, "the context, as its cell ended %+v", cell.Result())
				require.NotNil(t, info.Result)
				require.Equal(t, process.Lost, cell.Result().Reason, "%+v", cell.Result())
				require.Equal(t, tc.why, cell.Result().Error)
				if tc.why == descriptorsClosedWhy { // a killed interpreter's context says how it died
					require.Equal(t, process.Lost, info.Result.Reason, "%+v", *info.Result)
					require.Equal(t, tc.why, info.Result.Error)
				}
				select {
				case <-queued.Done():
				default:
					t.Fatal("the queued cell was not failed yet")
				}
				require.Equal(t, process.Failed, queued.Result().Reason, "%+v", queued.Result())
			}
		})
	}
}
