package containment_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// hybridRoot is a test's Root on a host whose v2 hierarchy lacks the
// memory controller that v1 mounts; it skips elsewhere.
func hybridRoot(t *testing.T) *containment.Root {
	t.Helper()
	r := containmenttest.Root(t, containment.Limits{})
	if r.Controllers()["memory"] != "v1" {
		t.Skip("needs a hybrid host: v1 memory beside a v2 hierarchy without it")
	}
	m, err := r.New("first", containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !containment.IsHybrid(m) || containment.V1Dir(r, m, "memory") == "" {
		t.Skip("needs a hybrid host: v1 memory beside a v2 hierarchy without it")
	}
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forker's spare", func() bool { return containment.SpareReady(r) })
	return r
}

// v1CgroupOfThread returns the directory of the calling thread's v1 cgroup
// of controller, in the hierarchy that holds dir, a cgroup under it.
func v1CgroupOfThread(controller, dir string) (string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !slices.Contains(strings.Split(f[1], ","), controller) {
			continue
		}
		rel := strings.TrimSuffix(f[2], "/")
		if rel == "" { // the hierarchy's root: the last directory up with a tasks file
			d := dir
			for _, err := os.Stat(filepath.Join(filepath.Dir(d), "tasks")); err == nil; _, err = os.Stat(filepath.Join(filepath.Dir(d), "tasks")) {
				d = filepath.Dir(d)
			}
			return d, nil
		}
		if i := strings.LastIndex(dir, rel+"/"); i >= 0 {
			return dir[:i+len(rel)], nil
		}
		return "", fmt.Errorf("%s is not under this thread's %s cgroup %s", dir, controller, f[2])
	}
	return "", fmt.Errorf("no v1 %s cgroup in /proc/thread-self/cgroup", controller)
}

// threadsIn returns the threads of this process in the v1 cgroup dir.
func threadsIn(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tid := range strings.Fields(string(b)) {
		if _, err := os.Stat(filepath.Join("/proc/self/task", tid)); err == nil {
			out = append(out, tid)
		}
	}
	return out
}

