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
// bound, MaxConnections, together with the API's own, with those of every
// other listener so bound under half of it, and its own under a quarter of
// it: past any, the connection accepted waits for a place, and the next
// ones wait in the kernel's accept queue, which takes none of the daemon's
// descriptors. The quarter is so that conch sandboxd's two ports cannot
// take each other's places: a flood of idle gRPC connections, each let go
// of at its handshake's timeout and its place taken by the next one
// queued, kept the REST port waiting.
// Listeners bounded each on its own, at half the limit of open files, could
// together hold more descriptors than the limit. The half keeps the rest of
// the bound to the API, which closes its idlest connection to make room, or
// refuses one, as ever (see Serve): connections that need no token to
// open, to conch sandboxd's ports, cannot keep the API's clients out.
func (s *Server) BoundListener(ln net.Listener) net.Listener {
	return &boundListener{Listener: ln, open: s.conns, max: int64(s.opts.MaxConnections), evict: s.idle,
		beside: &s.beside, besideMax: max(1, int64(s.opts.MaxConnections)/2), ownMax: max(1, int64(s.opts.MaxConnections)/4),
		done: make(chan struct{})}
}

// besideBound is what the listeners of BoundListener share: the count of
// their connections, and their turns at taking a place.
type besideBound struct {
	connCount
	taking sync.Mutex
}

// boundListener is BoundListener's.
type boundListener struct {
	net.Listener
	open      *connCount
	max       int64
	evict     *idleConns // the API's, the idlest of which goes to make room
	beside    *besideBound
	besideMax int64
	own       connCount // this listener's connections, under ownMax
	ownMax    int64
	done      chan struct{}
	once      sync.Once
}

// Accept accepts a connection, then waits for its place: a place is not
// held while no connection comes, where the API could use it.
func (l *boundListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		freed, besideFreed, idled := l.open.wait(), l.beside.wait(), l.evict.idledChan()
		if l.take() {
			return &boundConn{Conn: c, open: l.open, beside: &l.beside.connCount, own: &l.own}, nil
		}
		if l.beside.Load() < l.besideMax && l.own.Load() < l.ownMax && l.evict.closeIdlest() {
			// The API's connections held the bound, one idle: closed,
			// it no longer counts.
			continue
		}
		select {
		case <-freed:
		case <-besideFreed:
		case <-idled: // one of the API's may go to make room now
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// take takes a place under both bounds, or none. A place is taken only
// when free, never past the bound and given back, which would wake the
// other waiters, each of which would wake it again.
func (l *boundListener) take() bool {
	l.beside.taking.Lock() // the only one to raise the count beside
	defer l.beside.taking.Unlock()
	if l.beside.Load() >= l.besideMax || l.own.Load() >= l.ownMax {
		return false
	}
	for {
		n := l.open.Load()
		if n >= l.max {
			return false
		}
		if l.open.CompareAndSwap(n, n+1) {
			l.beside.Int64.Add(1)
			l.own.Int64.Add(1)
			return true
		}
	}
}

// Close closes the listener, and ends an accept that waits for a place.
func (l *boundListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// boundConn gives its places back once closed.
type boundConn struct {
	net.Conn
	open, beside, own *connCount
	closed            sync.Once
}

func (c *boundConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() {
		c.own.Add(-1)
		c.beside.Add(-1)
		c.open.Add(-1)
	})
	return err
}

// NetConn returns the connection c counts.
func (c *boundConn) NetConn() net.Conn { return c.Conn }
