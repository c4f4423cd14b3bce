package proctree

import (
	"sync"
	"testing"
	"testing/synctest"
)

// TestSharedScanBeginsAfterTheCall: callers that come while a scan runs get
// the next scan, not the one under way (a process they wanted found may
// have been started after it read its pid), and share that next scan.
func TestSharedScanBeginsAfterTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			begun int
			gates = []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
		)
		s := shared[int]{scan: func() int {
			begun++
			n := begun
			<-gates[n-1]
			return n
		}}
		got := make([]int, 3)
		var wg sync.WaitGroup
		wg.Go(func() { got[0] = s.get() })
		synctest.Wait() // the first scan is under way
		for i := 1; i < 3; i++ {
			wg.Go(func() { got[i] = s.get() })
		}
		synctest.Wait() // both wait
		close(gates[0])
		synctest.Wait() // the second scan is under way
		close(gates[1])
		wg.Wait()
		if got[0] != 1 || got[1] != 2 || got[2] != 2 || begun != 2 {
			t.Fatalf("results %v after %d scans; want [1 2 2] after 2: those who came during the first scan get one second scan", got, begun)
		}
		// Alone, a caller scans at once.
		close(gates[2])
		if n := s.get(); n != 3 {
			t.Fatalf("a caller alone got scan %d, want 3", n)
		}
	})
}