// takeSpare makes the cgroup name, which takes r's spare, and returns it
// with its v1 memory cgroup, which holds the forker's thread: one of this
// process's, not its first, whose cgroup its memory is charged to.
func takeSpare(t *testing.T, r *containment.Root, name string) (containment.Manager, string) {
	t.Helper()
	m, err := r.New(name, containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mem := containment.V1Dir(r, m, "memory")
	if filepath.Base(mem) != name {
		t.Fatalf("the v1 memory cgroup is %s, want one named %s", mem, name)
	}
	got := threadsIn(t, mem)
	if len(got) != 1 {
		t.Fatalf("threads of this process in %s before the start: %v, want the forker's", mem, got)
	}
	if got[0] == strconv.Itoa(os.Getpid()) {
		t.Fatalf("the forker's thread is the process's first, whose cgroup its memory is charged to")
	}
	return m, mem
}

// A cgroup made with no memory limit on a hybrid host takes the forker's
// spare: a thread of the daemon is in its v1 memory cgroup before its
// Start, so the Start moves no thread (a first move after an idle spell
// waits for an RCU grace period); the process starts in both of its
// cgroups, and the thread has left when the cgroup is removed.
func TestSpareCgroupHoldsTheForkingThread(t *testing.T) {
	t.Parallel()
	r := hybridRoot(t)
	m, mem := takeSpare(t, r, "p1")
	_, out := run(t, m, "cat /proc/self/cgroup")
	if !strings.Contains(out, "memory:") || !strings.Contains(out, "/p1\n") {
		t.Fatalf("the process is not in its cgroups:\n%s", out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, ":memory:") && !strings.HasSuffix(strings.TrimSpace(line), "/p1") {
			t.Fatalf("the process's v1 memory cgroup is not p1's: %s", line)
		}
	}
	if err := m.Destroy(); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := os.Stat(mem); !os.IsNotExist(err) {
		t.Fatalf("%s is left: %v", mem, err)
	}
	waitFor(t, "the next spare", func() bool { return containment.SpareReady(r) })
}

// A cgroup that took the spare and is destroyed without a start, or whose
// root is destroyed first, is removed: the forker's thread leaves it. The
// root's Destroy (containmenttest's cleanup) fails on any cgroup left.
func TestSpareCgroupNeverStarted(t *testing.T) {
	t.Parallel()
	r := hybridRoot(t)
	m, mem := takeSpare(t, r, "abandoned")
	if err := m.Destroy(); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := os.Stat(mem); !os.IsNotExist(err) {
		t.Fatalf("%s is left: %v", mem, err)
	}
	waitFor(t, "the next spare", func() bool { return containment.SpareReady(r) })
	if _, err := r.New("kept", containment.Limits{}); err != nil {
		t.Fatal(err)
	}
	// The root's Destroy at cleanup finds the forker in "kept".
}

// A cgroup with a memory limit, or one that needs another v1 controller,
// does not take the spare: no thread of the daemon stays in a cgroup whose
// memory can run out.
func TestSpareNotForLimits(t *testing.T) {
	t.Parallel()
	r := hybridRoot(t)
	for i, l := range []containment.Limits{{MemoryBytes: 256 << 20}, {Pids: 100}} {
		if r.Check(l) != nil {
			continue
		}
		m, err := r.New("limited"+strconv.Itoa(i), l)
		if err != nil {
			t.Fatal(err)
		}
		mem := containment.V1Dir(r, m, "memory")
		if got := threadsIn(t, mem); len(got) != 0 {
			t.Fatalf("limits %+v: threads of this process in %s before the start: %v", l, mem, got)
		}
		if _, out := run(t, m, "cat /proc/self/cgroup"); !strings.Contains(out, "/limited"+strconv.Itoa(i)+"\n") {
			t.Fatalf("limits %+v: the process is not in its cgroups:\n%s", l, out)
		}
		if err := m.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if !containment.SpareReady(r) {
		t.Fatal("the spare was taken by a limited cgroup")
	}
}

// A v1 cgroup still busy at Destroy has its members KILLed, but never the
// daemon: while a thread of its own is in the cgroup (the forker's, on its
// way in or out), cgroup.procs lists the daemon's pid too. Here a thread of
// the test's own process stands in for the forker's; KILLed, the test
// binary dies.
func TestDestroyNeverKillsItsOwnProcess(t *testing.T) {
	t.Parallel()
	r := hybridRoot(t)
	m, err := r.New("holds-a-thread", containment.Limits{MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mem := containment.V1Dir(r, m, "memory")
	in, leave := make(chan error), make(chan struct{})
	go func() {
		// Locked and never unlocked: the thread ends with the goroutine.
		// But it leaves the cgroup first, back to the one it came from:
		// the main thread, wedged rather than ended when its goroutine
		// exits locked, stayed in it.
		runtime.LockOSThread()
		back, err := v1CgroupOfThread("memory", mem)
		if err == nil {
			err = os.WriteFile(filepath.Join(mem, "tasks"), []byte(strconv.Itoa(unix.Gettid())), 0)
		}
		in <- err
		<-leave
		_ = os.WriteFile(filepath.Join(back, "tasks"), []byte(strconv.Itoa(unix.Gettid())), 0)
	}()
	if err := <-in; err != nil {
		t.Fatalf("move a thread into %s: %v", mem, err)
	}
	procs, _ := os.ReadFile(filepath.Join(mem, "cgroup.procs"))
	if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(os.Getpid())) {
		t.Fatalf("%s lists %q, not this process", mem, procs)
	}
	// Busy with the thread: not removed, and this process lives on.
	if err := m.Destroy(); err == nil {
		t.Fatalf("destroy of a cgroup that holds a thread of this process succeeded")
	}
	close(leave)
	waitFor(t, "the thread to leave "+mem, func() bool {
		b, err := os.ReadFile(filepath.Join(mem, "cgroup.procs"))
		return err == nil && len(strings.TrimSpace(string(b))) == 0
	})
	if err := m.Destroy(); err != nil {
		t.Fatalf("destroy once the thread left: %v", err)
	}
}
