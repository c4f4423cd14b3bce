package containment_test

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/proctree"
)

// BenchmarkCommandMeter is what a session reads and writes around each
// command: the stats and a peak reset before, the stats after.
func BenchmarkCommandMeter(b *testing.B) {
	r := containmenttest.Root(b, containment.Limits{})
	m, err := r.New("meter", containment.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Destroy()
	for b.Loop() {
		m.Stats()
		m.ResetPeak()
		m.Stats()
	}
}

func BenchmarkPieces(b *testing.B) {
	r := containmenttest.Root(b, containment.Limits{})
	m, err := r.New("meter", containment.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Destroy()
	b.Run("stats", func(b *testing.B) {
		for b.Loop() {
			m.Stats()
		}
	})
	b.Run("reset", func(b *testing.B) {
		for b.Loop() {
			m.ResetPeak()
		}
	})
	for _, f := range []string{"cpu.stat", "peak", "oom"} {
		b.Run(f, func(b *testing.B) {
			for b.Loop() {
				containment.ReadFor(m, f)
			}
		})
	}
}

// BenchmarkOneShot is a one-shot process's life in a cgroup of its own
// (make it, start `true` in it, wait: µs-ended, whose ratio it reports;
// remove it: µs-contained, which a daemon does after its answer) against
// the same process started and waited without, in turn, with the time each piece of the
// cgroup's life takes: back to back, and after 20 ms of idle each, as an
// agent's commands come (on a hybrid host, the first move of a thread into
// a v1 cgroup after an idle spell waits for an RCU grace period: see the
// README's containment section).
func BenchmarkOneShot(b *testing.B) {
	for _, idle := range []time.Duration{0, 20 * time.Millisecond} {
		name := "back_to_back"
		if idle > 0 {
			name = "after_idle"
		}
		b.Run(name, func(b *testing.B) { oneShots(b, idle) })
	}
}

func oneShots(b *testing.B, idle time.Duration) {
	r := containmenttest.Root(b, containment.Limits{})
	start := func(c *exec.Cmd) error { return proctree.Start(c) }
	var contained, ended, bare, made, started, removed []time.Duration
	for i := 0; b.Loop(); i++ {
		time.Sleep(idle)
		t0 := time.Now()
		m, err := r.New(fmt.Sprintf("oneshot-%d", i), containment.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cmd := exec.Command("true")
		if err := m.Start(cmd, start); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := proctree.Wait(cmd); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if err := m.Destroy(); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		time.Sleep(idle)
		t5 := time.Now()
		cmd = exec.Command("true")
		if err := proctree.Start(cmd); err != nil {
			b.Fatal(err)
		}
		if err := proctree.Wait(cmd); err != nil {
			b.Fatal(err)
		}
		t6 := time.Now()
		contained, ended, bare = append(contained, t4.Sub(t0)), append(ended, t3.Sub(t0)), append(bare, t6.Sub(t5))
		made, started, removed = append(made, t1.Sub(t0)), append(started, t2.Sub(t1)), append(removed, t4.Sub(t3))
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(med(ended).Microseconds()), "µs-ended")
	b.ReportMetric(float64(med(contained).Microseconds()), "µs-contained")
	b.ReportMetric(float64(med(bare).Microseconds()), "µs-bare")
	b.ReportMetric(float64(med(ended))/float64(med(bare)), "ratio")
	b.Logf("n=%d: ended %v, removed too %v, against %v; making the cgroup %v, starting in it %v, removing it %v",
		len(bare), med(ended), med(contained), med(bare), med(made), med(started), med(removed))
}
