// Package condwait waits on a sync.Cond for a bounded time.
package condwait

import (
	"sync"
	"time"
)

// Wait waits on c, whose lock the caller holds, until done reports true or
// d has passed, and returns done's last answer. The lock is held again when
// it returns.
func Wait(c *sync.Cond, d time.Duration, done func() bool) bool {
	over := false
	t := time.AfterFunc(d, func() {
		c.L.Lock()
		over = true
		c.Broadcast()
		c.L.Unlock()
	})
	defer t.Stop()
	for !done() && !over {
		c.Wait()
	}
	return done()
}
