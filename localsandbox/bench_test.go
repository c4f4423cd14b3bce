package localsandbox

import (
	"io"
	osexec "os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkRunTrue measures Run of "true" against forking and waiting
// "bash -c true" with os/exec, alternating the two; it reports the medians
// and their ratio.
func BenchmarkRunTrue(b *testing.B) {
	s, err := New(b.TempDir())
	require.NoError(b, err)
	defer s.Stop()
	var base, run []time.Duration
	for b.Loop() {
		t0 := time.Now()
		require.NoError(b, osexec.Command(Shell, "-c", "true").Run())
		t1 := time.Now()
		res, err := s.Run(b.Context(), RunOptions{Command: "true"})
		require.False(b, err != nil || res.ExitCode != 0, "%v %v", res, err)
		base, run = append(base, t1.Sub(t0)), append(run, time.Since(t1))
	}
	reportRatio(b, run, base, "run")
}

// BenchmarkSpawnStdout measures reading 64 MiB of a spawned command's
// stdout through Process.Stdout against reading the same command's stdout
// from an os/exec pipe, alternating the two.
func BenchmarkSpawnStdout(b *testing.B) {
	const size = 64 << 20
	cmd := "head -c 67108864 /dev/zero"
	s, err := New(b.TempDir())
	require.NoError(b, err)
	defer s.Stop()
	var base, spawn []time.Duration
	b.SetBytes(size)
	for b.Loop() {
		t0 := time.Now()
		c := osexec.Command(Shell, "-c", cmd)
		out, _ := c.StdoutPipe()
		require.NoError(b, c.Start())
		n, _ := io.Copy(io.Discard, out)
		c.Wait()
		t1 := time.Now()
		p, err := s.Spawn(b.Context(), RunOptions{Command: cmd})
		require.NoError(b, err)
		m, err := io.Copy(io.Discard, p.Stdout())
		p.Wait(b.Context())
		require.False(b, n != size || m != size || err != nil, "read %d and %d bytes (%v), want %d", n, m, err, size)
		base, spawn = append(base, t1.Sub(t0)), append(spawn, time.Since(t1))
	}
	reportRatio(b, spawn, base, "spawn")
}

// reportRatio reports the medians of got and base and got's as a multiple
// of base's.
func reportRatio(b *testing.B, got, base []time.Duration, name string) {
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	g, bl := median(got), median(base)
	b.ReportMetric(float64(g.Microseconds()), name+"-µs")
	b.ReportMetric(float64(bl.Microseconds()), "baseline-µs")
	b.ReportMetric(float64(g)/float64(bl), "ratio")
}
