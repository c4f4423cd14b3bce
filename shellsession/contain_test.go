package shellsession

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
)

// What a command starts that leaves the shell's tree and tag (setsid env
// -i, a double fork) ends with the session: when it is closed, and when
// its shell exits by itself.
func TestSessionEndEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	for _, exit := range []bool{false, true} {
		name := "close"
		if exit {
			name = "exit"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Containment: root})
			marker := containmenttest.Marker()
			run(t, s, CommandOptions{Cmd: containmenttest.Escapes(marker)})
			containmenttest.WaitRunning(t, marker, 2)
			if exit {
				run(t, s, CommandOptions{Cmd: "exit 3"})
				processtestWait(t, s)
			} else {
				s.Close()
			}
			containmenttest.Gone(t, marker)
		})
	}
}

func processtestWait(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-s.Done():
	case <-t.Context().Done():
		t.Fatal("the session did not end")
	}
	if r := s.Info().Result; r == nil || r.Reason != process.Exited {
		t.Fatalf("session ended %+v", r)
	}
}

// A command the OOM killer ends is signaled KILL with OOMKilled, a fork
// past the pids limit fails inside its command, and the session answers
// the next command after each; the shell itself killed ends the session
// lost, OOMKilled.
func TestSessionLimits(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20, Pids: 32}
	s := newSession(t, Options{Containment: containmenttest.Limited(t, l), Limits: l})
	r, _, _ := run(t, s, CommandOptions{Cmd: containmenttest.Allocate(256)})
	if r.Reason != process.Signaled || r.Signal != "KILL" || !r.OOMKilled {
		t.Fatalf("256 MiB under 64 MiB: %+v", r)
	}
	r, out, _ := run(t, s, CommandOptions{Cmd: containmenttest.Forks(64)})
	if code(r) != 0 || !strings.Contains(out, "fork: Resource temporarily unavailable") || r.OOMKilled {
		t.Fatalf("64 forks under pids 32: %+v %q", r, out)
	}
	r, out, _ = run(t, s, CommandOptions{Cmd: "echo still here"})
	if code(r) != 0 || out != "still here\n" {
		t.Fatalf("the next command: %+v %q", r, out)
	}
	r, _, _ = run(t, s, CommandOptions{Cmd: "exec " + containmenttest.Allocate(256)})
	if r.Reason != process.Lost || !r.OOMKilled || r.Error != "the OOM killer ended the session's shell at the memory limit" {
		t.Fatalf("the shell killed: command %+v", r)
	}
	<-s.Done()
	if sr := s.Info().Result; sr.Reason != process.Lost || !sr.OOMKilled || sr.Error != "the OOM killer ended the shell at the memory limit" {
		t.Fatalf("the shell killed: session %+v", sr)
	}
}

