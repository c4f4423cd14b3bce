package codecontext

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestInterruptAfterAwait: kill INT stops a JavaScript cell busy after its
// first await — in the continuation, or in a timer's callback the cell
// awaits — where breakOnSigint does not reach; the cell is signaled INT and
// the context lives on with its state, its timers, its promises and its
// output.
func TestInterruptAfterAwait(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"after a timer":    "await new Promise(r => setTimeout(r, 10)); for(;;){}",
		"after await 0":    "await 0; for(;;){}",
		"in a timer":       "await new Promise(r => setTimeout(() => { for(;;){} }, 10))",
		"in an interval":   "await new Promise(r => setInterval(() => { for(;;){} }, 10))",
		"in a nested call": "const spin = () => { for(;;){} }; await new Promise(r => setImmediate(r)); spin()",
		"after I/O":        "await require('fs').promises.readFile('/proc/self/stat'); for(;;){}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			run(t, c, "var kept = 1")
			interruptKeeps(t, c, CellOptions{Code: src + "\nkept = 2"})
			r, out, errOut := run(t, c, "setTimeout(() => console.log('timer'), 5); await new Promise(r => setTimeout(r, 50)); await Promise.resolve('after')")
			require.Equal(t, 0, code(r), errOut)
			require.Equal(t, "timer\n'after'\n", out)
			// A second interrupt after the first works the same way.
			interruptRunning(t, c, CellOptions{Code: "await 0; for(;;){}"})
			_, out, _ = run(t, c, "kept + 1")
			require.Equal(t, "2\n", out)
		})
	}
}

// TestInterruptorStartKeepsStreams: the worker a JavaScript context starts at
// its first await opens files as it starts, while the driver closes fds 0 to
// 2 between cells and counts on reopening them with the same numbers; the
// cells right after the first await all run (the worker took fd 0 or 1 now
// and then, and the driver gave up).
func TestInterruptorStartKeepsStreams(t *testing.T) {
	t.Parallel()
	for i := range 6 {
		c := newContext(t, Options{Language: JavaScript})
		for _, code := range []string{"const z = await Promise.resolve(7)", "z + 1", "typeof require('os').cpus"} {
			cell, err := c.Submit(CellOptions{Code: code})
			require.NoError(t, err, "context %d, cell %q", i, code)
			r := wait(t, cell)
			require.Equal(t, process.Exited, r.Reason, "context %d, cell %q: %+v; the driver said %q", i, code, r, c.h.Diag().Tail())
		}
		c.Close()
	}
}

// TestInterruptedCellsLaterLoopIsEnded: an interrupt that comes while a
// cell awaits ends the cell at once, but the code after its await is still
// pending and runs when what it awaited settles, outside any cell. A loop
// there would hold the context's one thread for good: the driver ends it,
// and the next cell runs with the context's state.
func TestInterruptedCellsLaterLoopIsEnded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	awaiting, settle, looping := filepath.Join(dir, "awaiting"), filepath.Join(dir, "settle"), filepath.Join(dir, "looping")
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "var kept = 1")
	cell, err := c.Submit(CellOptions{Code: fmt.Sprintf(`const fs = require('fs');
await new Promise((r) => {
  const t = setInterval(() => {
    fs.writeFileSync(%q, ''); // a callback runs: the cell awaits
    if (fs.existsSync(%q)) { clearInterval(t); r(); }
  }, 10);
});
fs.writeFileSync(%q, '');
for (;;) {}`, awaiting, settle, looping)})
	require.NoError(t, err)
	waitFile(t, awaiting)
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, cell)
	require.Equal(t, "INT", r.Signal, "%+v", r)

	require.NoError(t, os.WriteFile(settle, nil, 0o600))
	waitFile(t, looping) // the interrupted cell's code now loops, after its end
	r, out, errOut := run(t, c, "kept + 1")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "2\n", out)
}

