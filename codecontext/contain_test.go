package codecontext

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
)

// Children a cell starts in sessions of their own, with an empty
// environment or double-forked, end with the context.
func TestCloseEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	c := newContext(t, Options{Language: Python, Containment: root})
	marker := containmenttest.Marker()
	r, _, stderr := run(t, c, `import subprocess
subprocess.Popen(["sleep", "`+marker+`"], start_new_session=True, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.run(["sh", "-c", "( ( setsid env -i sleep `+marker+` >/dev/null 2>&1 & ) & )"])`)
	if code(r) != 0 {
		t.Fatalf("cell: %+v %s", r, stderr)
	}
	containmenttest.WaitRunning(t, marker, 2)
	c.Close()
	containmenttest.Gone(t, marker)
}

// A cell reports what it cost; an interpreter the OOM killer ends at the
// context's memory limit ends the cell and the context lost, OOMKilled.
func TestCellUsageAndLimits(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 96 << 20}
	c := newContext(t, Options{Language: Python, Containment: containmenttest.Limited(t, l), Limits: l})
	r, _, _ := run(t, c, "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass")
	if r.Usage == nil || r.Usage.CPU < 250*time.Millisecond || r.Usage.CPU > 450*time.Millisecond || r.Usage.MemoryPeak == 0 {
		t.Fatalf("a 300 ms busy loop: %+v usage %+v", r, r.Usage)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	_, r, err := c.Run(ctx, CellOptions{Code: "b = bytearray(512 << 20)"})
	if err != nil || r.Reason != process.Lost || !r.OOMKilled || r.Error != "the OOM killer ended the context's interpreter at the memory limit" {
		t.Fatalf("512 MiB under 96 MiB: %+v %v", r, err)
	}
	<-c.Done()
	if cr := c.Info().Result; cr.Reason != process.Lost || !cr.OOMKilled {
		t.Fatalf("the context: %+v", cr)
	}
}

// A context the engine KILLs after the OOM killer ended a child of its
// running cell is the engine's end: the cell is lost to a KILL, and no
// message of it blames the OOM killer.
func TestContextKilledAfterAChildsOOM(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 96 << 20}
	c := newContext(t, Options{Language: Python, Containment: containmenttest.Limited(t, l), Limits: l})
	cell, err := c.Submit(CellOptions{Code: `import subprocess
subprocess.run(["python3", "-c", "b = bytearray(512 << 20)"])
subprocess.run(["tail", "-f", "/dev/null"])`})
	if err != nil {
		t.Fatal(err)
	}
	waitCellChild(t, c, cell, "tail", "-f", "/dev/null")
	if err := c.Kill(syscall.SIGKILL, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, cell); r.Reason != process.Lost || r.OOMKilled || strings.Contains(r.Error, "OOM") {
		t.Fatalf("the context KILLed by the engine after a child's OOM kill: cell %+v", r)
	}
	<-c.Done()
	if cr := c.Info().Result; cr.Reason != process.Signaled || cr.Signal != "KILL" || cr.OOMKilled {
		t.Fatalf("the context KILLed by the engine after a child's OOM kill: context %+v", cr)
	}
}

// A memory limit the interpreter cannot start under is the limit's fault:
// an invalid argument saying so, not the engine's "exited before it was
// ready" (a 500 through the daemon).
func TestLimitTooSmallToStart(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 2 << 20}
	for _, lang := range languages {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		c, err := New(ctx, Options{Language: lang, Containment: containmenttest.Limited(t, l), Limits: l})
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("%s started under 2 MiB", lang)
		}
		if !errors.Is(err, process.ErrInvalidArgument) || !strings.Contains(err.Error(), "OOM killer") {
			t.Fatalf("%s under 2 MiB: %v", lang, err)
		}
	}
}

// An interpreter that exits as it starts (an environment it refuses), or
// that never becomes ready (node under a pids limit of 4 waits on a futex
// for ever), is the start's fault: an invalid argument saying how it
// ended or how long it was given, with what it said. The first was a 500
// through the daemon, the second a request that never came back.
func TestInterpreterThatDoesNotComeUp(t *testing.T) {
	t.Parallel()
	for lang, env := range map[Language]map[string]string{
		Python:     {"PYTHONHOME": "/nonexistent"},
		JavaScript: {"NODE_OPTIONS": "--bogus-flag"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		c, err := New(ctx, Options{Language: lang, Env: env})
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("%s started with %v", lang, env)
		}
		if !errors.Is(err, process.ErrInvalidArgument) || !strings.Contains(err.Error(), "exited as it started (exit status") {
			t.Fatalf("%s with %v: %v", lang, env, err)
		}
	}
	l := containment.Limits{Pids: 4}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	c, err := New(ctx, Options{Language: JavaScript, Containment: containmenttest.Limited(t, l), Limits: l, ReadyWithin: 3 * time.Second})
	if err == nil {
		c.Close()
		t.Skip("node started under a pids limit of 4 here")
	}
	if !errors.Is(err, process.ErrInvalidArgument) || !strings.Contains(err.Error(), "within 3s (a pids limit of 4") {
		t.Fatalf("node under pids 4: %v", err)
	}
}
