package exec

import (
	osexec "os/exec"
	"slices"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// BenchmarkTrue starts and waits `true` through Start (run as bash -c true)
// and, alternating with it in the same run, a bare os/exec of
// `/bin/bash -c true`, and reports the median of each and their ratio
// (target: ratio ≤ 1.2). The bare run goes through proctree.Start and Wait
// only because the reaper runs in this package's tests, as in the daemon.
func BenchmarkTrue(b *testing.B) {
	var ours, bare []time.Duration
	runOurs := func() {
		t0 := time.Now()
		p, err := Start(Options{Cmd: "true"})
		require.NoError(b, err)
		<-p.Done()
		ours = append(ours, time.Since(t0))
		r := p.Info().Result
		require.False(b, r.ExitCode == nil || *r.ExitCode != 0, "result %s", show(*r))
	}
	runBare := func() {
		t0 := time.Now()
		cmd := osexec.Command("/bin/bash", "-c", "true")
		require.NoError(b, proctree.Start(cmd))
		require.NoError(b, proctree.Wait(cmd))
		bare = append(bare, time.Since(t0))
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			runOurs()
			runBare()
		} else {
			runBare()
			runOurs()
		}
	}
	mo, mb := median(ours), median(bare)
	b.ReportMetric(float64(mo.Nanoseconds()), "exec-ns/op")
	b.ReportMetric(float64(mb.Nanoseconds()), "osexec-ns/op")
	b.ReportMetric(float64(mo)/float64(mb), "ratio")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
