package proctree

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs every test with this process as a subreaper and the reaper
// running, as the daemon does, so every child here is started through Start.
func TestMain(m *testing.M) {
	if err := EnableSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop, err := StartReaper()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// tree runs script under sh with extra environment and returns its command
// and the first n lines it prints (pids, by convention).
func tree(t *testing.T, script string, n int, env ...string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = time.Second
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = Wait(cmd)
	})
	sc := bufio.NewScanner(out)
	var pids []int
	for len(pids) < n && sc.Scan() {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		pids = append(pids, pid)
	}
	if len(pids) < n {
		t.Fatalf("got %d pids, want %d", len(pids), n)
	}
	return cmd, pids
}

// alive reports whether pid exists and is not a zombie.

// eventually fails t unless cond holds within 10 s (a hang guard, not a timing
// assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("still not true after 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A background child and a grandchild under setsid are both descendants.
const treeScript = `sleep 30 & echo $!
setsid sh -c 'sleep 30 & echo $!; wait' &
echo $!
wait`

func TestDescendantsIncludesSetsid(t *testing.T) {
	t.Parallel()
	cmd, pids := tree(t, treeScript, 3)
	for _, pid := range pids {
		eventually(t, fmt.Sprintf("pid %d among the descendants", pid), func() bool {
			return contains(Descendants(cmd.Process.Pid), pid)
		})
	}
	if contains(Descendants(cmd.Process.Pid), cmd.Process.Pid) {
		t.Error("Descendants includes the root")
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		self bool
	}{
		{"term-tree", syscall.SIGTERM, true},
		{"kill-tree", syscall.SIGKILL, true},
		{"kill-descendants-only", syscall.SIGKILL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The root outlives its children, so that only a signal ends it.
			cmd, pids := tree(t, treeScript+"\nexec sleep 30", 3)
			root := cmd.Process.Pid
			if err := Signal(root, tc.sig, tc.self); err != nil {
				t.Fatal(err)
			}
			for _, pid := range pids {
				eventually(t, fmt.Sprintf("descendant %d gone", pid), func() bool { return !Alive(pid) })
			}
			if tc.self {
				err := Wait(cmd)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != tc.sig {
					t.Fatalf("root ended with %v, want signal %v", err, tc.sig)
				}
			} else if !Alive(root) {
				t.Fatal("root signalled with self false")
			}
		})
	}
}

func TestSignalGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "true")
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := Wait(cmd); err != nil {
		t.Fatal(err)
	}
	if err := Signal(cmd.Process.Pid, syscall.SIGTERM, true); err != nil {
		t.Fatalf("signal to a reaped process: %v", err)
	}
}

// An orphan (its parent exited) leaves the tree; its tag still finds it, and
// once killed the reaper reaps it: not even a zombie is left.
func TestTaggedOrphanIsFoundAndReaped(t *testing.T) {
	t.Parallel()
	id := fmt.Sprintf("orphan-%d", time.Now().UnixNano())
	cmd, pids := tree(t, `setsid sleep 30 & echo $!`, 1, Tag(id))
	if err := Wait(cmd); err != nil {
		t.Fatal(err)
	}
	orphan := pids[0]
	eventually(t, "the orphan reparented to this process", func() bool {
		s, ok := readStat(orphan)
		return ok && s.ppid == os.Getpid()
	})
	if contains(Descendants(cmd.Process.Pid), orphan) {
		t.Fatal("the orphan is still a descendant of its dead parent")
	}
	if got := Tagged(id); len(got) != 1 || got[0] != orphan {
		t.Fatalf("Tagged(%q) = %v, want [%d]", id, got, orphan)
	}
	if got := Tagged(id + "-other"); len(got) != 0 {
		t.Fatalf("Tagged of another id = %v", got)
	}
	if err := SignalTagged(id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, fmt.Sprintf("orphan %d reaped (no /proc entry)", orphan), func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(orphan))
		return errors.Is(err, os.ErrNotExist)
	})
}

// The grandchild of a setsid'd child exits after its parents: the zombie it
// leaves is reparented to this process and reaped.
func TestOrphanZombieOfSetsidGrandchildIsReaped(t *testing.T) {
	t.Parallel()
	cmd, pids := tree(t, `setsid sh -c 'sleep 0.2 & echo $!' &
wait`, 1)
	if err := Wait(cmd); err != nil {
		t.Fatal(err)
	}
	eventually(t, fmt.Sprintf("grandchild %d reaped", pids[0]), func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pids[0]))
		return errors.Is(err, os.ErrNotExist)
	})
}

