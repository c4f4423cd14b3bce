package server

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// metricsListener is the metrics listener's: it keeps places for the
// probes that scrapes cannot take. Sixteen clients asking for the metrics
// over and over held its sixteen places, each serving a scrape or with
// one waiting, none idle: a probe's connection was refused 429, or,
// opened while one of them was, closed as the idlest before it had sent
// its request, and 0 to 36 of 40 probes failed.
//
// So a connection is given no place until its first request line has
// come, read without being taken from the socket (peeked): one that asks
// GET or HEAD /livez or /readyz goes to the probes' places
// (metricsProbeConnections, apart from the scrapes' and answered once,
// Connection: close), any other to the scrapes' places, the bound of
// jsonErrorListener (metricsMaxConnections), which closes its idlest to
// make room, as before. Until its request line comes a connection waits
// among at most metricsFreshConnections, the oldest of which is closed to
// make room; one that sends none is closed after metricsIdleTimeout, as
// net/http would. The connections of the probes are so never refused or
// closed for want of room that scrapes took.
type metricsListener struct {
	jsonErrorListener               // the scrapes' places
	probes            *connCount    // the probes' connections open
	fresh             freshConns    // those whose first request line has not come
	ready             chan accepted // what Accept returns
	want              chan struct{} // Accept asks for the next accept after an error
	done              chan struct{} // closed by Close
	start, stop       sync.Once
}

// accepted is a connection given its place, or an accept's error.
type accepted struct {
	c   net.Conn
	err error
}

// metricsProbeConnections bounds the probes' connections open at once on
// the metrics listener: each is answered at once and closed, and a
// kubelet has two probes, one a second at most by default.
const metricsProbeConnections = 16

// probesFull is the message of a probe refused past metricsProbeConnections.
var probesFull = fmt.Sprintf("the metrics listener has %d probes' connections open, its most: try again", metricsProbeConnections)

// metricsFreshConnections bounds the connections of the metrics listener
// whose first request line has not come yet: the oldest goes to make room.
const metricsFreshConnections = 64

func newMetricsListener(l jsonErrorListener) *metricsListener {
	return &metricsListener{jsonErrorListener: l, probes: new(connCount),
		fresh: freshConns{conns: map[net.Conn]uint64{}},
		ready: make(chan accepted), want: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept returns the next connection given a place.
func (l *metricsListener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case l.want <- struct{}{}:
	default:
	}
	select {
	case a := <-l.ready:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts connections and has each one's request line waited
// for, until the listener is closed. After an error it waits for the next
// Accept, which net/http delays after a temporary one (out of files).
func (l *metricsListener) acceptLoop() {
	for {
		c, spare, err := l.acceptOne()
		if err != nil {
			select {
			case <-l.want:
			default:
			}
			select {
			case l.ready <- accepted{err: err}:
			case <-l.done:
				return
			}
			select {
			case <-l.want:
			case <-l.done:
				return
			}
			continue
		}
		if spare != nil {
			// On the spare descriptor, out of files: served one
			// request at once, as on the API's listener.
			l.give(l.admit(c, spare))
			continue
		}
		if !l.fresh.add(c) {
			_ = c.Close() // closed meanwhile
			continue
		}
		go l.place(c)
	}
}

// place waits for c's request line and gives c its place.
func (l *metricsListener) place(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(metricsIdleTimeout))
	line, err := peekRequestLine(c)
	_ = c.SetReadDeadline(time.Time{})
	if !l.fresh.remove(c) {
		return // closed to make room, or by Close
	}
	if err != nil {
		_ = c.Close() // its client went, or sent nothing in time
		return
	}
	if !probeLine(line) {
		l.give(l.admit(c, nil))
		return
	}
	if l.probes.Add(1) > metricsProbeConnections {
		l.probes.Add(-1)
		go refuseConn(c, probesFull, nil)
		return
	}
	jc := newJSONErrorConn(c, l.probes, nil)
	jc.probe = true
	l.give(jc)
}

// give hands jc, when not nil, to Accept, or closes it once the listener
// is closed.
func (l *metricsListener) give(jc *jsonErrorConn) {
	if jc == nil {
		return
	}
	select {
	case l.ready <- accepted{c: jc}:
	case <-l.done:
		_ = jc.Close()
	}
}

// Close closes the listener and the connections waiting for their
// request line.
func (l *metricsListener) Close() error {
	err := net.ErrClosed
	l.stop.Do(func() {
		close(l.done)
		err = l.jsonErrorListener.Close()
		l.fresh.closeAll()
	})
	return err
}

// freshConns are the connections whose first request line has not come,
// each with its accept's order.
type freshConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]uint64
	next   uint64
	closed bool
	// Used by victim alone: byAge is where it sorts them, peek where it
	// peeks at a socket.
	byAge []aged
	peek  [requestLineMax]byte
}

