package condwait

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWait: a wait ends when done turns true after a Broadcast, and when
// its time runs out with done still false, the lock held each time.
func TestWait(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	ready := false
	go func() {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		ready = true
		c.Broadcast()
		mu.Unlock()
	}()
	mu.Lock()
	if !Wait(c, time.Minute, func() bool { return ready }) {
		t.Fatal("done was true and Wait said it was not")
	}
	mu.Unlock()

	mu.Lock()
	began := time.Now()
	if Wait(c, 20*time.Millisecond, func() bool { return false }) {
		t.Fatal("done was never true")
	}
	if time.Since(began) > time.Minute { // a hang guard, not a timing assertion
		t.Fatal("the wait outlived its bound")
	}
	mu.Unlock()
}