// An OOM kill is the command's during which it came: one whose child the
// killer ended, and which then ended well, keeps it, and neither a later
// command that dies of KILL, nor one the engine KILLs after the killer ended
// a child of it, nor the shell killed from outside, is reported as the OOM
// killer's.
func TestOOMKillIsItsOwnCommands(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20}
	s := newSession(t, Options{Containment: containmenttest.Limited(t, l), Limits: l})
	r, _, _ := run(t, s, CommandOptions{Cmd: containmenttest.Allocate(256) + "; true"})
	if code(r) != 0 || r.OOMKilled {
		t.Fatalf("a child OOM-killed, then true: %+v", r)
	}
	r, _, _ = run(t, s, CommandOptions{Cmd: "sh -c 'kill -KILL $$'"})
	if r.Reason != process.Exited || code(r) != 128+9 || r.OOMKilled {
		t.Fatalf("a program that KILLs itself after an earlier OOM kill: %+v", r)
	}
	c, err := s.Submit(CommandOptions{Cmd: containmenttest.Allocate(256) + "; tail -f /dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	waitProgram(t, c, "tail")
	if err := c.Kill(syscall.SIGKILL, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r = wait(t, c); r.Reason != process.Signaled || r.Signal != "KILL" || r.OOMKilled {
		t.Fatalf("KILLed by the engine after a child's OOM kill: %+v", r)
	}
	run(t, s, CommandOptions{Cmd: containmenttest.Allocate(256) + "; true"})
	r, _, _ = run(t, s, CommandOptions{Cmd: "kill -KILL $$"})
	if r.Reason != process.Lost || r.OOMKilled || r.Error != "the session's shell was killed by SIGKILL" {
		t.Fatalf("the shell KILLed after an OOM kill: command %+v", r)
	}
	<-s.Done()
	if sr := s.Info().Result; sr.Reason != process.Signaled || sr.Signal != "KILL" || sr.OOMKilled {
		t.Fatalf("the shell KILLed after an OOM kill: session %+v", sr)
	}
}

// A session the engine KILLs (kill of the session with KILL, as the API
// sends it) after the OOM killer ended a child of its running command is
// the engine's end, not the killer's: the command is lost to a KILL, and
// no message of it blames the OOM killer.
func TestSessionKilledAfterAChildsOOM(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20}
	s := newSession(t, Options{Containment: containmenttest.Limited(t, l), Limits: l})
	c, err := s.Submit(CommandOptions{Cmd: containmenttest.Allocate(256) + "; tail -f /dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	waitProgram(t, c, "tail")
	if err := s.Kill(syscall.SIGKILL, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, c); r.Reason != process.Lost || r.OOMKilled || strings.Contains(r.Error, "OOM") {
		t.Fatalf("the session KILLed by the engine after a child's OOM kill: command %+v", r)
	}
	<-s.Done()
	if sr := s.Info().Result; sr.Reason != process.Signaled || sr.Signal != "KILL" || sr.OOMKilled {
		t.Fatalf("the session KILLed by the engine after a child's OOM kill: session %+v", sr)
	}
}

// A login bash whose profile cannot fork under the session's pids limit
// (bash retries each fork for a while) is refused saying that the limit
// may be too small, not that its profile may block.
func TestLoginForksFailUnderPids(t *testing.T) {
	t.Parallel()
	l := containment.Limits{Pids: 2}
	home := t.TempDir()
	profile := "sleep 5 & sleep 5 & sleep 5 & sleep 5 & wait\n"
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	s, err := New(ctx, Options{Shell: "bash", Login: true, Env: map[string]string{"HOME": home},
		ReadyWithin: 3 * time.Second, Containment: containmenttest.Limited(t, l), Limits: l})
	if s != nil {
		s.Close()
	}
	if !errors.Is(err, process.ErrInvalidArgument) || !strings.Contains(err.Error(), "(its forks failed: a pids limit may be too small for it)") {
		t.Fatalf("a login profile whose forks fail under pids 2: %v", err)
	}
}

// Each command reports the CPU time and memory of its session's cgroup
// while it ran.
func TestCommandUsage(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Containment: containmenttest.Root(t, containment.Limits{})})
	r, _, _ := run(t, s, CommandOptions{Cmd: containmenttest.Busy})
	if r.Usage == nil || r.Usage.CPU < 250*time.Millisecond || r.Usage.CPU > 450*time.Millisecond {
		t.Fatalf("a 300 ms busy loop: usage %+v", r.Usage)
	}
	r, _, _ = run(t, s, CommandOptions{Cmd: containmenttest.Allocate(48)})
	if r.Usage.MemoryPeak < 48<<20 {
		t.Fatalf("48 MiB held: usage %+v", r.Usage)
	}
	r, _, _ = run(t, s, CommandOptions{Cmd: "true"})
	if r.Usage.CPU > 100*time.Millisecond || r.Usage.MemoryPeak >= 48<<20 {
		t.Fatalf("true after them: usage %+v (the peak is reset per command)", r.Usage)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	u := s.Info().Result.Usage
	if u == nil || u.CPU < 250*time.Millisecond || u.MemoryPeak < 48<<20 {
		t.Fatalf("the ended session, the busy loop and the 48 MiB in its life: usage %+v", u)
	}
}

// Without cgroups a command's CPU time is its shell's and that of the
// children it reaped; the memory peak is unknown.
func TestCommandUsageWithoutCgroups(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	r, _, _ := run(t, s, CommandOptions{Cmd: containmenttest.Busy})
	if r.Usage == nil || r.Usage.CPU < 250*time.Millisecond || r.Usage.CPU > 450*time.Millisecond || r.Usage.MemoryPeak != 0 {
		t.Fatalf("a 300 ms busy loop: usage %+v", r.Usage)
	}
}

// TestBuiltinsRunAtThePidsLimit: in a session whose background jobs hold
// every pid its limit allows, a command of builtins still runs, with $? as
// the command before left it — 2 here, which a frame gives $? with no fork
// (see sentinel.Paths.StatusFile): the subshell that gave it before failed
// to fork there, and the rest of the frame's line went with it, so that
// dash and zsh skipped the command (and reported a status of their own),
// and bash waited for its jobs to end. So a user can still kill the jobs.
func TestBuiltinsRunAtThePidsLimit(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			l := containment.Limits{Pids: 8}
			s := newSession(t, Options{Shell: shell, Containment: containmenttest.Limited(t, l), Limits: l})
			dir := t.TempDir()
			// The shell and seven jobs: the limit; then a builtin's status 2.
			r, _, _ := run(t, s, CommandOptions{Cmd: "for i in 1 2 3 4 5 6 7; do sleep 60 & done; [ a -lt ] 2>/dev/null"})
			if code(r) != 2 {
				t.Fatalf("the jobs: %+v", r)
			}
			r, out, _ := run(t, s, CommandOptions{Cmd: `echo "was $?"; cd ` + dir})
			if code(r) != 0 || out != "was 2\n" || r.Cwd != dir {
				t.Fatalf("builtins at the limit: %+v %q", r, out)
			}
			// The session's end kills the jobs, with its cgroup.
		})
	}
}

