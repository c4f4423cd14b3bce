package containment_test

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/proctree"
)

// allocate is a command that takes n MiB of memory and touches it.
func allocate(mib int) string {
	return "perl -e '$x = \"a\" x (" + strconv.Itoa(mib) + " << 20); print \"held\\n\"'"
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20}
	r := containmenttest.Limited(t, l)
	m, err := r.New("mem", l)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	cmd, out := run(t, m, "exec "+allocate(256))
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("256 MiB under 64 MiB: %v %q", cmd.ProcessState, out)
	}
	if s := m.Stats(); s.OOMKills != 1 || s.MemoryPeak > 64<<20 || s.MemoryPeak < 32<<20 {
		t.Fatalf("stats after the OOM kill: %+v", s)
	}
	m.ResetPeak()
	if cmd, out := run(t, m, allocate(16)); !cmd.ProcessState.Success() {
		t.Fatalf("16 MiB under 64 MiB: %v %q", cmd.ProcessState, out)
	}
	if s := m.Stats(); s.MemoryPeak > 40<<20 || s.MemoryPeak < 16<<20 {
		t.Fatalf("the peak after a reset and 16 MiB: %d", s.MemoryPeak)
	}
}

func TestPidsLimit(t *testing.T) {
	t.Parallel()
	l := containment.Limits{Pids: 8}
	r := containmenttest.Limited(t, l)
	m, err := r.New("pids", l)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	_, out := run(t, m, `perl -e 'for (1..12) { my $p = fork(); defined $p or print "fork: $!\n" and last; $p or sleep 5, exit } print "done\n"'`)
	if !strings.Contains(out, "Resource temporarily unavailable") || !strings.Contains(out, "done") {
		t.Fatalf("12 forks under pids 8: %q", out)
	}
}

// A pids limit is the process's own from its first instruction: the
// daemon's thread that forks it into its v1 cgroups (a hybrid host) is not
// counted against it. Under pids 2 a shell runs one child, every time, and
// a second fails.
func TestPidsLimitIsTheProcesses(t *testing.T) {
	t.Parallel()
	l := containment.Limits{Pids: 2}
	r := containmenttest.Limited(t, l)
	for i := range 30 {
		m, err := r.New("pids2-"+strconv.Itoa(i), l)
		if err != nil {
			t.Fatal(err)
		}
		_, out := run(t, m, "/bin/true && echo ok")
		if out != "ok\n" {
			m.Destroy()
			t.Fatalf("run %d: one child under pids 2: %q", i, out)
		}
		// Once the thread has left: in the moment it leaves, the limit is
		// still one higher (see hybrid.Start).
		_, out = run(t, m, "sleep 0.1; sleep 1 >/dev/null 2>&1 & /bin/true && echo two")
		m.Destroy()
		if strings.Contains(out, "two") {
			t.Fatalf("run %d: two children under pids 2: %q", i, out)
		}
	}
}

// A busy loop under a CPU limit of a tenth of a core is throttled.
func TestCPULimit(t *testing.T) {
	t.Parallel()
	l := containment.Limits{CPUMillis: 100}
	r := containmenttest.Limited(t, l)
	m, err := r.New("cpu", l)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	cmd := exec.Command("perl", "-e", "1 while (times)[0] + (times)[1] < 0.3")
	if err := m.Start(cmd, proctree.Start); err != nil {
		t.Fatal(err)
	}
	proctree.Wait(cmd)
	if n := containment.Throttled(m); n == 0 {
		t.Fatal("300 ms of CPU under a tenth of a core was never throttled")
	}
}

func TestUnsupportedLimitNamesItsController(t *testing.T) {
	t.Parallel()
	r := containmenttest.Root(t, containment.Limits{})
	for c, l := range map[string]containment.Limits{"memory": {MemoryBytes: 64 << 20}, "pids": {Pids: 10}, "cpu": {CPUMillis: 500}} {
		without := containment.WithoutController(r, c)
		err := without.Check(l)
		if !errors.Is(err, containment.ErrUnsupported) || !strings.Contains(err.Error(), "the "+c+" controller") {
			t.Fatalf("a %s limit without its controller: %v", c, err)
		}
		if _, err := without.New("x", l); !errors.Is(err, containment.ErrUnsupported) {
			t.Fatalf("New with a %s limit without its controller: %v", c, err)
		}
	}
}

