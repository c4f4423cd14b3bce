package containment_test

import (
	"testing"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
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