// Children started with Start keep their exit status while the reaper reaps
// orphans around them.
func TestOwnedStatusIsNotStolen(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			// Half of them leave an orphan behind to keep the reaper busy.
			script := "exit 7"
			if i%2 == 0 {
				script = "setsid true & exit 7"
			}
			cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
			if err := Start(cmd); err != nil {
				errs <- err
				return
			}
			err := Wait(cmd)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				errs <- fmt.Errorf("child %d: got %v, want exit status 7", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStartReaperTwice(t *testing.T) {
	t.Parallel()
	if _, err := StartReaper(); !errors.Is(err, ErrReaperRunning) {
		t.Fatalf("second StartReaper: %v, want ErrReaperRunning", err)
	}
}

// Owned zombies not waited for yet come first when the reaper peeks;
// orphans behind them are still reaped, and their status is kept. Which
// zombie a peek finds first depends on which thread forked it (the kernel
// starts at the waiting thread), so owned zombies are made from many
// goroutines to put one ahead of the orphan on most runs.
func TestOrphanBehindUnwaitedOwnedChildren(t *testing.T) {
	t.Parallel()
	owned := make([]*exec.Cmd, 16)
	var wg sync.WaitGroup
	for i := range owned {
		wg.Go(func() {
			owned[i] = exec.CommandContext(t.Context(), "sh", "-c", "exit 9")
			if err := Start(owned[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, c := range owned {
		eventually(t, "the owned child a zombie", func() bool {
			s, ok := readStat(c.Process.Pid)
			return ok && s.state == 'Z'
		})
	}
	cmd, pids := tree(t, `setsid sh -c 'sleep 0.2 & echo $!' &
wait`, 1)
	if err := Wait(cmd); err != nil {
		t.Fatal(err)
	}
	eventually(t, fmt.Sprintf("orphan %d reaped", pids[0]), func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pids[0]))
		return errors.Is(err, os.ErrNotExist)
	})
	for _, c := range owned {
		if s, ok := readStat(c.Process.Pid); !ok || s.state != 'Z' {
			t.Fatal("an owned zombie was reaped by the reaper")
		}
		var ee *exec.ExitError
		if err := Wait(c); !errors.As(err, &ee) || ee.ExitCode() != 9 {
			t.Fatalf("owned child: %v, want exit status 9", err)
		}
	}
}

// SignalTagged signals the groups of tagged processes, reaching members
// that cleared their environment, but never the caller's own group, which a
// tree started without a group of its own shares.
func TestSignalTaggedGroups(t *testing.T) {
	t.Parallel()
	t.Run("own-group-spared", func(t *testing.T) {
		got := make(chan os.Signal, 1)
		signal.Notify(got, syscall.SIGUSR2)
		defer signal.Stop(got)
		id := fmt.Sprintf("own-%d", time.Now().UnixNano())
		cmd, _ := tree(t, `trap '' USR2; echo $$; exec sleep 30`, 1, Tag(id))
		if err := SignalTagged(id, syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		if err := SignalTagged(id, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = Wait(cmd)
		select {
		case <-got:
			t.Fatal("the caller's own group was signalled")
		default:
		}
	})
	t.Run("untagged-member", func(t *testing.T) {
		id := fmt.Sprintf("group-%d", time.Now().UnixNano())
		// The group's leader exits; a tagged and an untagged member stay.
		cmd, pids := tree(t, `setsid sh -c 'sleep 30 & env -i sleep 30 & echo $!' &
wait`, 1, Tag(id))
		if err := Wait(cmd); err != nil {
			t.Fatal(err)
		}
		untagged := pids[0]
		t.Cleanup(func() {
			if Alive(untagged) {
				_ = syscall.Kill(untagged, syscall.SIGKILL)
			}
		})
		eventually(t, "the tagged member found", func() bool { return len(Tagged(id)) == 1 })
		if err := SignalTagged(id, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("untagged member %d gone", untagged), func() bool { return !Alive(untagged) })
	})
}
