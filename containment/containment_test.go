package containment_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/tracetest"
)

// run starts sh -c script in m and waits for it.
func run(t *testing.T, m containment.Manager, script string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := m.Start(cmd, proctree.Start); err != nil {
		t.Fatalf("start: %v", err)
	}
	proctree.Wait(cmd)
	return cmd, out.String()
}

// waitFor polls cond for 10 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestKillEndsWhatLeftTheTree(t *testing.T) {
	for _, freeze := range []bool{false, true} {
		name := "cgroup.kill"
		if freeze {
			name = "freeze"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := containmenttest.Root(t, containment.Limits{})
			m, err := r.New("c1", containment.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if freeze {
				containment.WithoutKillFile(m)
			}
			marker := containmenttest.Marker()
			run(t, m, containmenttest.Escapes(marker))
			waitFor(t, "both sleeps", func() bool { return len(containmenttest.Running(marker)) == 2 })
			if err := m.Kill(); err != nil {
				t.Fatal(err)
			}
			if left := containmenttest.Running(marker); len(left) > 0 {
				t.Fatalf("processes %v outlived Kill", left)
			}
			if err := m.Destroy(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(r.Path(), "c1")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the cgroup is left: %v", err)
			}
		})
	}
}

// procsUnder counts the processes in the cgroup dir and those under it.
func procsUnder(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			n += len(strings.Fields(string(b)))
		}
		return nil
	})
	return n
}

func TestRootDestroyEndsEveryCgroup(t *testing.T) {
	t.Parallel()
	r := containmenttest.Root(t, containment.Limits{})
	marker := containmenttest.Marker()
	for _, name := range []string{"a", "b"} {
		m, err := r.New(name, containment.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		run(t, m, containmenttest.Escapes(marker))
	}
	waitFor(t, "four sleeps", func() bool { return len(containmenttest.Running(marker)) == 4 })
	// The subshells that started them leave the cgroups a moment later.
	waitFor(t, "the sleeps alone in the cgroups", func() bool { return procsUnder(r.Path()) == 4 })
	clearAll(t, r, marker, 4)
}

// clearAll clears r's cgroups as the next daemon clears a dead one's, and
// requires that it ended want processes, none holding marker outlived it,
// and no cgroup of r is left.
func clearAll(t *testing.T, r *containment.Root, marker string, want int) {
	t.Helper()
	// Clear is for a daemon that died: its threads are gone.
	if err := containment.StopForker(r); err != nil {
		t.Fatal(err)
	}
	n, err := containment.Clear(strings.TrimPrefix(filepath.Base(r.Path()), "conch-"), r.Dirs())
	if err != nil || n != want {
		t.Fatalf("Clear = %d, %v; want %d ended", n, err, want)
	}
	if left := containmenttest.Running(marker); len(left) > 0 {
		t.Fatalf("processes %v outlived Clear", left)
	}
	for _, d := range r.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is left: %v", d, err)
		}
	}
}

// A process that moved itself out of its v2 cgroup (root can) is still in
// the v1 ones of its limits: Clear ends it there, and removes them.
func TestClearEndsWhatLeftTheV2Cgroup(t *testing.T) {
	t.Parallel()
	r, marker := movedOutOfV2(t)
	clearAll(t, r, marker, 1)
}

// movedOutOfV2 returns a root with a memory limit applied through cgroup v1
// (the test skips without one) and the marker of a sleep that a process of
// it started, then moved out of its v2 cgroup to the v2 hierarchy's root.
func movedOutOfV2(t *testing.T) (*containment.Root, string) {
	t.Helper()
	l := containment.Limits{MemoryBytes: 64 << 20}
	r := containmenttest.Limited(t, l)
	if len(r.Dirs()) < 2 {
		t.Skip("needs a limit applied through cgroup v1")
	}
	top := r.Dirs()[0] // the v2 hierarchy's root cgroup, above the daemon's
	for {
		up := filepath.Dir(top)
		if _, err := os.Stat(filepath.Join(up, "cgroup.procs")); err != nil {
			break
		}
		top = up
	}
	m, err := r.New("a", l)
	if err != nil {
		t.Fatal(err)
	}
	marker := containmenttest.Marker()
	run(t, m, "sh -c 'echo $$ > "+filepath.Join(top, "cgroup.procs")+" && exec sleep "+marker+"' >/dev/null 2>&1 </dev/null &")
	waitFor(t, "the sleep out of the v2 cgroup", func() bool {
		return len(containmenttest.Running(marker)) == 1 && procsUnder(r.Path()) == 0
	})
	return r, marker
}

