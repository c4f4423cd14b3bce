package server

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExpiryForgetsInTurn: records added at different times are each
// forgotten once their TTL has passed, never before, in the order they were
// added; after stop nothing more is forgotten.
func TestExpiryForgetsInTurn(t *testing.T) {
	t.Parallel()
	const ttl = 60 * time.Millisecond
	var mu sync.Mutex
	forgot := map[string]time.Time{}
	var order []string
	x := &expiry{ttl: ttl, max: 10, forget: func(id string) {
		mu.Lock()
		defer mu.Unlock()
		forgot[id] = time.Now()
		order = append(order, id)
	}}
	added := map[string]time.Time{}
	add := func(id string) {
		added[id] = time.Now()
		x.add(id)
	}
	add("a")
	add("b")
	time.Sleep(ttl / 2)
	add("c")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(forgot) == 3
	}, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	require.Equal(t, []string{"a", "b", "c"}, order)
	for id, at := range forgot {
		require.GreaterOrEqual(t, at.Sub(added[id]), ttl, "%s forgotten before its TTL", id)
	}
	mu.Unlock()

	add("d") // the queue went empty: a new timer serves it
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(forgot) == 4
	}, 10*time.Second, 5*time.Millisecond)

	add("e")
	x.stop()
	add("f")
	time.Sleep(2 * ttl)
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, forgot, "e", "forgotten after stop")
	require.NotContains(t, forgot, "f", "forgotten after stop")
}

// TestExpiryIsBounded: past max records waiting, the oldest is forgotten at
// once, so that the queue holds no more than the ended records kept.
func TestExpiryIsBounded(t *testing.T) {
	t.Parallel()
	var forgot []string
	x := &expiry{ttl: time.Hour, max: 2, forget: func(id string) { forgot = append(forgot, id) }}
	defer x.stop()
	x.add("a")
	x.add("b")
	require.Empty(t, forgot)
	x.add("c")
	require.Equal(t, []string{"a"}, forgot)
	x.add("d")
	require.Equal(t, []string{"a", "b"}, forgot)
	for i := range 1000 {
		x.add(string(rune('e' + i)))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, 2, len(x.due)-x.head)
	require.LessOrEqual(t, len(x.due), 4, "the queue is compacted as it goes")
}