// waitFile waits until path exists, at most the tests' deadline.
func waitFile(t *testing.T, path string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.False(t, time.Now().After(end), "%s never appeared", path)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInterruptStoppedInterpreter: a cell that stops its own interpreter
// (SIGSTOP), or waits for a program it runs that stopped, is interrupted as
// any other: what is stopped is continued to take the interrupt, and the
// context lives on. Before, the interrupt waited, pending, and only the
// execution timeout ended the cell, with its context.
func TestInterruptStoppedInterpreter(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		lang Language
		code string
	}{
		"python/self":        {Python, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('back')"},
		"javascript/program": {JavaScript, "require('child_process').spawnSync('sh', ['-c', 'kill -STOP $$; echo back'], { stdio: 'inherit' })"},
		"javascript/self":    {JavaScript, "process.kill(process.pid, 'SIGSTOP'); console.log('back')"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: tc.lang})
			cell, err := c.Submit(CellOptions{Code: tc.code})
			require.NoError(t, err)
			processtest.WaitStopped(t, func() []int {
				return append(proctree.Descendants(c.cmd.Process.Pid), c.cmd.Process.Pid)
			}, deadline)
			require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
			r := wait(t, cell)
			require.NotEqual(t, process.TimedOut, r.Reason, "%+v", r)
			require.NotEqual(t, process.Lost, r.Reason, "%+v", r)
			out, _ := output(cell)
			if name != "javascript/self" {
				// Node ends the execution from its SIGINT watchdog's
				// thread: once continued, the cell's own thread may run
				// the statement after the stop before that thread ends it
				// (seen under the load of the whole suite).
				require.NotContains(t, out, "back")
			}
			r, out, _ = run(t, c, map[Language]string{Python: "print('next')", JavaScript: "console.log('next')"}[tc.lang])
			require.Equal(t, 0, code(r), "%+v", r)
			require.Equal(t, "next\n", out)
		})
	}
}

// TestInterruptStoppedBeforeStartRead: a cell that stopped its interpreter
// before the engine read the driver's word that it started (held here until
// the interrupt is sent) is not continued by its interrupt until that word
// is read, and then gets the interrupt first: the statement after the stop
// never runs. The interpreter was continued at once, and printed "back"
// before the interrupt came (seen under load).
func TestInterruptStoppedBeforeStartRead(t *testing.T) {
	t.Parallel()
	hold, read := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	c := newContext(t, Options{Language: Python, startRead: func() {
		once.Do(func() {
			read <- struct{}{}
			<-hold
		})
	}})
	var released sync.Once
	release := func() { released.Do(func() { close(hold) }) }
	defer release() // a failed test holds no reader
	cell, err := c.Submit(CellOptions{Code: "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('back')"})
	require.NoError(t, err)
	pid := c.cmd.Process.Pid
	processtest.WaitStopped(t, func() []int { return []int{pid} }, deadline)
	select {
	case <-read:
	case <-time.After(deadline):
		t.Fatal("the driver's word that the cell started was never read")
	}
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	require.True(t, proctree.Stopped(pid), "the interpreter was continued before its cell was known to run")
	release()
	r := wait(t, cell)
	require.NotEqual(t, process.Lost, r.Reason, "%+v", r)
	out, _ := output(cell)
	require.NotContains(t, out, "back")
	r, out, _ = run(t, c, "print('next')")
	require.Equal(t, 0, code(r), "%+v", r)
	require.Equal(t, "next\n", out)
}

// TestInterruptStoppedBetweenCells: an interpreter stopped from outside
// between cells (kill -STOP) is continued by the interrupt of a cell sent to
// it, which it never read while stopped: by kill INT, or at the cell's
// execution timeout. The cell ends, and the context lives on. Before, the
// interrupt waited for the cell to start, which it never did: the
// interpreter was killed 5 s later and the context lost.
func TestInterruptStoppedBetweenCells(t *testing.T) {
	t.Parallel()
	for _, lang := range languages {
		for _, how := range []string{"kill INT", "timeout"} {
			t.Run(string(lang)+"/"+how, func(t *testing.T) {
				t.Parallel()
				c := newContext(t, Options{Language: lang})
				run(t, c, "1")
				pid := c.cmd.Process.Pid
				require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
				processtest.WaitStopped(t, func() []int { return []int{pid} }, deadline)
				opts := CellOptions{Code: map[Language]string{Python: "print('hi')", JavaScript: "console.log('hi')"}[lang]}
				if how == "timeout" {
					opts.ExecutionTimeout = time.Second
				}
				cell, err := c.Submit(opts)
				require.NoError(t, err)
				require.Eventually(t, func() bool { return cell.state() != process.Starting }, deadline, 5*time.Millisecond)
				if how == "kill INT" {
					require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
				}
				r := wait(t, cell)
				require.NotEqual(t, process.Lost, r.Reason, "%+v", r)
				if how == "timeout" {
					require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
					require.Empty(t, r.Error)
				}
				r, out, _ := run(t, c, map[Language]string{Python: "print('next')", JavaScript: "console.log('next')"}[lang])
				require.Equal(t, 0, code(r), "%+v", r)
				require.Equal(t, "next\n", out)
			})
		}
	}
}

