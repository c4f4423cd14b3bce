package shellsession

import (
	"bufio"
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// BenchmarkRoundTrip measures P1 and P0 of PERFORMANCE.md against forking
// `bash -c true`, alternating the three in one run, and reports the ratios
// of the medians: session/fork (P1, target 0.06) and floor/fork (P0).
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	s, err := New(ctx, Options{})
	require.NoError(b, err)
	defer s.Close()

	floor := exec.Command("bash", "--norc", "--noprofile")
	in, err := floor.StdinPipe()
	require.NoError(b, err)
	outPipe, err := floor.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, proctree.Start(floor))
	defer func() { in.Close(); proctree.Wait(floor) }()
	out := bufio.NewReader(outPipe)

	var session, bare, forks []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
			b.Fatal(err, r)
		}
		t1 := time.Now()
		if _, err := in.Write([]byte("true; printf 'm\\n'\n")); err != nil {
			b.Fatal(err)
		}
		if _, err := out.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		fork := exec.Command("bash", "-c", "true")
		if err := proctree.Start(fork); err != nil {
			b.Fatal(err)
		}
		if err := proctree.Wait(fork); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		session, bare, forks = append(session, t1.Sub(t0)), append(bare, t2.Sub(t1)), append(forks, t3.Sub(t2))
	}
	m := median(forks)
	b.ReportMetric(float64(median(session).Microseconds()), "session-µs")
	b.ReportMetric(float64(median(bare).Microseconds()), "floor-µs")
	b.ReportMetric(float64(m.Microseconds()), "fork-µs")
	b.ReportMetric(float64(median(session))/float64(m), "P1-ratio")
	b.ReportMetric(float64(median(bare))/float64(m), "P0-ratio")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
