package proctree

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain runs every test with this process as a subreaper and the reaper
// running, as the daemon does, so every child here is started through Start.
func TestMain(m *testing.M) {
	if os.Getenv("CONCH_PROCTREE_HELPER") != "" {
		// The helper of TestChildrenStartWithDefaultSignals, with no
		// reaper: its control waits for its child through os/exec, which
		// a reaper would reap first (waitid: no child processes).
		os.Exit(m.Run())
	}
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
	require.NoError(t, err)
	cmd.WaitDelay = time.Second
	require.NoError(t, Start(cmd))
	t.Cleanup(func() {
		_ = Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = Wait(cmd)
	})
	sc := bufio.NewScanner(out)
	var pids []int
	for len(pids) < n && sc.Scan() {
		pid, err := strconv.Atoi(sc.Text())
		require.NoError(t, err, "line %q", sc.Text())
		pids = append(pids, pid)
	}
	require.GreaterOrEqual(t, len(pids), n, "got %d pids, want %d", len(pids), n)
	return cmd, pids
}

// alive reports whether pid exists and is not a zombie.

// eventually fails t unless cond holds within 10 s (a hang guard, not a timing
// assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline) || t.Context().Err() != nil, "still not true after 10 s: %s", what)
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

// looks are the two ways a tree is read: the kernel's children lists
// (what every caller gets on a kernel that keeps them) and the scan of
// every process's stat (on one that does not).
var looks = []struct {
	name string
	look func() lister
}{{"children-lists", func() lister { return childrenOf }}, {"scan", scanLinks}}

func TestDescendantsIncludesSetsid(t *testing.T) {
	t.Parallel()
	for _, l := range looks {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			cmd, pids := tree(t, treeScript, 3)
			root := cmd.Process.Pid
			for _, pid := range pids {
				eventually(t, fmt.Sprintf("pid %d among the descendants", pid), func() bool {
					return contains(descendants(l.look(), map[int]bool{root: true}), pid)
				})
			}
			assert.False(t, contains(descendants(l.look(), map[int]bool{root: true}), root), "the root is among its descendants")
		})
	}
}

// TestChildListsFindTheScannedTree: the kernel's children lists find the
// tree the scan of every process finds, grandchildren and the child of a
// thread that is not its process's main thread included (it is listed in
// that thread's own children file).
func TestChildListsFindTheScannedTree(t *testing.T) {
	t.Parallel()
	if !childLists() {
		t.Skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN)")
	}
	cmd, pids := tree(t, `sleep 30 & echo $!
(sleep 30 & echo $!; sleep 30) & echo $!
python3 -c '
import subprocess, threading, time
def spawn():
    print(subprocess.Popen(["sleep", "30"]).pid, flush=True)
    time.sleep(30)
threading.Thread(target=spawn).start()
time.sleep(30)' & echo $!
wait`, 5)
	root := cmd.Process.Pid
	got := descendants(childrenOf, map[int]bool{root: true})
	for _, pid := range pids {
		require.Contains(t, got, pid)
	}
	want := descendants(scanLinks(), map[int]bool{root: true})
	require.ElementsMatch(t, want, got, "children lists against the scan")
}

// TestTreeLookReadsNoOtherProcess: a look at a tree through the children
// lists reads the tree's own files, not every process's: /proc is not
// listed.
func TestTreeLookReadsNoOtherProcess(t *testing.T) {
	if !childLists() {
		t.Skip("this kernel keeps no children lists (CONFIG_PROC_CHILDREN)")
	}
	cmd, pids := tree(t, treeScript+"\nexec sleep 30", 3)
	before := Scans()
	got := Descendants(cmd.Process.Pid)
	require.NoError(t, Signal(cmd.Process.Pid, syscall.SIGKILL, false))
	require.Equal(t, before, Scans(), "listings of /proc")
	for _, pid := range pids {
		require.Contains(t, got, pid)
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
		for _, l := range looks {
			t.Run(tc.name+"/"+l.name, func(t *testing.T) {
				t.Parallel()
				// The root outlives its children, so that only a signal ends it.
				cmd, pids := tree(t, treeScript+"\nexec sleep 30", 3)
				root := cmd.Process.Pid
				d := newDelivery(tc.sig)
				d.tree(root, tc.self, l.look)
				require.NoError(t, d.first)
				for _, pid := range pids {
					eventually(t, fmt.Sprintf("descendant %d gone", pid), func() bool { return !Alive(pid) })
				}
				if tc.self {
					err := Wait(cmd)
					var ee *exec.ExitError
					require.ErrorAs(t, err, &ee, "root ended with %v, want signal %v", err, tc.sig)
					require.Equal(t, tc.sig, ee.Sys().(syscall.WaitStatus).Signal(), "root ended with %v", err)
				} else {
					require.True(t, Alive(root), "root signalled with self false")
				}
			})
		}
	}
}

func TestSignalGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "true")
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd))
	require.NoError(t, Signal(cmd.Process.Pid, syscall.SIGTERM, true), "signal to a reaped process")
}