// TestLateWatchdogSignal: Node takes SIGINT on a watchdog thread of its
// own, which a busy machine may run late. A SIGINT sent to a cell that then
// ends by itself before that thread has run must not end the next cell's
// script. Here the interpreter's threads but its main one are held
// (ptrace) while a cell is interrupted and ends by itself, and let go while
// the next cell runs. Before, that cell ended interrupted (130); seen once
// under the load of the whole suite, after a cell that stopped its own
// interpreter was interrupted and continued.
func TestLateWatchdogSignal(t *testing.T) {
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "1")
	busy := func(ms int) string {
		return fmt.Sprintf("{ const t = Date.now(); while (Date.now() - t < %d); } ", ms)
	}
	thaw := holdThreads(t, c.cmd.Process.Pid)
	cell, err := c.Submit(CellOptions{Code: busy(150) + "1"})
	require.NoError(t, err)
	waitStarted(t, cell)
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	wait(t, cell) // it ends by itself, its interrupt still in flight
	next, err := c.Submit(CellOptions{Code: busy(300) + "console.log('next')"})
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	thaw()
	r := wait(t, next)
	out, errOut := output(next)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "next\n", out)
}

// holdThreads stops, through ptrace, the threads of process pid that block
// SIGINT (Node's watchdog helper among them), until thaw is called. The
// others are left to run: a held thread that took the signal itself would
// keep it from the handler, and V8's workers are waited on by the main one.
func holdThreads(t *testing.T, pid int) (thaw func()) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err)
	held, release, done := make(chan error, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // ptrace's requests come from the thread that attached
		defer runtime.UnlockOSThread()
		var tids []int
		defer func() {
			for _, tid := range tids {
				unix.PtraceDetach(tid)
			}
		}()
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if tid == pid || !blocksSIGINT(tid) {
				continue
			}
			if err := unix.PtraceSeize(tid); err != nil {
				held <- fmt.Errorf("ptrace seize %d: %w", tid, err)
				return
			}
			tids = append(tids, tid)
			if err := unix.PtraceInterrupt(tid); err != nil {
				held <- fmt.Errorf("ptrace interrupt %d: %w", tid, err)
				return
			}
			// Its stop is looked for in /proc, not waited for: the
			// engine's reaper in this process looks at every child's
			// events, and a wait4 here once never saw the stop.
			if !traceStopped(pid, tid) {
				held <- fmt.Errorf("thread %d did not stop", tid)
				return
			}
		}
		held <- nil
		<-release
	}()
	if err := <-held; err != nil {
		<-done
		t.Skipf("the interpreter's threads cannot be held: %v", err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { close(release); <-done }) }
	t.Cleanup(thaw)
	return thaw
}

// TestInterruptOnFullFileSystem: with the context's file system full (a
// cell filled /dev/shm), an interrupt still reaches the running cell: the
// file that names it is rewritten in place, with no new room. Before, the
// interrupt could not be named, and 5 s later the interpreter was killed
// and the context lost.
func TestInterruptOnFullFileSystem(t *testing.T) {
	t.Parallel()
	for _, lang := range []Language{Python, JavaScript} {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			dir := processtest.SmallTmpfs(t)
			c := newContext(t, Options{Language: lang, Dir: dir})
			fill := filepath.Join(dir, "fill")
			// Started and waited for as the engine's children are: the
			// package's reaper of orphans would otherwise reap it first,
			// and the Wait's "no child processes" pass for a full disk.
			fillUp := exec.Command("sh", "-c", "head -c 1000000 /dev/zero >"+fill+" 2>/dev/null")
			require.NoError(t, proctree.Start(fillUp))
			err := proctree.Wait(fillUp)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the file system did not fill")
			sleep := "import time; time.sleep(30)"
			if lang == JavaScript {
				sleep = "await new Promise(r => setTimeout(r, 30000))"
			}
			for range 2 {
				interruptRunning(t, c, CellOptions{Code: sleep})
			}
			require.NoError(t, os.Remove(fill))
			res, _, _ := run(t, c, "1")
			require.Equal(t, 0, code(res), "%+v", res)
		})
	}
}

// TestInterruptAfterDirectoryRemoved: a cell that removed its context's
// directory can still be interrupted: the files that name the cell to
// interrupt, gone with it, are made anew.
func TestInterruptAfterDirectoryRemoved(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	run(t, c, "import shutil; shutil.rmtree("+strconv.Quote(c.dir.Path())+")")
	interruptRunning(t, c, CellOptions{Code: "import time; time.sleep(30)"})
}

