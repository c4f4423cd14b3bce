package proctree

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Our own start time, read through the one parser, lies between boot and now,
// and the last pid handed out is at least ours.
func TestStartTimeAndLastPID(t *testing.T) {
	t.Parallel()
	now, ok := ticksAt(time.Now())
	if ticks, ok2 := StartTime(os.Getpid()); !ok || !ok2 || ticks == 0 || ticks > now {
		t.Fatalf("StartTime(self) = %d, %v; now %d ticks after boot", ticks, ok2, now)
	}
	if last := LastPID(); last >= 0 && !PIDAfter(last, os.Getpid()-1) && last != os.Getpid() {
		t.Fatalf("LastPID() = %d is before our pid %d", last, os.Getpid())
	}
	if !PIDAfter(5, -1) || PIDAfter(5, 5) || !PIDAfter(6, 5) || PIDAfter(4, 5) {
		t.Fatal("PIDAfter orders pids wrongly")
	}
}

// Sleeping tells a process asleep in a system call from one that runs, one
// that is stopped, and one that is gone.
func TestSleeping(t *testing.T) {
	t.Parallel()
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	asleep := start("sleep", "100")
	busy := start("sh", "-c", "while :; do :; done")
	stopped := start("sleep", "100")
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !Sleeping(asleep.Process.Pid) || Sleeping(stopped.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep 100: Sleeping = %v; stopped: %v", Sleeping(asleep.Process.Pid), Sleeping(stopped.Process.Pid))
		}
		time.Sleep(time.Millisecond)
	}
	// A busy loop may be seen asleep for a moment (a page fault, its
	// time slice given up); it runs in most looks.
	running := 0
	for range 100 {
		if !Sleeping(busy.Process.Pid) {
			running++
		}
	}
	if running < 50 {
		t.Fatalf("a busy loop was seen asleep in %d looks of 100", 100-running)
	}
	gone := start("true")
	gone.Wait()
	if Sleeping(gone.Process.Pid) {
		t.Fatal("a process that is gone is asleep")
	}
}

// HasChildren sees a shell's child, and none under a program that forked
// nothing.
func TestHasChildren(t *testing.T) {
	t.Parallel()
	if !childLists() {
		t.Skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN): HasChildren reports none")
	}
	shell := exec.Command("sh", "-c", "sleep 100; true")
	lone := exec.Command("sleep", "100")
	for _, cmd := range []*exec.Cmd{shell, lone} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	deadline := time.Now().Add(10 * time.Second)
	for !HasChildren(shell.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("the shell's sleep was never seen")
		}
		time.Sleep(time.Millisecond)
	}
	if HasChildren(lone.Process.Pid) {
		t.Fatal("a lone sleep has a child")
	}
}

// CPUTime reads a busy process's CPU time rising, and none for a process
// that is gone.
func TestCPUTime(t *testing.T) {
	t.Parallel()
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	first, ok := CPUTime(busy.Process.Pid)
	if !ok {
		t.Fatal("no CPU time for a running process")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, ok := CPUTime(busy.Process.Pid)
		if ok && now-first >= 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a busy loop's CPU time went from %v to %v in 10 s", first, now)
		}
		time.Sleep(time.Millisecond)
	}
	busy.Process.Kill()
	busy.Wait()
	if _, ok := CPUTime(busy.Process.Pid); ok {
		t.Fatal("CPU time for a process that is gone")
	}
}

// DefaultAction tells a process that would die of SIGINT from one that
// catches it, one that ignores it, and one that is gone.
func TestDefaultAction(t *testing.T) {
	t.Parallel()
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("python3", "-c", "import signal, sys, time\n"+script+"\nsys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(60)")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if _, err := out.Read(make([]byte, 3)); err != nil { // "up": its handler is in place
			t.Fatal(err)
		}
		return cmd
	}
	plain := start("signal.signal(signal.SIGINT, signal.SIG_DFL)")
	caught := start("signal.signal(signal.SIGINT, lambda *a: None)")
	ignored := start("signal.signal(signal.SIGINT, signal.SIG_IGN)")
	if !DefaultAction(plain.Process.Pid, syscall.SIGINT) {
		t.Error("a process with SIGINT at its default action: false")
	}
	if DefaultAction(caught.Process.Pid, syscall.SIGINT) || DefaultAction(ignored.Process.Pid, syscall.SIGINT) {
		t.Error("a process that catches or ignores SIGINT: true")
	}
	if !DefaultAction(caught.Process.Pid, syscall.SIGTERM) {
		t.Error("a process that catches SIGINT only, of SIGTERM: false")
	}
	plain.Process.Signal(syscall.SIGKILL)
	plain.Wait()
	if DefaultAction(plain.Process.Pid, syscall.SIGINT) {
		t.Error("a process gone: true")
	}
}
