package containment_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// The pure cgroup v2 Manager, as on a host whose v2 hierarchy delegates
// every controller: membership, kill, events and CPU time through v2 alone,
// no v1 cgroup made. (This host's v2 hierarchy has no memory, pids or cpu
// controller, so its limits are tested apart, on files.)
func TestPureV2Manager(t *testing.T) {
	t.Parallel()
	r := containmenttest.Root(t, containment.Limits{})
	for _, c := range []string{"memory", "pids", "cpu"} {
		r = containment.WithoutController(r, c)
	}
	m, err := r.New("v2", containment.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if containment.IsHybrid(m) {
		t.Fatal("a root without v1 controllers made a hybrid cgroup")
	}
	run(t, m, containmenttest.Busy)
	if cpu := m.CPU(); cpu < 250*time.Millisecond || cpu > 450*time.Millisecond {
		t.Fatalf("CPU %v, want about 300ms", cpu)
	}
	marker := containmenttest.Marker()
	run(t, m, containmenttest.Escapes(marker))
	containmenttest.WaitRunning(t, marker, 2)
	if !m.Populated() {
		t.Fatal("cgroup.events says empty with two sleeps in it")
	}
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	containmenttest.Gone(t, marker)
	if _, err := os.Stat(filepath.Join(r.Path(), "v2")); !os.IsNotExist(err) {
		t.Fatalf("the cgroup is left: %v", err)
	}
}

// The files and values of the v2 limits, written into a plain directory
// that has the controllers' files.
func TestV2LimitFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"memory.max", "memory.swap.max", "pids.max", "cpu.max"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := containment.SetV2(dir, containment.Limits{MemoryBytes: 64 << 20, Pids: 64, CPUMillis: 500}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "pids.max": "64", "cpu.max": "50000 100000"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
}
