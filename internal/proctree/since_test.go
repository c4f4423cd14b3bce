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