// TestInterruptAfterOwnDirectoryRemoved: a cell that removes its context's
// directory while it runs, and then runs on (busy, or asleep), is still
// interrupted, by kill INT or by its execution timeout, also when it put a
// directory the engine will not use at the directory's name (the engine
// makes its directory anew under another name, which the driver does not
// know of until the next cell). Before, the engine could not write the file
// that names the cell to interrupt and sent no signal: the kill was
// answered and nothing happened, and an execution timeout left the cell
// running until its interpreter was killed 5 s later, the context lost.
func TestInterruptAfterOwnDirectoryRemoved(t *testing.T) {
	t.Parallel()
	for _, lang := range []Language{Python, JavaScript} {
		for _, replace := range []bool{false, true} {
			for _, timeout := range []bool{false, true} {
				name := fmt.Sprintf("%s/replaced=%v/timeout=%v", lang, replace, timeout)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					c := newContext(t, Options{Language: lang})
					dir := c.dir.Path()
					shell := "rm -rf " + dir
					if replace {
						shell += " && mkdir -m 755 " + dir // not the engine's as it makes its own
						// The engine leaves it alone, as another user's: the
						// test takes away what it planted (in /dev/shm).
						t.Cleanup(func() { os.Remove(dir) })
					}
					busy := filepath.Join(t.TempDir(), "busy")
					src := fmt.Sprintf("import os, time\nos.system(%q)\nopen(%q, 'w').close()\ntime.sleep(30)", shell, busy)
					if lang == JavaScript {
						src = fmt.Sprintf("require('child_process').execSync(%q); require('fs').writeFileSync(%q, '');\n"+
							"{ const t = Date.now(); while (Date.now() - t < 30000); }", shell, busy)
					}
					opts := CellOptions{Code: src}
					if timeout {
						opts.ExecutionTimeout = 2 * time.Second
					}
					cell, err := c.Submit(opts)
					require.NoError(t, err)
					waitFile(t, busy)
					if !timeout {
						require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
					}
					r := wait(t, cell)
					if timeout {
						require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
					} else {
						require.Equal(t, process.Signaled, r.Reason, "%+v", r)
						require.Equal(t, "INT", r.Signal, "%+v", r)
					}
					r, out, errOut := run(t, c, "print(1 + 1)")
					if lang == JavaScript {
						r, out, errOut = run(t, c, "console.log(1 + 1)")
					}
					require.Equal(t, 0, code(r), "%+v %q", r, errOut)
					require.Equal(t, "2\n", out)
				})
			}
		}
	}
}

// TestInterruptWithSigintListener: after a cell added a process.on('SIGINT')
// listener (or added one and removed it), kill INT of a later cell busy in
// its synchronous script interrupts it, as without the listener, rather
// than kill the interpreter (Node leaves SIGINT at its default action while
// it has taken the listeners away around a script run); the listener stays.
func TestInterruptWithSigintListener(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]string{
		"kept":    "globalThis.heard = 0; process.on('SIGINT', () => { heard++ }); var kept = 1",
		"removed": "{ const f = () => {}; process.on('SIGINT', f); process.off('SIGINT', f) }; var kept = 1",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			r, _, errOut := run(t, c, set)
			require.Equal(t, 0, code(r), errOut)
			for range 2 {
				interruptKeeps(t, c, CellOptions{Code: "for(;;){}\nkept = 2"})
			}
			// As vm does, the driver takes the listeners away for the script run
			// only: they are back after an await.
			_, out, _ := run(t, c, "await null; process.listenerCount('SIGINT')")
			require.Equal(t, map[string]string{"kept": "1\n", "removed": "0\n"}[name], out)
		})
	}
}

