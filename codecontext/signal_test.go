package codecontext

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// waitChild waits until the interpreter of c has a descendant running argv
// and returns its pid.
func waitChild(t *testing.T, c *Context, argv ...string) int {
	t.Helper()
	return waitCellChild(t, c, nil, argv...)
}

// waitCellChild is waitChild that fails at once, saying how, when cell
// ends first (a nil cell never does).
func waitCellChild(t *testing.T, c *Context, cell *Cell, argv ...string) int {
	t.Helper()
	var ended <-chan struct{}
	if cell != nil {
		ended = cell.Done()
	}
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	for {
		for _, pid := range proctree.Descendants(c.Info().PID) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err == nil && bytes.Equal(b, want) {
				return pid
			}
		}
		select {
		case <-ended:
			o, e := output(cell)
			t.Fatalf("the cell ended before a process %q started: %+v, stdout %q, stderr %q; the context: %+v", argv, cell.Info().Result, o, e, c.Info())
		case <-ctx.Done():
			t.Fatalf("no process %q started", argv)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSignalSparesEarlierCells: kill TERM of a cell reaches the program the
// cell runs, not one an earlier cell left running in the background, which
// lives on; the cell ends as the language reports its program's death.
func TestSignalSparesEarlierCells(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lang                 Language
		background, fg, gone string
		want                 func(t *testing.T, r process.Result, out, errOut string)
	}{
		{
			Python,
			"import subprocess; bg = subprocess.Popen(['sleep', '300'])",
			"print(subprocess.run(['sleep', '60']).returncode)",
			"bg.poll()",
			func(t *testing.T, r process.Result, out, _ string) {
				require.Equal(t, 0, code(r), "%+v", r)
				require.Equal(t, "-15\n", out)
			},
		},
		{
			JavaScript,
			"const cp = require('child_process'); const bg = cp.spawn('sleep', ['300'])",
			"cp.execSync('sleep 60')",
			"bg.exitCode ?? bg.signalCode",
			func(t *testing.T, r process.Result, _, errOut string) {
				require.Equal(t, 1, code(r), "%+v", r)
				require.Contains(t, errOut, "SIGTERM")
			},
		},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang), func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: tc.lang})
			r, _, errOut := run(t, c, tc.background)
			require.Equal(t, 0, code(r), errOut)
			bg := waitChild(t, c, "sleep", "300")
			cell, err := c.Submit(CellOptions{Code: tc.fg})
			require.NoError(t, err)
			waitChild(t, c, "sleep", "60")
			require.NoError(t, cell.Kill(syscall.SIGTERM, 0, 0))
			r = wait(t, cell)
			out, errOut := output(cell)
			tc.want(t, r, out, errOut)
			require.True(t, proctree.Alive(bg), "the earlier cell's child was signalled")
			_, out, _ = run(t, c, tc.gone)
			require.Contains(t, []string{"", "null\n"}, out, "the earlier cell's child ended")
		})
	}
}

// TestSignalSparesWhatEarlierCellsStart: a program that a child process an
// earlier cell left running starts while a later cell runs is that child's,
// not the later cell's, although it started since: kill TERM of the later
// cell ends its program and leaves the other alone. Before, any descendant
// of the interpreter started since the cell counted as its own. A program
// that a thread of an earlier cell starts is a child of the interpreter
// itself, as the cell's are, and cannot be told from them: it is
// signalled, as the docs say.
func TestSignalSparesWhatEarlierCellsStart(t *testing.T) {
	t.Parallel()
	// The program starts once the test writes to the FIFO, when the later
	// cell runs.
	const script = "read go < FIFO; /bin/sleep 300 & echo $! > PID; wait"
	cases := []struct {
		name, background, fg, out string
		lang                      Language
		spared                    bool
	}{
		{
			"python-child", "import subprocess; bg = subprocess.Popen(['sh', '-c', '" + script + "'])",
			"print(subprocess.run(['sleep', '60']).returncode)", "-15\n", Python, true,
		},
		{
			"javascript-child", "const cp = require('child_process'); const bg = cp.spawn('sh', ['-c', '" + script + "'])",
			"console.log(cp.spawnSync('sleep', ['60']).signal)", "SIGTERM\n", JavaScript, true,
		},
		{
			"python-thread", `import subprocess, threading
def later():
    open('FIFO').read()
    p = subprocess.Popen(['/bin/sleep', '300'])
    open('PID', 'w').write(str(p.pid))
threading.Thread(target=later).start()`,
			"print(subprocess.run(['sleep', '60']).returncode)", "-15\n", Python, false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fifo, pidFile := filepath.Join(dir, "go"), filepath.Join(dir, "pid")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			c := newContext(t, Options{Language: tc.lang})
			r, _, errOut := run(t, c, strings.NewReplacer("FIFO", fifo, "PID", pidFile).Replace(tc.background))
			require.Equal(t, 0, code(r), errOut)
			cell, err := c.Submit(CellOptions{Code: tc.fg})
			require.NoError(t, err)
			waitCellChild(t, c, cell, "sleep", "60")
			var w *os.File
			require.Eventually(t, func() bool { // the reader has opened its end
				w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				return err == nil
			}, deadline, 5*time.Millisecond, "the FIFO was never opened: %v", err)
			_, err = w.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, w.Close())
			var other int
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(pidFile)
				other, err = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil
			}, deadline, 5*time.Millisecond, "the program was never started")
			defer syscall.Kill(other, syscall.SIGKILL)
			require.Equal(t, !tc.spared, slices.Contains(cell.processes(), other), "taken for the cell's")

			require.NoError(t, cell.Kill(syscall.SIGTERM, 0, 0))
			r = wait(t, cell)
			out, errOut := output(cell)
			require.Equal(t, 0, code(r), "%+v: %s", r, errOut)
			require.Equal(t, tc.out, out)
			if tc.spared {
				require.True(t, proctree.Alive(other), "the earlier cell's child's program was signalled")
			} else {
				require.Eventually(t, func() bool { return !proctree.Alive(other) }, deadline, 5*time.Millisecond,
					"the thread's program lives on")
			}
		})
	}
}

