package exec

import (
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// ExpireAfterExit removes p from r ttl after p exits when p's keepLogs is
// on_exit_ttl, and does nothing otherwise; call it once, after r.Add(p). It
// does not poll: for a *Process a hook runs at its end, and any other kind
// of process is watched by one goroutine that returns when p is done. Then
// one timer per process waits out the rest of ttl, counted from the exit.
func ExpireAfterExit(r *process.Registry, p process.Process, ttl time.Duration) {
	if p.Info().KeepLogs != logstore.KeepOnExitTTL {
		return
	}
	expire := func() {
		left := ttl - time.Since(p.Info().ExitedAt)
		time.AfterFunc(max(left, 0), func() { r.Remove(p.ID()) })
	}
	if ep, ok := p.(*Process); ok {
		ep.whenDone(expire)
		return
	}
	go func() {
		<-p.Done()
		expire()
	}()
}

// whenDone runs f once p is done: now if it is, otherwise in the goroutine
// that ends p.
func (p *Process) whenDone(f func()) {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		f()
	default:
		p.onDone = append(p.onDone, f)
		p.mu.Unlock()
	}
}