// TestInterruptCaught: a Python cell that catches the KeyboardInterrupt of
// kill INT and then ends by itself reports what it did, as a session command
// that caught the interrupt does: its own status, with its output, and the
// context lives on with what the cell did after it. Before, the cell ended
// signaled INT all the same. One that lets the interrupt go ends signaled
// INT (TestInterrupt).
func TestInterruptCaught(t *testing.T) {
	t.Parallel()
	const wait30 = "try:\n    open(ready, 'w').close()\n    time.sleep(30)\n"
	cases := map[string]struct {
		code        string
		status      int
		out, errOut string
		kept        string
	}{
		"ends":   {wait30 + "except KeyboardInterrupt:\n    print('caught')\nkept = 2", 0, "caught\n", "", "2\n"},
		"raises": {wait30 + "except KeyboardInterrupt:\n    raise ValueError('after')\nkept = 2", 1, "", "ValueError: after\n", "1\n"},
		"awaits": {"await asyncio.sleep(0)\n" + wait30 + "except KeyboardInterrupt:\n    print('caught')\nkept = 2", 0, "caught\n", "", "2\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			ready := filepath.Join(t.TempDir(), "ready")
			r, _, errOut := run(t, c, "import asyncio, time\nkept = 1\nready = "+strconv.Quote(ready))
			require.Equal(t, 0, code(r), errOut)
			cell, err := c.Submit(CellOptions{Code: tc.code})
			require.NoError(t, err)
			waitFile(t, ready)
			require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
			r = wait(t, cell)
			out, errOut := output(cell)
			require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
			require.Equal(t, tc.status, code(r), "%+v %q", r, errOut)
			require.Equal(t, tc.out, out)
			require.True(t, strings.HasSuffix(errOut, tc.errOut), errOut)
			r, out, errOut = run(t, c, "kept")
			require.Equal(t, 0, code(r), errOut)
			require.Equal(t, tc.kept, out)
		})
	}
}

// traceStopped waits until thread tid of process pid is in a ptrace stop,
// a hang guard's time at most, and reports whether it is.
func traceStopped(pid, tid int) bool {
	for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(time.Millisecond) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			return false
		}
		if strings.Contains(string(status), "\nState:\tt (tracing stop)") {
			return true
		}
	}
	return false
}

// blocksSIGINT tells whether thread tid blocks SIGINT.
func blocksSIGINT(tid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigBlk:\t"); ok {
			bits, err := strconv.ParseUint(mask, 16, 64)
			return err == nil && bits&(1<<(syscall.SIGINT-1)) != 0
		}
	}
	return false
}

// TestInterruptExceptionText: an exception's text is the cell's own code:
// one whose __str__ never returns is interrupted as the cell would be, the
// cell ends signaled INT (or timed_out) naming the exception without its
// text (Python's traceback says its str() failed), and the context lives
// on with its state. The text was formatted
// with the interrupt not armed: nothing could stop it, and the context was
// ended after the grace, with all its state.
func TestInterruptExceptionText(t *testing.T) {
	t.Parallel()
	const loops = "class Loops(Exception):\n    def __str__(self):\n        while True: pass\n"
	c := newContext(t, Options{Language: Python})
	run(t, c, "kept = 1\n"+loops)
	cell := interruptRunning(t, c, CellOptions{Code: "kept = 2\nraise Loops()"})
	_, errOut := output(cell)
	require.Regexp(t, `Loops: (<exception str\(\) failed>|\(its text was interrupted)`, errOut)
	r, _, _ := runOpts(t, c, CellOptions{Code: "raise Loops()", ExecutionTimeout: 300 * time.Millisecond})
	require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
	_, out, _ := run(t, c, "kept")
	require.Equal(t, "2\n", out)
}

// TestInterruptExcepthook: an interrupt while the sys.excepthook a cell
// set runs ends the cell as interrupted, reported as CPython reports a hook
// that raised: "Error in sys.excepthook:" with the interrupt's traceback,
// then "Original exception was:" with the whole original; the context
// lives. Only "ZeroDivisionError: (its text was interrupted as it was
// formatted)" was printed, without the traceback.
func TestInterruptExcepthook(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "import sys, time\ndef h(t, v, tb):\n    print('hook start', flush=True)\n    time.sleep(100)\nsys.excepthook = h\nkept = 1")
	require.Equal(t, 0, code(r), errOut)
	cell, err := c.Submit(CellOptions{Code: "kept = 2\n1/0"})
	require.NoError(t, err)
	waitOutput(t, cell, "hook start\n")
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r = wait(t, cell)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "INT", r.Signal, "%+v", r)
	_, errOut = output(cell)
	require.Regexp(t, `^Error in sys.excepthook:\nTraceback \(most recent call last\):\n  File "<cell 1>", line 4, in h\n    time.sleep\(100\)\nKeyboardInterrupt\n\nOriginal exception was:\nTraceback \(most recent call last\):\n  File "<cell 2>", line 2, in <module>\n    1/0\n(.*\n)*ZeroDivisionError: division by zero\n$`, errOut)
	require.NotContains(t, errOut, "driver")
	_, out, _ := run(t, c, "kept")
	require.Equal(t, "2\n", out)
}