// TestRootRemadeWhenRemoved: the root's own cgroups, empty between
// processes, can be removed by anyone who may (a host's clean-up, an
// agent's rmdir of conch-*); the next process's cgroup makes them anew,
// limits and all. Every later process of the daemon failed to start:
// "make cgroup: mkdir ...: no such file or directory".
func TestRootRemadeWhenRemoved(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20, Pids: 50}
	r := containmenttest.Limited(t, l)
	for i, name := range []string{"before", "after"} {
		m, err := r.New(name, l)
		if err != nil {
			t.Fatalf("%s the root's removal: %v", name, err)
		}
		if cmd, out := run(t, m, "echo ran"); !cmd.ProcessState.Success() || out != "ran\n" {
			t.Fatalf("%s: %v %q", name, cmd.ProcessState, out)
		}
		if cmd, out := run(t, m, "exec "+allocate(256)); cmd.ProcessState.Success() {
			t.Fatalf("%s: 256 MiB under 64 MiB: %v %q", name, cmd.ProcessState, out)
		}
		if err := m.Destroy(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for _, d := range r.Dirs() {
				if err := syscall.Rmdir(d); err != nil {
					t.Fatalf("remove %s: %v", d, err)
				}
			}
		}
	}
}

// The largest limits Validate takes are ones the kernel applies as asked,
// and past them Validate refuses: before, pids 2^31 and cpuMillis 2^59+1
// failed in the kernel (EINVAL, an internal error), and cpuMillis
// 92233720368548 and 576460752303423500 overflowed into no quota and 1.2%
// of a core.
func TestLimitsAtTheKernelsMaximums(t *testing.T) {
	t.Parallel()
	for _, l := range []containment.Limits{
		{Pids: containment.MaxPids + 1}, {Pids: 1 << 31}, {Pids: math.MaxInt64},
		{CPUMillis: containment.MaxCPUMillis + 1}, {CPUMillis: 92233720368548},
		{CPUMillis: 576460752303423489}, {CPUMillis: 576460752303423500}, {CPUMillis: math.MaxInt64},
	} {
		if err := l.Validate(); err == nil {
			t.Errorf("Validate(%+v) took it", l)
		}
	}
	max := containment.Limits{MemoryBytes: math.MaxInt64, Pids: containment.MaxPids, CPUMillis: containment.MaxCPUMillis}
	if err := max.Validate(); err != nil {
		t.Fatal(err)
	}
	r := containmenttest.Limited(t, max)
	m, err := r.New("max", max)
	if err != nil {
		t.Fatalf("the largest limits: %v", err)
	}
	defer m.Destroy()
	if cmd, out := run(t, m, "echo ok"); !cmd.ProcessState.Success() || out != "ok\n" {
		t.Fatalf("under the largest limits: %v %q", cmd.ProcessState, out)
	}
	// What the kernel holds, where this host applies it (v1 here; a v2
	// host's cpu.max is checked on files in TestV2LimitFiles).
	want := map[string]string{
		"pids.max":          strconv.Itoa(containment.MaxPids),
		"cpu.cfs_quota_us":  "100000000000",
		"cpu.cfs_period_us": "100000",
	}
	seen := map[string]bool{}
	for _, d := range r.Dirs()[1:] {
		for f, v := range want {
			b, err := os.ReadFile(filepath.Join(d, "max", f))
			if err != nil {
				continue
			}
			seen[f] = true
			if got := strings.TrimSpace(string(b)); got != v {
				t.Errorf("%s/%s = %s, want %s", d, f, got, v)
			}
		}
	}
	ctl := r.Controllers()
	if ctl["pids"] == "v1" && !seen["pids.max"] || ctl["cpu"] == "v1" && !seen["cpu.cfs_quota_us"] {
		t.Errorf("v1 limits %v, files read %v", ctl, seen)
	}
}
