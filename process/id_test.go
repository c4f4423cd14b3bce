package process

import (
	"testing"

	"github.com/conchsh/conch/internal/racetest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(4), u.Version(), id)
		require.Equal(t, uuid.RFC4122, u.Variant(), id)
		require.False(t, seen[id], "repeated id %s", id)
		seen[id] = true
	}
	if !racetest.Enabled { // the detector's instrumentation moves the bytes to the heap
		require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = NewID() }), "the string alone")
	}
}