// TestSystemExitUnprintable: SystemExit with a value whose text cannot be
// had ends the context as any SystemExit does, with status 1 and the value
// named on stderr. The driver failed formatting it, and the cell was lost.
func TestSystemExitUnprintable(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "class B:\n    def __str__(self): raise ValueError('no')\nraise SystemExit(B())")
	require.Equal(t, process.Exited, r.Reason, "%+v, stderr %q", r, errOut)
	require.Equal(t, 1, code(r))
	require.Contains(t, errOut, "B object (it could not be formatted)")
}

// TestInterruptAsTheCellEnds: a JavaScript cell busy after its first await
// that stops by itself just as the driver agrees to end it for an interrupt
// is ended as interrupted, and the context lives on. The termination used to
// be asked for by the interrupting worker a round trip after the agreement,
// and then ended the driver's own code that finished the cell instead: the
// cell never ended, and 5 s later its context was killed. The cell here
// would stop right after the agreement, as one whose loop ends then does.
// Under load the worker's answer to a look that agreed can fail to come (1
// to 2 runs in 120 of this test with two busy processes beside it): the
// driver then took the termination as in flight for good, and the next
// interrupted cell was lost; the main thread now notes the termination's end
// itself (0 in 120).
func TestInterruptAsTheCellEnds(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "var kept = 1")
	for i := range 5 {
		interruptBusy(t, c, `await null; {
  const G = require('vm').runInThisContext('globalThis'), k = Symbol.for('conch.takeInterrupt'), take = G[k];
  let stop = false;
  G[k] = (id) => { const agreed = take(id); if (agreed) { G[k] = take; stop = true; } return agreed; };
  require('fs').writeFileSync(%q, '');
  while (!stop) {}
}`, i)
	}
}

// interruptBusy runs src, a JavaScript cell that writes the file its %q
// names once it is busy, interrupts it then, and wants it ended interrupted
// and the context's state kept (kept is 1). i numbers the cell in a
// failure's message.
func interruptBusy(t *testing.T, c *Context, src string, i int) {
	t.Helper()
	busy := filepath.Join(t.TempDir(), "busy")
	cell, err := c.Submit(CellOptions{Code: fmt.Sprintf(src, busy)})
	require.NoError(t, err)
	waitFile(t, busy)
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, cell)
	require.Equal(t, process.Signaled, r.Reason, "cell %d: %+v", i, r)
	require.Equal(t, "INT", r.Signal, "cell %d: %+v", i, r)
	r, out, errOut := run(t, c, "kept")
	require.Equal(t, 0, code(r), "cell %d: %s", i, errOut)
	require.Equal(t, "1\n", out, "cell %d", i)
}

// TestInterruptEndingItsOwnLook: the termination that ends a JavaScript
// cell's code after its first await can land inside the expression the
// worker evaluates to ask for it (V8 takes it at its next look, which an
// interpreted function's return can be), and the worker's answer is then an
// error, not the agreement, while the cell's code runs on. Here the cell's
// look calls a function once it has agreed, so that it does every time.
// Before, the driver took the termination as still in flight and refused
// every later look: the cell was lost, its interpreter killed 5 s after the
// interrupt. The second cell's look agrees as a plain one does.
func TestInterruptEndingItsOwnLook(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "var kept = 1")
	for i, land := range []bool{true, false} {
		interruptBusy(t, c, fmt.Sprintf(`await null; {
  const G = require('vm').runInThisContext('globalThis'), k = Symbol.for('conch.takeInterrupt'), take = G[k];
  const land = () => { let n = 0; for (let i = 0; i < 1e5; i++) n += Math.sqrt(i); return n; };
  G[k] = (id) => { const agreed = take(id); if (agreed) { G[k] = take; if (%t) land(); } return agreed; };
  require('fs').writeFileSync(%%q, '');
  for (;;) {}
}`, land), i)
	}
}

// interruptWhenReady submits code to c, interrupts the cell once the file
// ready exists (its program has set itself up), and returns how it ended.
func interruptWhenReady(t *testing.T, c *Context, code, ready string) process.Result {
	t.Helper()
	cell, err := c.Submit(CellOptions{Code: code})
	require.NoError(t, err)
	// A cell that ends first (its program failed to start, say) is
	// reported with how it ended, not as a ready file that never came.
	require.Eventually(t, func() bool {
		select {
		case <-cell.Done():
			return true
		default:
		}
		_, err := os.Stat(ready)
		return err == nil
	}, deadline, 5*time.Millisecond)
	select {
	case <-cell.Done():
		_, err := os.Stat(ready)
		stdout, stderr := output(cell)
		require.FailNow(t, "the cell ended before its interrupt", "ready file: %v; %+v; stdout %q; stderr %q", err, cell.Result(), stdout, stderr)
	default:
	}
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	return wait(t, cell)
}

