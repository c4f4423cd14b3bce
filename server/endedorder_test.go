package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndedInTheOrderTheyEnded notes records out of the order they ended,
// as their watchers may (a run answered, the next one sent and ended before
// the goroutine watching the first ran): the order is by end, so the oldest
// is forgotten first, where the newer one noted first went first
// (TestMaxEnded failed so in CI).
func TestEndedInTheOrderTheyEnded(t *testing.T) {
	var e endedRecords
	t0 := time.Now()
	for _, r := range []endedAt{{"b", t0.Add(2)}, {"a", t0.Add(1)}, {"d", t0.Add(4)}, {"c", t0.Add(3)}, {"e", t0.Add(5)}} {
		e.insertLocked(r)
	}
	var ids []string
	for _, r := range e.order[e.head:] {
		ids = append(ids, r.id)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, ids)
	// What was looked at already is not moved past.
	e.head = 3
	e.insertLocked(endedAt{"z", t0})
	require.Equal(t, "z", e.order[3].id)
}