// TestKillAsTakenUp: a cell killed while queued, as the context takes it
// up, is interrupted as it runs: it is not reported killed before it
// started while the interpreter runs it. The kill is held, once it has
// found the cell queued behind a short one, until the cell is taken up.
func TestKillAsTakenUp(t *testing.T) {
	killingQueued = func(cell *Cell) {
		for end := time.Now().Add(10 * time.Second); cell.state() == process.Starting && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { killingQueued = nil }()
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			c := newContext(t, Options{Language: lang})
			first, second := "import time; time.sleep(0.3)", "time.sleep(100)"
			if lang == JavaScript {
				first, second = "const t0 = Date.now(); while (Date.now() - t0 < 300) {}", "for (;;) {}"
			}
			_, err := c.Submit(CellOptions{Code: first})
			require.NoError(t, err)
			cell, err := c.Submit(CellOptions{Code: second})
			require.NoError(t, err)
			require.Equal(t, process.Starting, cell.state())
			require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
			r := processtest.Wait(t, cell, 20*time.Second)
			require.NotContains(t, r.Error, "before it started", "the interpreter ran it: %+v", r)
			r, _, errOut := run(t, c, "1")
			require.Equal(t, 0, code(r), errOut)
		})
	}
}

// TestPythonHandlerRaisesBetweenCells: a signal handler a cell set that
// raises while no cell runs (an alarm's) leaves the context as a REPL is
// left, reading on; the exception, with no cell to show it, is dropped. It
// came out of the driver's read of the next cell, as the driver's own
// failure, and ended the interpreter; an OSError did until now, which the
// read could not tell from its own.
func TestPythonHandlerRaisesBetweenCells(t *testing.T) {
	t.Parallel()
	for _, raised := range []string{"RuntimeError", "OSError"} {
		t.Run(raised, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python})
			rang := filepath.Join(t.TempDir(), "rang")
			r, _, errOut := run(t, c, "import signal\ndef h(*a):\n    open("+strconv.Quote(rang)+", 'w').close()\n    raise "+raised+"('alarm')\nsignal.signal(signal.SIGALRM, h)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)\nx = 7")
			require.Equal(t, 0, processtest.Code(r), "%+v, stderr %q", r, errOut)
			require.Eventually(t, func() bool { _, err := os.Stat(rang); return err == nil }, deadline, 10*time.Millisecond,
				"the alarm did not go off")
			_, out, _ := run(t, c, "print(x)")
			require.Equal(t, "7\n", out)
		})
	}
}

// TestPythonHandlerRaisingOften: a handler that raises every half
// millisecond raises in the driver's own code between cells too, not only
// in its read of the next cell (the context was lost after 0 to 13 cells:
// "the context's driver failed ... ValueError: alarm"): there it is
// dropped as well. In a cell's code it raises, as it would at a REPL. The
// cell sees its own handler, not the driver's guard of it. (The first
// alarm comes 200 ms after the cell that sets it: a handler that raises as
// the driver ends that very cell is out of the guard's reach.)
func TestPythonHandlerRaisingOften(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	run(t, c, "import signal, time\ndef h(*a): raise ValueError('alarm')\nsignal.signal(signal.SIGALRM, h)\nsignal.setitimer(signal.ITIMER_REAL, 0.2, 0.0005)")
	r, _, errOut := run(t, c, "time.sleep(5)")
	// Its text may not come whole: the next alarms raise in its
	// formatting, which is the cell's code (its __str__).
	require.Equal(t, 1, processtest.Code(r), "the first alarm, in a cell: %+v, stderr %q", r, errOut)
	require.Contains(t, errOut, "ValueError")
	for i := range 30 {
		r, _, errOut := run(t, c, "x = 1")
		require.Contains(t, []int{0, 1}, processtest.Code(r), "cell %d: %+v, stderr %q", i, r, errOut)
	}
	// Disarmed once a cell gets as far as the call.
	require.Eventually(t, func() bool {
		r, _, _ := run(t, c, "signal.setitimer(signal.ITIMER_REAL, 0)")
		return processtest.Code(r) == 0
	}, deadline, time.Millisecond)
	_, out, _ := run(t, c, "print(signal.getsignal(signal.SIGALRM) is h, signal.signal(signal.SIGALRM, signal.SIG_DFL) is h)")
	require.Equal(t, "True True\n", out)
}