// TestInterruptOfProgramThatExecsAfterIt: a program that takes the
// interrupt with a handler and then runs another program — as a shell's
// child between its fork and its exec does, which dash -c 'sleep 60' hit
// now and then under load — is sent it once more, and the JavaScript cell
// awaiting it ends interrupted. Before, the new program ran on, execSync
// never returned, and 5 s later the interpreter was killed: the cell and
// its context lost.
func TestInterruptOfProgramThatExecsAfterIt(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "var kept = 1")
	ready := filepath.Join(t.TempDir(), "ready")
	// The program sleeps in short turns: CPython runs a handler between
	// bytecodes, and a signal that comes after its last look and before
	// time.sleep enters the kernel (a busy machine may hold the program
	// there for a while, just after it made the ready file) is handled only
	// once that sleep ends, as at a terminal.
	program := "import os, signal, time\n" +
		"signal.signal(signal.SIGINT, lambda *a: os.execvp('sleep', ['sleep', '60']))\n" +
		"open(" + strconv.Quote(ready) + ", 'w').close()\n" +
		"while True: time.sleep(0.05)\n"
	// A program of the cell in a process group of its own, which the
	// interrupt does not reach, is not sent it after either.
	detached := containmenttest.Marker()
	r := interruptWhenReady(t, c, "const cp = require('child_process'); cp.spawn('sleep', ['"+detached+"'], { detached: true, stdio: 'ignore' }).unref()\n"+
		"await 1; cp.execFileSync('python3', ['-c', "+strconv.Quote(program)+"])\nkept = 2", ready)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "INT", r.Signal, "%+v", r)
	_, out, _ := run(t, c, "kept")
	require.Equal(t, "1\n", out)
	alive := containmenttest.Running(detached)
	require.Len(t, alive, 1, "the detached sleep")
	syscall.Kill(alive[0], syscall.SIGKILL)
}

// TestInterruptSparesTheCellsCleanUp: a program the cell's own code starts
// after the interrupt (a clean-up in an except block), directly or through
// a shell, is not sent it again with those that missed it: here a Python
// cell whose clean-up runs programs for longer than the first resend.
func TestInterruptSparesTheCellsCleanUp(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	dir := t.TempDir()
	ready, done := filepath.Join(dir, "ready"), filepath.Join(dir, "done")
	r := interruptWhenReady(t, c, "import os, subprocess, time\n"+
		"try:\n"+
		"    open("+strconv.Quote(ready)+", 'w').close()\n"+
		"    time.sleep(60)\n"+
		"except KeyboardInterrupt:\n"+
		"    r = subprocess.run(['sleep', '0.5'])\n"+
		"    s = os.system('sleep 0.5')\n"+
		"    open("+strconv.Quote(done)+", 'w').write('%d %d' % (r.returncode, s))\n", ready)
	b, err := os.ReadFile(done)
	require.NoError(t, err, "the clean-up did not finish: %+v", r)
	require.Equal(t, "0 0", string(b), "the clean-up's statuses")
}

// TestInterruptOnceToACatcher: a program that catches SIGINT and runs on
// is sent the interrupt once, not again with those that missed it.
func TestInterruptOnceToACatcher(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	dir := t.TempDir()
	ready, count := filepath.Join(dir, "ready"), filepath.Join(dir, "count")
	program := "import signal, time\n" +
		"n = 0\n" +
		"def took(*a):\n    global n\n    n += 1\n" +
		"signal.signal(signal.SIGINT, took)\n" +
		"open(" + strconv.Quote(ready) + ", 'w').close()\n" +
		"while n == 0: time.sleep(0.01)\n" +
		"time.sleep(0.6)\n" +
		"open(" + strconv.Quote(count) + ", 'w').write(str(n))\n"
	r := interruptWhenReady(t, c, "await 1; require('child_process').execFileSync('python3', ['-c', "+strconv.Quote(program)+"])", ready)
	b, err := os.ReadFile(count)
	require.NoError(t, err, "the program ended by itself: %+v", r)
	require.Equal(t, "1", string(b), "SIGINTs the program took")
}

