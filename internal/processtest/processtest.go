// Package processtest holds what the tests of the engine's process kinds
// (session commands, code cells, one-shot processes) share: reading a
// process's output by channel, waiting for its end or for one of its
// processes to stop, its exit code.
package processtest

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// LoginProfile is the file in HOME (ZDOTDIR for zsh) that a login shell
// of each shell conch accepts reads, by the shell's name: bash reads
// .profile when it has no .bash_profile or .bash_login.
var LoginProfile = map[string]string{"bash": ".profile", "dash": ".profile", "mksh": ".profile", "ksh": ".profile", "busybox": ".profile", "zsh": ".zprofile"}

// Output returns what l holds of stdout and of stderr.
func Output(l *logstore.Log) (stdout, stderr string) {
	var o, e strings.Builder
	for _, f := range l.Page(0, 0).Frames {
		if f.Channel == logstore.Stdout {
			o.Write(f.Data)
		} else {
			e.Write(f.Data)
		}
	}
	return o.String(), e.String()
}

// Wait waits at most d for p to end and returns its result, failing the
// test with the output so far when it does not end.
func Wait(t testing.TB, p process.Process, d time.Duration) process.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	r, err := process.Wait(ctx, p)
	if err != nil {
		o, e := Output(p.Log())
		t.Fatalf("wait for %s: %v (output so far %q, %q)", p.ID(), err, o, e)
	}
	return r
}

// Code returns r's exit code, -1 when it has none.
func Code(r process.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// WaitStopped waits at most d until one of the processes pids returns is
// stopped by a signal (see proctree.Stopped).
func WaitStopped(t testing.TB, pids func() []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, pid := range pids() {
			if proctree.Stopped(pid) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process stopped within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SmallTmpfs returns a directory on a tmpfs of 256 KiB mounted for the
// test, for a test to fill as a command can fill /dev/shm. It skips the
// test where no tmpfs can be mounted (mount needs CAP_SYS_ADMIN).
func SmallTmpfs(t testing.TB) string {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// WriteExecutable writes an executable file at path for the test to run.
// It holds syscall.ForkLock while the file is open for writing: a process
// forked meanwhile by another goroutine (a parallel test, the engine) would
// hold the write descriptor until it execs, and running the file then
// fails with "text file busy" (ETXTBSY).
func WriteExecutable(tb testing.TB, path, text string) {
	tb.Helper()
	syscall.ForkLock.Lock()
	err := os.WriteFile(path, []byte(text), 0o755)
	syscall.ForkLock.Unlock()
	if err != nil {
		tb.Fatal(err)
	}
}
