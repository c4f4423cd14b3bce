package containment

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A goroutine on the leader runs fn on another thread, and keeps the
// leader meanwhile, so that fn cannot be scheduled there. Here the first
// thread asked is taken for the leader. Not parallel: it swaps isLeader.
func TestLockedOffLeaderLeavesTheLeader(t *testing.T) {
	real := isLeader
	t.Cleanup(func() { isLeader = real })
	calls, first := 0, 0
	isLeader = func() bool {
		calls++
		if calls == 1 {
			first = unix.Gettid()
			return true
		}
		return false
	}
	ran := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lockedOffLeader(func() bool { ran <- unix.Gettid(); return true })
	}()
	<-done
	tid := <-ran
	if calls != 2 || tid == first {
		t.Fatalf("fn ran on thread %d after %d looks, the one taken for the leader being %d", tid, calls, first)
	}
}