// TestInterruptOfProgramBeforeWatchdog: a JavaScript cell that runs a
// program (execSync) and is interrupted ends interrupted even when Node's
// watchdog thread takes the signal after the program has died of it and
// execSync has thrown: the error is the interrupt's. Here the interpreter's
// threads but its main one are held (ptrace) while the cell is interrupted,
// and let go once the program is gone. Before, the cell ended with
// execSync's error (exited 1), in its script and after an await; seen in
// the script under the load of the whole suite.
func TestInterruptOfProgramBeforeWatchdog(t *testing.T) {
	t.Parallel()
	for name, code := range map[string]string{
		"script":   "require('child_process').execSync('sleep 60')\nkept = 2",
		"awaiting": "await 1; require('child_process').execSync('sleep 60')\nkept = 2",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			run(t, c, "var kept = 1")
			thaw := holdThreads(t, c.cmd.Process.Pid)
			cell, err := c.Submit(CellOptions{Code: code})
			require.NoError(t, err)
			waitStarted(t, cell)
			programs := func() int { return len(cell.processes()) }
			require.Eventually(t, func() bool { return programs() > 0 }, deadline, 5*time.Millisecond)
			require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
			require.Eventually(t, func() bool { return programs() == 0 }, deadline, 5*time.Millisecond)
			time.Sleep(100 * time.Millisecond) // the main thread has taken execSync's error
			thaw()
			r := wait(t, cell)
			require.Equal(t, process.Signaled, r.Reason, "%+v", r)
			require.Equal(t, "INT", r.Signal, "%+v", r)
			_, errOut := output(cell)
			require.Equal(t, "Error: Script execution was interrupted by `SIGINT`\n", errOut)
			_, out, _ := run(t, c, "kept")
			require.Equal(t, "1\n", out)
		})
	}
}

// TestPythonOwnKeyboardInterrupt: a KeyboardInterrupt the cell raises
// itself, with raise or through a SIGINT it sends itself under a handler
// it set, is an uncaught exception like any other: exit 1, the traceback
// on stderr, the context on. It used to end the cell with 130, the status
// of the engine's interrupt (TestInterrupt covers that one, and
// TestLateInterruptUnderCellsHandler the engine's under a cell's handler).
func TestPythonOwnKeyboardInterrupt(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	for _, src := range []string{
		"raise KeyboardInterrupt",
		"import os, signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n" +
			"os.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)",
	} {
		r, _, errOut := run(t, c, src)
		require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
		require.Equal(t, 1, code(r), errOut)
		require.Contains(t, errOut, "KeyboardInterrupt")
	}
	_, out, _ := run(t, c, "1 + 1")
	require.Equal(t, "2\n", out)
}

// TestInterruptInCellsLastCallbacks: a JavaScript cell that awaits is the
// running cell until its end, also while the callbacks it queued last (a
// process.nextTick, an immediate, a microtask that queues itself) run after
// its value is shown: an interrupt, or its execution timeout, ends such a
// callback busy there, the cell ends interrupted and the context lives on.
// Before, the driver took the cell for done as it showed the value, the
// interrupt was ignored, and 5 s later the interpreter was killed with the
// context's state. A short such callback still ends the cell by itself.
func TestInterruptInCellsLastCallbacks(t *testing.T) {
	t.Parallel()
	const busy = "require('fs').writeFileSync(%q, ''); for(;;){}"
	for name, src := range map[string]string{
		"nextTick":  `await 0; process.nextTick(() => { ` + busy + ` }); "q"`,
		"immediate": `await 0; setImmediate(function f() { ` + busy + ` }); "q"`,
		"microtask": `await 0; var once = true; (function f() { if (once) { once = false; ` + strings.Replace(busy, "for(;;){}", "", 1) + ` } queueMicrotask(f) })(); "q"`,
		"then":      `await 0; Promise.resolve().then(() => { ` + busy + ` }); "q"`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			run(t, c, "var kept = 1")
			interruptBusy(t, c, src, 0)
			r, out, errOut := runOpts(t, c, CellOptions{Code: fmt.Sprintf(src, filepath.Join(t.TempDir(), "busy")), ExecutionTimeout: time.Second})
			require.Equal(t, process.TimedOut, r.Reason, "%+v %q", r, errOut)
			require.NotContains(t, out+errOut, "driver")
			r, out, errOut = run(t, c, "kept + 1")
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			require.Equal(t, "2\n", out)
		})
	}
	c := newContext(t, Options{Language: JavaScript})
	r, out, errOut := run(t, c, `await 0; setImmediate(() => { const end = Date.now() + 500; while (Date.now() < end) {} console.log("done") }); "q"`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "'q'\ndone\n", out)
}
