package proctree

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartedSince: of two processes, only the one started after the mark
// is kept.
func TestStartedSince(t *testing.T) {
	t.Parallel()
	_, before := tree(t, "sleep 60 & echo $!; wait", 1)
	last, since := LastPID(), time.Now()
	_, after := tree(t, "sleep 60 & echo $!; wait", 1)
	require.Equal(t, after, StartedSince([]int{before[0], after[0]}, since, last))
}

// A process started well after the mark is kept whatever its pid: once
// pid_max/2 pids have been handed out since last, a later pid reads as
// handed out before it. Here last is the process's own pid, as it reads
// after a wrap; the work began two seconds before.
func TestStartedSinceAfterPidsWrapped(t *testing.T) {
	t.Parallel()
	since := time.Now().Add(-2 * time.Second)
	_, after := tree(t, "sleep 60 & echo $!; wait", 1)
	require.False(t, PIDAfter(after[0], after[0]))
	require.Equal(t, after, StartedSince(after, since, after[0]))
}