// A process forked into a v1 cgroup after Clear has read its members, before
// it KILLs them, is ended too: Clear reads and KILLs until none is left.
func TestClearEndsWhatForksAsItKills(t *testing.T) {
	r, marker := movedOutOfV2(t)
	// The fork that comes between the read and the KILL, made here: a
	// sleep of the test's own, put in the v1 cgroup Clear has just read.
	var forked sync.Once
	reaped := make(chan struct{})
	containment.AfterMembersRead(t, func(dir string) {
		forked.Do(func() {
			cmd := exec.Command("sleep", marker)
			if err := proctree.Start(cmd); err != nil {
				t.Error(err)
				close(reaped)
				return
			}
			go func() { proctree.Wait(cmd); close(reaped) }()
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
				t.Error(err)
			}
		})
	})
	clearAll(t, r, marker, 2)
	<-reaped
}

func TestClearLeavesOtherInstances(t *testing.T) {
	t.Parallel()
	r := containmenttest.Root(t, containment.Limits{})
	if _, err := containment.Clear("another", r.Dirs()); err == nil {
		t.Fatal("Clear took cgroups of another instance")
	}
	if _, err := os.Stat(r.Path()); err != nil {
		t.Fatal(err)
	}
}

func TestCPUTime(t *testing.T) {
	t.Parallel()
	r := containmenttest.Root(t, containment.Limits{})
	m, err := r.New("busy", containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	// A busy loop in a child in a group of its own, for 300 ms of its own
	// CPU time.
	run(t, m, `perl -e 'if (fork() == 0) { setpgrp; 1 while (times)[0] + (times)[1] < 0.3; exit 0 } wait'`)
	if cpu := m.Stats().CPU; cpu < 250*time.Millisecond || cpu > 450*time.Millisecond {
		t.Fatalf("CPU %v, want about 300ms", cpu)
	}
}

func TestNone(t *testing.T) {
	t.Parallel()
	for _, cfg := range []containment.Config{
		{Instance: "x", Disabled: true},
		{Instance: "x", Path: t.TempDir()},
	} {
		r := containment.Open(cfg)
		if r.Mode() != containment.ModeNone || r.Reason() == "" {
			t.Fatalf("Open(%+v): %s %q", cfg, r.Mode(), r.Reason())
		}
		if _, err := r.New("p", containment.Limits{Pids: 10}); !errors.Is(err, containment.ErrUnsupported) {
			t.Fatalf("a limit without cgroups: %v", err)
		}
		m, err := r.New("p", containment.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		// The shell waits for the busy loop, then for its input: what it
		// and its reaped child used is read while it waits.
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", containmenttest.Busy+"; echo done; read x")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = in
		if err := m.Start(cmd, proctree.Start); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if _, err := out.Read(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		s := m.Stats()
		w.Close()
		proctree.Wait(cmd)
		if s.CPU < 250*time.Millisecond || s.CPU > 450*time.Millisecond || s.MemoryPeak != 0 {
			t.Fatalf("stats without cgroups: %+v", s)
		}
	}
}

// What a Manager starts is the OOM killer's first pick, in every mode.
func TestChildrenAreTheOOMKillersPick(t *testing.T) {
	t.Parallel()
	for _, r := range []*containment.Root{containment.Open(containment.Config{Disabled: true}), containmenttest.Root(t, containment.Limits{})} {
		m, err := r.New("oom", containment.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		// Its child reads the value once Start has returned.
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", "read x; cat /proc/self/oom_score_adj")
		var out strings.Builder
		cmd.Stdin, cmd.Stdout = in, &out
		if err := m.Start(cmd, proctree.Start); err != nil {
			t.Fatal(err)
		}
		in.Close()
		w.WriteString("\n")
		w.Close()
		proctree.Wait(cmd)
		if strings.TrimSpace(out.String()) != "500" {
			t.Fatalf("%s: oom_score_adj %q", r.Mode(), out.String())
		}
		_ = m.Destroy()
	}
}

// Raising a started process's oom_score_adj, done for every process, makes
// no call through the Go scheduler.
func TestExposeChildCallsAroundTheScheduler(t *testing.T) {
	m, err := containment.Open(containment.Config{Disabled: true}).New("p", containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	for _, stack := range tracetest.Syscalls(t, func() {
		cmd := exec.Command("true")
		if err := m.Start(cmd, proctree.Start); err != nil {
			t.Fatal(err)
		}
		proctree.Wait(cmd)
	}) {
		if strings.Contains(strings.Join(stack, " "), "exposeChild") {
			t.Fatalf("a call through the scheduler: %v", stack)
		}
	}
}

// startReading starts, without cgroups, a shell that reads its stdin, a
// pipe whose write end it returns: it lives until that is closed.
func startReading(t *testing.T) (containment.Manager, *exec.Cmd, *os.File) {
	t.Helper()
	m, cmd, w, _ := startBash(t, "read x")
	return m, cmd, w
}

// startBash starts, without cgroups, bash running script with its stdin
// a pipe, whose write end it returns, and its stdout read by the reader
// it returns.
func startBash(t *testing.T, script string) (containment.Manager, *exec.Cmd, *os.File, *bufio.Reader) {
	t.Helper()
	return startPiped(t, "bash", "-c", script)
}

// startPiped is startBash for any program and its arguments.
func startPiped(t *testing.T, name string, args ...string) (containment.Manager, *exec.Cmd, *os.File, *bufio.Reader) {
	t.Helper()
	m, err := containment.Open(containment.Config{Disabled: true}).New("p", containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = in
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(cmd, proctree.Start); err != nil {
		t.Fatal(err)
	}
	in.Close()
	return m, cmd, w, bufio.NewReader(out)
}

// Without cgroups, a process's /proc stat file is opened at the first read
// of its stats, not at its start: a one-shot process, whose CPU time its
// rusage gives, never reads them. Once the process was waited for, a read
// opens nothing (its pid may be another's by then).
func TestNoneOpensStatFileWhenRead(t *testing.T) {
	statOpen := func(pid int) bool {
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == "/proc/"+strconv.Itoa(pid)+"/stat" {
				return true
			}
		}
		return false
	}
	for _, waited := range []bool{false, true} {
		m, cmd, w := startReading(t)
		pid := cmd.Process.Pid
		if statOpen(pid) {
			t.Fatal("the stat file is open at the start")
		}
		if waited {
			w.Close()
			proctree.Wait(cmd)
		}
		m.CPU()
		if statOpen(pid) == waited {
			t.Fatalf("waited for %v: stat file open %v after a read", waited, !waited)
		}
		w.Close()
		if !waited {
			proctree.Wait(cmd)
		}
		m.Destroy()
		if statOpen(pid) {
			t.Fatal("the stat file is open after Destroy")
		}
	}
}

// Without cgroups, the stats a session reads around every command come from
// the shell's /proc stat file, kept open: reading them allocates nothing.
func TestNoneStatsAllocateNothing(t *testing.T) {
	m, cmd, w := startReading(t)
	defer func() { w.Close(); proctree.Wait(cmd); m.Destroy() }()
	if n := testing.AllocsPerRun(100, func() { m.CPU() }); n != 0 {
		t.Fatalf("reading the CPU time: %v allocations", n)
	}
}

// Without cgroups, the CPU time a session reads around every command comes
// from the stat file only when the shell may have reaped a child since it
// was last read: a child it forked since (the namespace's last pid moved),
// or one it already had then. Each case here has the shell reap a busy
// child between two reads, with the first read made while the shell waits
// for its input: the second read must count the child. The second case
// holds the last pid still, as on a machine where nothing else forks, so
// that only the children file can tell: the test is not parallel.
func TestNoneCountsChildrenReapedBetweenReads(t *testing.T) {
	for _, c := range []struct {
		name, script string
		hold         bool
	}{
		// No child at the first read: the busy one is forked after it.
		{"forked after", "read x; " + containmenttest.Busy + "; echo done; read y", false},
		// The busy child runs at the first read, and is reaped after it
		// with no fork between.
		{"running at", containmenttest.Busy + " & echo started; read x; wait; echo done; read y", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, cmd, w, lines := startBash(t, c.script)
			defer func() { w.Close(); proctree.Wait(cmd); m.Destroy() }()
			if c.hold {
				if l, err := lines.ReadString('\n'); err != nil || l != "started\n" {
					t.Fatalf("%q %v", l, err)
				}
			}
			time.Sleep(50 * time.Millisecond) // the shell is at its read
			if c.hold {
				defer containment.HoldLastPID()()
			}
			before := m.CPU()
			w.WriteString("\n")
			if l, err := lines.ReadString('\n'); err != nil || l != "done\n" {
				t.Fatalf("%q %v", l, err)
			}
			if after := m.CPU(); after-before < 250*time.Millisecond {
				t.Fatalf("CPU %v then %v: the reaped child is not counted", before, after)
			}
		})
	}
}

// Without cgroups, a read of the CPU time reads the namespace's last pid
// once, also when a pid handed out since its last read (here at every
// read) has it read the stat file again: the session reads it at every
// command's end, and a second read cost a command about 2 µs. Not parallel:
// it swaps the last pid's read.
func TestNoneReadsTheLastPIDOnce(t *testing.T) {
	m, cmd, w := startReading(t)
	defer func() { w.Close(); proctree.Wait(cmd); m.Destroy() }()
	time.Sleep(50 * time.Millisecond) // bash is at its read, childless
	reads, restore := containment.CountLastPIDReads()
	defer restore()
	for i := 1; i <= 5; i++ {
		m.CPU()
		if n := reads(); n != i {
			t.Fatalf("%d reads of the CPU time read the last pid %d times", i, n)
		}
	}
}

// Without cgroups, the shell's own CPU time is counted finer than the stat
// file's clock ticks of 10 ms: a command that runs in the shell alone reads
// its own time to the microsecond.
func TestNoneCountsTheShellsOwnTimeFinely(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat here: the stat file gives the own time, in ticks")
	}
	// Loops of the shell's own, each a few milliseconds, and no fork.
	m, cmd, w, lines := startBash(t, `while read n; do i=0; while ((i < n)); do ((i++)); done; echo; done`)
	defer func() { w.Close(); proctree.Wait(cmd); m.Destroy() }()
	prev := m.CPU()
	for i := range 20 {
		fmt.Fprintf(w, "%d\n", 2000+137*i)
		if _, err := lines.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cpu := m.CPU()
		if d := cpu - prev; d > 0 && d%(10*time.Millisecond) != 0 {
			return
		}
		prev = cpu
	}
	t.Fatal("every step of the CPU time read is a whole number of 10 ms ticks")
}

// Without cgroups, the CPU time of a process counts all its threads: the
// schedstat file, which gives the time finely, is its main thread's alone,
// and a Python cell that runs a thread (or Node's workers and garbage
// collector) spends its time in the others. Each line here has the
// interpreter run a busy thread to its end before it answers, and a last
// one busy in its main thread: what the threads used stays counted once
// they have ended.
func TestNoneCountsEveryThread(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	const script = `
import sys, threading, time
def busy():
    t = time.thread_time()
    while time.thread_time() - t < 0.3:
        pass
for line in sys.stdin:
    if line.strip() == "main":
        busy()
    else:
        th = threading.Thread(target=busy)
        th.start()
        th.join()
    print("done", flush=True)
`
	m, cmd, w, lines := startPiped(t, python, "-c", script)
	defer func() { w.Close(); proctree.Wait(cmd); m.Destroy() }()
	for _, step := range []string{"thread", "thread", "main"} {
		before := m.CPU()
		w.WriteString(step + "\n")
		if l, err := lines.ReadString('\n'); err != nil || l != "done\n" {
			t.Fatalf("%q %v", l, err)
		}
		if after := m.CPU(); after-before < 250*time.Millisecond {
			t.Fatalf("%s: CPU %v then %v: the busy thread is not counted", step, before, after)
		}
	}
}