// Looking for a tree's tagged processes reads the environment of no process
// started here for another tree (at a session's end, the other sessions'
// shells: 255 of them cost it 255 reads), but still that of its own root,
// and of every process not started here. A root started for another tree
// that exec'd with this tree's tag is not found by it: it is that tree's
// root. Not parallel: it counts the reads of readEnviron.
func TestTaggedReadsNoOtherTreesRoot(t *testing.T) {
	id := fmt.Sprintf("known-%d", time.Now().UnixNano())
	mine, kids := tree(t, "sleep 30 & echo $!; wait", 1, Tag(id))
	others := make(map[int]bool)
	for i := range 3 {
		other, _ := tree(t, "echo $$; exec sleep 30", 1, Tag(fmt.Sprintf("%s-other-%d", id, i)))
		others[other.Process.Pid] = true
	}
	// Started for another tree, it now carries this one's tag.
	turned, _ := tree(t, "echo $$; exec env "+Tag(id)+" sleep 30", 1, Tag(id+"-turned"))
	eventually(t, "the turned root carries the tag", func() bool {
		env, _ := readEnviron(turned.Process.Pid)
		return strings.Contains(string(env), Tag(id)+"\x00")
	})
	others[turned.Process.Pid] = true

	var mu sync.Mutex
	read := make(map[int]bool)
	readEnviron0 := readEnviron
	t.Cleanup(func() { readEnviron = readEnviron0 })
	readEnviron = func(pid int) ([]byte, error) {
		mu.Lock()
		read[pid] = true
		mu.Unlock()
		return readEnviron0(pid)
	}
	got := Tagged(id)
	require.ElementsMatch(t, []int{mine.Process.Pid, kids[0]}, got, "Tagged(%q)", id)
	require.True(t, read[mine.Process.Pid] && read[kids[0]], "the tree's own root and its child are read")
	for pid := range others {
		require.False(t, read[pid], "the environment of %d, started for another tree, was read", pid)
	}
	require.ElementsMatch(t, []int{mine.Process.Pid, kids[0], turned.Process.Pid}, Holding(Tag(id)), "Holding reads every process")
}

// An orphan (its parent exited) leaves the tree; its tag still finds it, and
// once killed the reaper reaps it: not even a zombie is left.
func TestTaggedOrphanIsFoundAndReaped(t *testing.T) {
	t.Parallel()
	id := fmt.Sprintf("orphan-%d", time.Now().UnixNano())
	cmd, pids := tree(t, `setsid sleep 30 & echo $!`, 1, Tag(id))
	require.NoError(t, Wait(cmd))
	orphan := pids[0]
	eventually(t, "the orphan reparented to this process", func() bool {
		s, ok := readStat(orphan)
		return ok && s.PPID == os.Getpid()
	})
	require.False(t, contains(Descendants(cmd.Process.Pid), orphan), "the orphan is still a descendant of its dead parent")
	require.Equal(t, []int{orphan}, Tagged(id), "Tagged(%q)", id)
	require.Empty(t, Tagged(id+"-other"), "Tagged of another id")
	born, ok := StartTime(orphan)
	require.True(t, ok, "start time of orphan %d", orphan)
	require.NoError(t, SignalTagged(id, syscall.SIGKILL))
	// Reaped: its /proc entry is gone, or (pids wrap at 32768 on a busy
	// machine) the pid now belongs to a process started later.
	eventually(t, fmt.Sprintf("orphan %d reaped (no /proc entry)", orphan), func() bool {
		st, ok := readStat(orphan) // a zombie is not reaped yet
		return !ok || st.Start != born
	})
}

// The grandchild of a setsid'd child exits after its parents: the zombie it
// leaves is reparented to this process and reaped.
func TestOrphanZombieOfSetsidGrandchildIsReaped(t *testing.T) {
	t.Parallel()
	cmd, pids := tree(t, `setsid sh -c 'sleep 0.2 & echo $!' &
wait`, 1)
	require.NoError(t, Wait(cmd))
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
		assert.NoError(t, err)
	}
}

func TestStartReaperTwice(t *testing.T) {
	t.Parallel()
	_, err := StartReaper()
	require.ErrorIs(t, err, ErrReaperRunning, "second StartReaper")
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
			assert.NoError(t, Start(owned[i]))
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, c := range owned {
		eventually(t, "the owned child a zombie", func() bool {
			s, ok := readStat(c.Process.Pid)
			return ok && s.State == 'Z'
		})
	}
	cmd, pids := tree(t, `setsid sh -c 'sleep 0.2 & echo $!' &
wait`, 1)
	require.NoError(t, Wait(cmd))
	eventually(t, fmt.Sprintf("orphan %d reaped", pids[0]), func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pids[0]))
		return errors.Is(err, os.ErrNotExist)
	})
	for _, c := range owned {
		s, ok := readStat(c.Process.Pid)
		require.True(t, ok && s.State == 'Z', "an owned zombie was reaped by the reaper")
		var ee *exec.ExitError
		err := Wait(c)
		require.ErrorAs(t, err, &ee, "owned child: %v, want exit status 9", err)
		require.Equal(t, 9, ee.ExitCode(), "owned child")
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
		require.NoError(t, SignalTagged(id, syscall.SIGUSR2))
		require.NoError(t, SignalTagged(id, syscall.SIGKILL))
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
		require.NoError(t, Wait(cmd))
		untagged := pids[0]
		t.Cleanup(func() {
			if Alive(untagged) {
				_ = syscall.Kill(untagged, syscall.SIGKILL)
			}
		})
		eventually(t, "the tagged member found", func() bool { return len(Tagged(id)) == 1 })
		require.NoError(t, SignalTagged(id, syscall.SIGKILL))
		eventually(t, fmt.Sprintf("untagged member %d gone", untagged), func() bool { return !Alive(untagged) })
	})
}