// Without containment, what a command starts that leaves the shell's tree,
// its process group and its tag (setsid env -i, double-forked) outlives
// the session, as the docs say; what only called setsid and cleared its
// environment is still in the shell's tree when the session ends, and
// ends with it.
//
// Not in parallel: the escape is an orphan of this test binary, which the
// other tests' ends of their cgroups and sessions may take with theirs
// (seen in full runs: none left).
func TestSessionEndWithoutContainmentMissesAnEscape(t *testing.T) {
	s := newSession(t, Options{})
	marker := containmenttest.Marker()
	run(t, s, CommandOptions{Cmd: containmenttest.Escapes(marker)})
	// Both must have escaped before the end: a setsid not yet become the
	// sleep still carries the tree's tag, which the end finds.
	containmenttest.WaitEscaped(t, marker, 2)
	t.Cleanup(func() {
		for _, pid := range containmenttest.Running(marker) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	s.Close()
	containmenttest.WaitRunning(t, marker, 1)
}

// A command's usage is its session's cgroup's while it ran, which is
// shared: a background job of an earlier command that runs meanwhile
// counts in it.
func TestCommandUsageCountsEarlierJobs(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Containment: containmenttest.Root(t, containment.Limits{})})
	r, _, _ := run(t, s, CommandOptions{Cmd: "{ sleep 1; " + containmenttest.Busy + "; } >/dev/null 2>&1 &"})
	if r.Usage == nil || r.Usage.CPU >= 250*time.Millisecond {
		t.Fatalf("a command that only started a job: usage %+v", r.Usage)
	}
	r, _, _ = run(t, s, CommandOptions{Cmd: "wait"})
	if r.Usage == nil || r.Usage.CPU < 250*time.Millisecond {
		t.Fatalf("a wait for the earlier job's busy loop: usage %+v", r.Usage)
	}
}
