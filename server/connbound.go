package server

import (
	"net"
	"sync"
	"sync/atomic"
)

// connCount counts the connections open under a bound, and wakes those
// that wait for a place (see boundListener) whenever one is given back.
type connCount struct {
	atomic.Int64
	mu    sync.Mutex
	freed chan struct{} // closed when a place is given back; nil: no one waits
}

// Add adds d to the count and returns the new count; a place given back
// (d < 0) wakes the waiters.
func (c *connCount) Add(d int64) int64 {
	n := c.Int64.Add(d)
	if d < 0 {
		c.mu.Lock()
		if c.freed != nil {
			close(c.freed)
			c.freed = nil
		}
		c.mu.Unlock()
	}
	return n
}

// wait returns a channel closed once a place is given back after the call.
func (c *connCount) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed == nil {
		c.freed = make(chan struct{})
	}
	return c.freed
}

// BoundListener returns ln with its connections counted under the API's
// bound, MaxConnections, together with the API's own and those of every
// other listener so bound: past it, the connection accepted waits for one
// of them to close, and the next ones wait in the kernel's accept queue,
// which takes none of the daemon's descriptors. Listeners bounded each on its own, at half
// the limit of open files, could together hold more descriptors than the
// limit. A connection to the API past the bound closes the API's idlest
// connection, or is refused, as ever (see Serve).
func (s *Server) BoundListener(ln net.Listener) net.Listener {
	return &boundListener{Listener: ln, open: s.conns, max: int64(s.opts.MaxConnections), done: make(chan struct{})}
}

// boundListener is BoundListener's.
type boundListener struct {
	net.Listener
	open *connCount
	max  int64
	done chan struct{}
	once sync.Once
}

// Accept accepts a connection, then waits for its place: a place is not
// held while no connection comes, where the API could use it.
func (l *boundListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		freed := l.open.wait()
		// Taken only when free, never past the bound and back, which
		// would wake the other waiters, and each of them wake it again.
		if n := l.open.Load(); n < l.max {
			if l.open.CompareAndSwap(n, n+1) {
				return &boundConn{Conn: c, open: l.open}, nil
			}
			continue
		}
		select {
		case <-freed:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener, and ends an accept that waits for a place.
func (l *boundListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// boundConn gives its place back once closed.
type boundConn struct {
	net.Conn
	open   *connCount
	closed sync.Once
}

func (c *boundConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() { c.open.Add(-1) })
	return err
}

// NetConn returns the connection c counts.
func (c *boundConn) NetConn() net.Conn { return c.Conn }