// add holds c, closing the oldest one when there are
// metricsFreshConnections already; false when the listener is closed.
func (f *freshConns) add(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if len(f.conns) >= metricsFreshConnections {
		victim := f.victim()
		delete(f.conns, victim)
		_ = victim.Close()
	}
	f.next++
	f.conns[c] = f.next
	return true
}

// victim is the connection add closes to make room: the oldest whose
// request line has come and asks for no probe; else the oldest that has
// sent no line yet, or a part of one; the oldest when every one holds a
// probe's line. Connections that send a whole request and read nothing,
// opened faster than their lines are looked at, had the probes'
// connections closed before anything looked at them: those whose request
// had come, unread, and those whose client had yet to send it. f.mu must
// be held.
func (f *freshConns) victim() net.Conn {
	byAge := f.byAge[:0]
	for c, n := range f.conns {
		byAge = append(byAge, aged{c, n})
	}
	slices.SortFunc(byAge, func(a, b aged) int { return cmp.Compare(a.n, b.n) })
	victim, silent := byAge[0].c, net.Conn(nil)
	for _, a := range byAge {
		line, whole := f.firstLine(a.c)
		if whole && !probeLine(line) {
			victim, silent = a.c, nil
			break
		}
		if !whole && silent == nil {
			silent = a.c
		}
	}
	if silent != nil {
		victim = silent
	}
	clear(byAge) // holds no connection
	f.byAge = byAge[:0]
	return victim
}

// aged is a connection of freshConns with its accept's order.
type aged struct {
	c net.Conn
	n uint64
}

// firstLine returns c's request line, and whether it has come whole,
// unread: peeked at without waiting. f.mu must be held.
func (f *freshConns) firstLine(c net.Conn) (line string, whole bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return "", false
	}
	line, _, whole = strings.Cut(string(unread(sc, f.peek[:])), "\n")
	return line, whole
}

// remove lets c go, and says whether it was held: not when it was closed
// to make room or by closeAll.
func (f *freshConns) remove(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.conns[c]
	delete(f.conns, c)
	return ok
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	clear(f.conns)
}

// requestLineMax is the most peekRequestLine looks at: a probe's request
// line is far shorter.
const requestLineMax = 256

// peekRequestLine waits for c's first line, until its read deadline, and
// returns it without taking it from the socket: net/http reads it again.
// A line longer than requestLineMax is returned cut; a connection whose
// socket cannot be reached returns "" at once.
func peekRequestLine(c net.Conn) (string, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return "", nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return "", err
	}
	var buf [requestLineMax]byte
	var line string
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			return false
		case err != nil:
			perr = err
		case n == 0:
			perr = io.EOF
		case bytes.IndexByte(buf[:n], '\n') >= 0:
			line, _, _ = strings.Cut(string(buf[:n]), "\n")
		case n == len(buf):
			line = string(buf[:n])
		default:
			return false // a part of the line: wait for more
		}
		return true
	})
	return line, cmp.Or(err, perr)
}

// probeLine reports whether line, a request line, asks for a probe:
// GET or HEAD /livez or /readyz, with a query string or not.
func probeLine(line string) bool {
	method, rest, ok := strings.Cut(strings.TrimSuffix(line, "\r"), " ")
	if !ok || (method != http.MethodGet && method != http.MethodHead) {
		return false
	}
	target, proto, ok := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") {
		return false
	}
	path, _, _ := strings.Cut(target, "?")
	return path == "/livez" || path == "/readyz"
}

// closeProbes makes the answer on a probe's connection its last
// (Connection: close), so that its place is given back at once.
func closeProbes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if jc, ok := r.Context().Value(connKey{}).(*jsonErrorConn); ok && jc.probe {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
