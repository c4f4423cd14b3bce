package exec

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
)

// Stop ends what left the process's tree and tag — setsid env -i, double
// forks — through its cgroup, whether the process still runs or has ended.
func TestStopEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	for _, tc := range []struct {
		name, tail string
		kind       process.Kind
	}{
		{"exec-ended", "", process.KindExec},
		{"exec-running", "sleep 60", process.KindExec},
		{"pty-running", "sleep 60", process.KindPTY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := containmenttest.Marker()
			p := start(t, Options{Kind: tc.kind, Cmd: containmenttest.Escapes(marker) + tc.tail, Containment: root})
			containmenttest.WaitRunning(t, marker, 2)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Stop(ctx))
			containmenttest.Gone(t, marker)
		})
	}
}