// The scans of /proc leave out the kernel's threads (kthreadd and its
// children), which no tree, tag or group of a user's holds; every process
// stays.
func TestScansLeaveOutKernelThreads(t *testing.T) {
	t.Parallel()
	if s, ok := readStat(kthreadd); !ok || s.Flags&pfKthread == 0 {
		t.Skip("no kernel thread is listed here (a container's pid namespace)")
	}
	cmd, _ := tree(t, "echo $$; exec sleep 30", 1)
	listed := pids()
	require.Contains(t, listed, os.Getpid())
	require.Contains(t, listed, cmd.Process.Pid)
	kids := childrenOf(kthreadd)
	require.NotEmpty(t, kids, "kthreadd's children")
	for _, k := range append(kids, kthreadd) {
		require.NotContains(t, listed, k, "kernel thread %d", k)
	}
	me, ok := readStat(os.Getpid())
	require.True(t, ok)
	require.Zero(t, me.Flags&pfKthread, "this process's flags")
}

// TestStartPassesNoStrayDescriptor: a descriptor this process holds without
// close-on-exec (one it inherited, or C code opened) does not reach a child
// started through Start, which gets only the descriptors its command hands
// it; this process keeps its own.
func TestStartPassesNoStrayDescriptor(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	stray, err := syscall.Dup(int(w.Fd())) // dup(2): no close-on-exec
	require.NoError(t, err)
	defer syscall.Close(stray)
	extra, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer extra.Close()

	n := strconv.Itoa(stray)
	cmd := exec.Command("sh", "-c", `if [ -e /proc/self/fd/`+n+` ]; then echo stray; else echo none; fi; [ -e /proc/self/fd/3 ] && echo extra`)
	cmd.ExtraFiles = []*os.File{extra}
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd))
	require.Equal(t, "none\nextra\n", out.String())
	_, err = syscall.Write(stray, []byte("x")) // still this process's
	require.NoError(t, err)
}

// TestCloseOnExecByWalk: the walk of /proc/self/fd that stands in for
// close_range on kernels before 5.11 marks a stray descriptor close-on-exec
// and leaves stdin, stdout and stderr as they were.
func TestCloseOnExecByWalk(t *testing.T) {
	stray, err := syscall.Dup(0)
	require.NoError(t, err)
	defer syscall.Close(stray)
	cloexec := func(fd int) bool {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		require.NoError(t, err)
		return flags&unix.FD_CLOEXEC != 0
	}
	require.False(t, cloexec(stray))
	std := []bool{cloexec(0), cloexec(1), cloexec(2)}
	closeOnExecByWalk()
	require.True(t, cloexec(stray))
	require.Equal(t, std, []bool{cloexec(0), cloexec(1), cloexec(2)})
}

// TestSignalProcessOnce sends one SIGINT to a process that leads its group
// and carries its tag, the way the engine signals what it started: its
// handler runs once. Sent to it directly, to its group and again as a tagged
// process, one interrupt was counted two to four times, and a program that
// takes a second Ctrl-C as "quit now" did so. The program counts in its
// handler and prints the count when asked on stdin: a handler that printed,
// with a SIGUSR1 whose handler printed "end" after it, now and then never
// printed it (seen under -race, the program alive and no signal pending).
func TestSignalProcessOnce(t *testing.T) {
	t.Parallel()
	tag := "once-" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(t.Context(), "python3", "-c", `
import signal, sys
n = 0
def count(sig, _):
    global n
    n += 1
signal.signal(signal.SIGINT, count)
print("ready", flush=True)
for _ in sys.stdin:
    print(n, flush=True)
`)
	cmd.Env = append(os.Environ(), TagEnv+"="+tag)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, Start(cmd))
	t.Cleanup(func() {
		_ = Signal(cmd.Process.Pid, syscall.SIGKILL, true)
		_ = Wait(cmd)
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// next is the program's next line, within a hang guard.
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the program ended")
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("no line from the program in 20 s")
			return ""
		}
	}
	require.Equal(t, "ready", next())
	for i := range 20 {
		require.NoError(t, SignalProcess(cmd.Process.Pid, tag, syscall.SIGINT, time.Time{}))
		_, err := io.WriteString(in, "?\n")
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(i+1), next(), "handler runs once for each interrupt")
	}
}
