package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/rawnet"
	"github.com/conchsh/conch/process"
)

// net/http answers a request it cannot read (headers over MaxHeaderBytes, a
// malformed header line, an unsupported protocol) before any handler runs,
// in plain text written straight to the connection. The daemon answers
// every refusal in the API's error shape, so its connections turn those
// answers into JSON on their way out.

// plainErrorHeaders are the headers net/http writes after the status line
// of such an answer, and only there: a handler's answer carries a Date
// header, and Connection sorts before Content-Type.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// headersEnd ends a request's headers.
var headersEnd = []byte("\r\n\r\n")

// jsonErrorListener hands out jsonErrorConns.
//
// It also bounds the connections open at once, max (zero: none): one past
// it is answered 429 and closed at once, so that idle connections (20,000
// of them after a GET /livez each, no token needed) cannot take every
// descriptor the daemon has, which left no client able to connect.
//
// With idle set, one past the bound closes instead the connection idle
// longest (see idleConns.closeIdlest), and is refused only when none can
// go. Both the API's listener and the metrics listener have it set: on
// the metrics listener sixteen connections that sent nothing held every
// place, and the kubelet's probes were refused until it restarted the
// daemon; on the API's, a client without the token held the bound's worth
// of idle ones, and every other client was refused until they timed out.
type jsonErrorListener struct {
	net.Listener
	max     int
	full    string        // the message of a refusal: which bound it is, what to do
	open    *connCount    // the connections accepted and not closed
	headers *headerBudget // the bytes of headers being read (see headerBudget; nil: not counted)
	idle    *idleConns    // the connections open, to close the idlest of when full (nil: refuse)
	refuse  *refuseTimes  // bounds the reading of a refused connection (nil: refuseFor and refuseIdle)
	// spare is let go of when an accept finds no descriptor free, for the
	// connection to take its place (nil: none). That connection is served
	// one request and closed, which takes the spare back.
	spare *spareFD
}

func (l jsonErrorListener) Accept() (net.Conn, error) {
	for {
		c, spare, err := l.acceptOne()
		if err != nil {
			return nil, err
		}
		if jc := l.admit(c, spare); jc != nil {
			return jc, nil
		}
	}
}

// acceptOne accepts the next connection, on the spare when no descriptor
// is free; spare is set then (see jsonErrorConn.onSpare).
func (l jsonErrorListener) acceptOne() (c net.Conn, spare *spareFD, err error) {
	for {
		c, err = l.Listener.Accept()
		if err == nil {
			l.spare.take() // held again once a descriptor is free
			return c, nil, nil
		}
		if !process.OutOfFiles(err) || l.spare == nil || !l.spare.held() {
			return nil, nil, err
		}
		// An accept fails so at once, whether a connection waits or
		// not: the spare is let go of once one does. Let go of at
		// once, it stayed so while the accept waited for one, and no
		// close of a connection on it took it back.
		waiting, werr := connWaiting(l.Listener, spareWaitPoll)
		if werr != nil {
			return nil, nil, err
		}
		if !waiting {
			continue // a descriptor may be free by now
		}
		if !l.spare.release() {
			return nil, nil, err
		}
		// The accept waits for a connection when none is waiting (the
		// one that was went away); the descriptor let go of may
		// meanwhile go to other work, which leaves the accept failing
		// as before.
		if c, err = l.Listener.Accept(); err != nil {
			l.spare.take()
			return nil, nil, err
		}
		return c, l.spare, nil
	}
}

// spareWaitPoll is how long a listener out of descriptors waits at a time
// for a connection before it tries an accept again, and how long its close
// may wait for it.
const spareWaitPoll = 50 * time.Millisecond

// admit gives c a place under the bound, closing the idlest connection
// to make room when full, and returns it wrapped; or, when none can go,
// answers it 429 and closes it, and returns nil.
func (l jsonErrorListener) admit(c net.Conn, spare *spareFD) *jsonErrorConn {
	if l.max <= 0 {
		jc := newJSONErrorConn(c, nil, l.headers)
		jc.onSpare(spare)
		return jc
	}
	for {
		if l.open.Add(1) <= int64(l.max) {
			jc := newJSONErrorConn(c, l.open, l.headers)
			jc.onSpare(spare)
			l.idle.add(jc)
			return jc
		}
		l.open.Add(-1)
		if !l.idle.closeIdlest() {
			break
		}
	}
	go func() {
		refuseConn(c, l.full, l.refuse)
		spare.take()
	}()
	return nil
}

// Close closes the listener, and lets its spare go.
func (l jsonErrorListener) Close() error {
	l.spare.close()
	return l.Listener.Close()
}

// idleConns are the connections a listener holds open, each with when it
// went idle, so that the one idle longest can be closed to make room.
type idleConns struct {
	mu    sync.Mutex
	conns []*jsonErrorConn // each at its slot
	epoch time.Time        // the moments kept (see now) are the time since it
	// stuckWrites makes a connection whose write has waited over
	// stuckWrite closable, as an idle one is (see closeIdlest).
	stuckWrites bool
	// Used by closeIdlest alone, under closing, which the accepts of
	// every listener that shares the connections call: peek is where it
	// peeks at what a socket holds, candidates what it weighs.
	closing sync.Mutex
	peek    []byte
	// idled, when set, is closed when a connection goes idle, for a
	// listener that waits for one to close (see wentIdle).
	idled      atomic.Pointer[chan struct{}]
	candidates []candidate
}

// candidate is a connection closeIdlest may close: idle since since, or
// writing since then.
type candidate struct {
	c       *jsonErrorConn
	since   int64
	writing bool
	refused bool // reading the rest of a refused request's body (see jsonErrorConn.readingRest)
}

// newIdleConns returns the connections of a listener that closes the
// idlest to make room; stuckWrites, see idleConns.
func newIdleConns(stuckWrites bool) *idleConns {
	return &idleConns{epoch: time.Now(), stuckWrites: stuckWrites, peek: make([]byte, 4<<10)}
}

// now returns the present moment as connections keep when they went idle
// or began a write: the time since epoch, never 0, which means never.
func (ic *idleConns) now() int64 {
	return int64(time.Since(ic.epoch)) + 1
}

// stuckWrite is how long a handler's write may wait on a client that does
// not read before its connection can be closed to make room, as an idle
// one can, where stuckWrites is set (the metrics listener): sixteen
// clients that asked for the metrics over and over and read nothing held
// every place, never idle, and kept the probes out. An answer to a client
// that reads, the metrics' few kilobytes, takes nothing near it. The API's
// listener has it unset: a log stream or an attachment whose client reads
// slowly is not idle.
const stuckWrite = time.Second

// idledChan returns a channel closed once a connection goes idle after
// the call (see wentIdle).
func (ic *idleConns) idledChan() <-chan struct{} {
	ch := make(chan struct{})
	if !ic.idled.CompareAndSwap(nil, &ch) {
		if p := ic.idled.Load(); p != nil {
			return *p
		}
		return ic.idledChan() // closed meanwhile
	}
	return ch
}

// wentIdle wakes those waiting for a connection to go idle (idledChan).
func (ic *idleConns) wentIdle() {
	if p := ic.idled.Swap(nil); p != nil {
		close(*p)
	}
}

// add holds c, idle from now: one that has not sent its request yet
// takes a place as an idle one does.
func (ic *idleConns) add(c *jsonErrorConn) {
	if ic == nil {
		return
	}
	c.idle = ic
	c.timeWrites = ic.stuckWrites
	c.socket, _ = c.Conn.(syscall.Conn) // nil: what it holds unread is not known
	if sr, ok := c.Conn.(seenReader); ok {
		c.seenReader, c.seen = sr, c.requestSeen
	}
	c.idleSince.Store(ic.now())
	ic.mu.Lock()
	c.slot = len(ic.conns)
	ic.conns = append(ic.conns, c)
	ic.mu.Unlock()
}

// remove lets c go, once it is closed.
func (ic *idleConns) remove(c *jsonErrorConn) {
	ic.mu.Lock()
	last := len(ic.conns) - 1
	moved := ic.conns[last]
	ic.conns[c.slot], moved.slot = moved, c.slot
	ic.conns[last] = nil
	ic.conns = ic.conns[:last]
	ic.mu.Unlock()
}

// closeIdlest closes the connection idle longest, and says whether there
// was one: none is when every connection is serving a request, or has one
// waiting to be served. Once it returns, the connection no longer counts
// among those open.
//
// A connection counts idle from its accept until its request's headers are
// parsed, and from each answer on until the next one's are. But one whose
// request has come whole is not closed, whether it waits unread in its
// socket or has been read and not yet parsed: a flood of connections that
// sent nothing, thousands a second, had the probes' connections closed
// between their accept and net/http's parse of their headers. A part of a
// request spares nothing, so that connections that send one cannot hold
// the places for the headers' timeout. One reading the rest of a refused
// request's body goes after every one that holds no request (see before).
// With stuckWrites, one whose handler has waited over stuckWrite to write,
// its client not reading, counts idle from when that write began, whatever
// it has sent since: the server reads none of it until the client reads.
//
// Its cost grows with the connections open, not with how they are sorted:
// the idlest is picked from them, and the next idlest only when it is
// spared, as few are.
func (ic *idleConns) closeIdlest() bool {
	if ic == nil {
		return false
	}
	ic.closing.Lock()
	defer ic.closing.Unlock()
	now := ic.now()
	candidates := ic.candidates[:0]
	ic.mu.Lock()
	for _, c := range ic.conns {
		if w := c.writingSince.Load(); w != 0 && now-w > int64(stuckWrite) {
			candidates = append(candidates, candidate{c, w, true, false})
		} else if since := c.idleSince.Load(); since != 0 {
			candidates = append(candidates, candidate{c, since, false, c.refused.Load()})
		}
	}
	ic.mu.Unlock()
	defer func() {
		clear(candidates) // holds no connection once closed
		ic.candidates = candidates[:0]
	}()
	// A socket is asked what it holds only here, at the bound, and of
	// as many connections as the bound at most.
	for rest := candidates; len(rest) > 0; {
		idlest := 0
		for i := range rest {
			if before(rest[i], rest[idlest]) {
				idlest = i
			}
		}
		cand := rest[idlest]
		rest[idlest] = rest[len(rest)-1]
		rest = rest[:len(rest)-1]
		if !cand.writing && cand.c.holdsRequest(cand.since, ic.peek) {
			continue
		}
		_ = cand.c.Close()
		return true
	}
	return false
}

// holdsRequest reports whether c, idle since since, has a request come
// whole: read from its socket since then, or waiting there, unread. A read
// that takes one from the socket notes it under seenMu, so that it is seen
// one way or the other.
func (c *jsonErrorConn) holdsRequest(since int64, peek []byte) bool {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	return c.headersCame.Load() > since || c.socket != nil && requestWaiting(c.socket, peek)
}

// before reports whether a is closed to make room before b: the one idle
// longer, but a connection reading the rest of a refused request's body
// after any that holds no request at all, as that one is closed, mid-body,
// with its client still to read the refusal (one that sends its whole body
// first, as Python's http.client does, sees a reset instead).
func before(a, b candidate) bool {
	if a.refused != b.refused {
		return b.refused
	}
	return a.since < b.since
}

// refuseConn answers c 429, saying msg, and closes it, within refuseFor (a
// second; bounds, when set, say otherwise, and refuseIdle with it). The
// answer waits for the request to begin coming, up to refuseIdle: written
// before, it answers nothing asked yet, which Go's transport, when its
// request is not written yet, takes for a broken connection, failing the
// request with that rather than with the 429. What the client sends is
// read and discarded, so that one that sends its whole request before it
// reads the answer gets the answer rather than a reset; a client that
// sends nothing for refuseIdle is not waited for, and past
// refuseLingering refusals at once none is (the answer goes at once), so
// that refused connections cannot take the descriptors the bound keeps.
func refuseConn(c net.Conn, msg string, bounds *refuseTimes) {
	defer c.Close()
	total, idle := bounds.get()
	end := time.Now().Add(total)
	_ = c.SetDeadline(end)
	if refusing.Add(1) > refuseLingering {
		refusing.Add(-1)
		_ = tooMany(c, msg)
		return
	}
	defer refusing.Add(-1)
	buf := restBuffers.Get().(*[32 << 10]byte)
	defer restBuffers.Put(buf)
	_ = c.SetReadDeadline(time.Now().Add(idle))
	if _, err := c.Read(buf[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			_ = tooMany(c, msg) // a client that waits for it before it asks
		}
		return
	}
	if err := tooMany(c, msg); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // the answer is whole: a client that reads to the end sees it end
	}
	for {
		next := time.Now().Add(idle)
		if next.After(end) {
			next = end
		}
		_ = c.SetReadDeadline(next)
		if _, err := c.Read(buf[:]); err != nil {
			return // the client is done, quiet, or out of time
		}
	}
}

// tooMany writes to a connection no handler serves the API's 429
// resource_exhausted with msg, to be closed after it.
func tooMany(w io.Writer, msg string) error {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": string(api.CodeResourceExhausted), "message": msg}})
	_, err := fmt.Fprintf(w, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nX-Request-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		rand.Text(), len(body), body)
	return err
}

// refusing counts the refused connections being read on (see refuseConn).
var refusing atomic.Int64

const (
	refuseLingering = 64
	refuseFor       = time.Second
	refuseIdle      = 300 * time.Millisecond
)

// refuseTimes bounds the reading of a refused connection, in nanoseconds:
// total, all of it, and idle, each wait for the client; tests lengthen
// them while the server serves. Nil, or zero, is refuseFor and refuseIdle.
type refuseTimes struct{ total, idle atomic.Int64 }

func (r *refuseTimes) get() (total, idle time.Duration) {
	total, idle = refuseFor, refuseIdle
	if r != nil {
		if v := r.total.Load(); v > 0 {
			total = time.Duration(v)
		}
		if v := r.idle.Load(); v > 0 {
			idle = time.Duration(v)
		}
	}
	return total, idle
}

// jsonErrorConn is a connection whose plain-text protocol errors are
// rewritten as JSON.
type jsonErrorConn struct {
	net.Conn
	open    *connCount  // counts it until it is closed, when bounded
	closed  sync.Once   // gives its place back, once; a second Close waits for the first to have
	headers headerPhase // its part in the header budget
	// idle, when set, holds it; idleSince is when it went idle, and
	// writingSince when the write under way began (see idleConns.now),
	// 0 while it serves a request, or writes nothing.
	idle         *idleConns
	idleSince    atomic.Int64
	writingSince atomic.Int64
	refused      atomic.Bool  // idle while it reads the rest of a refused request's body
	timeWrites   bool         // writingSince is kept (see idleConns.stuckWrites)
	slot         int          // its index in idle's conns, under idle's mu
	headersCame  atomic.Int64 // when a read brought the end of a request's headers while idle
	socket       syscall.Conn // its socket, for a request it holds unread (nil: not known)
	// seenMu is held by each read's system call and its look for a
	// request (requestSeen), when seenReader is set, and by closeIdlest
	// while it looks whether the connection holds one: a request a read
	// has taken from the socket and that look had yet to note was neither
	// in the socket nor noted, and its connection was closed.
	seenMu     sync.Mutex
	seenReader seenReader   // c.Conn's, when it has one
	seen       func([]byte) // c.requestSeen, made once
	// spare, when set, is the listener's spare, whose place the
	// connection took: it answers one request, and its close takes the
	// spare back. spareAsked is set once its request's headers came, and
	// spareWait closes it when they have not within spareHeaders.
	spare      *spareFD
	spareAsked atomic.Bool
	spareWait  *time.Timer
	// probe is set on the metrics listener's connection of a probe,
	// answered once (see metricsListener).
	probe bool
}

// spareHeaders is how long a connection on a listener's spare descriptor
// has to send its request's headers, rather than net/http's 10 s: one
// that sent nothing held the spare, and every other client waited.
const spareHeaders = time.Second

// onSpare makes c a connection on spare, when set (see spareFD).
func (c *jsonErrorConn) onSpare(spare *spareFD) {
	if spare == nil {
		return
	}
	c.spare = spare
	c.spareWait = time.AfterFunc(spareHeaders, func() {
		if c.spareAsked.Load() {
			return
		}
		tooMany(c.Conn, "the daemon is at its limit of open files (RLIMIT_NOFILE), and this connection sent no request within "+
			spareHeaders.String()+": end some sessions or processes, and try again")
		_ = c.Close()
	})
}

// newJSONErrorConn wraps c, counted in open (nil: not), its headers in
// budget (nil: not).
func newJSONErrorConn(c net.Conn, open *connCount, budget *headerBudget) *jsonErrorConn {
	jc := &jsonErrorConn{Conn: rawnet.Of(c), open: open}
	jc.headers.budget = budget
	jc.headers.begin()
	return jc
}

// readingRest makes c, whose answer went while the rest of its request's
// body is read and dropped, as closable as an idle connection, from now.
func (c *jsonErrorConn) readingRest() {
	if c.idle != nil {
		c.refused.Store(true)
		c.idleSince.Store(c.idle.now())
		c.idle.wentIdle()
	}
}

func (c *jsonErrorConn) Read(p []byte) (int, error) {
	var n int
	var err error
	if c.seenReader != nil {
		n, err = c.seenReader.ReadSeen(p, &c.seenMu, c.seen)
	} else {
		n, err = c.Conn.Read(p)
		if n > 0 {
			c.requestSeen(p[:n])
		}
	}
	if n > 0 && c.spare != nil && !c.spareAsked.Load() && bytes.Contains(p[:n], headersEnd) {
		c.spareAsked.Store(true)
	}
	if n > 0 && !c.headers.count(n) {
		// Answered here, as net/http answers headers over its limit
		// (431); the read's error, of Op "read", then ends the
		// connection quietly.
		tooMany(c.Conn, fmt.Sprintf("the request headers being read at once are over %d bytes: send this request again once others are answered",
			c.headers.budget.limit))
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errHeadersOverBudget}
	}
	return n, err
}

// requestSeen notes when a read brought the end of a request's headers,
// while the connection is idle (see idleConns.closeIdlest).
func (c *jsonErrorConn) requestSeen(b []byte) {
	// Looked for only while the connection is idle: the reads of a
	// request being served (its body) cost nothing more.
	if c.idle != nil && c.idleSince.Load() != 0 && bytes.Contains(b, headersEnd) {
		if hook := requestSeenHook.Load(); hook != nil {
			(*hook)(c)
		}
		// A request is here whole, to be served at once (an end split
		// between two reads is missed: the request goes unspared).
		c.headersCame.Store(c.idle.now())
	}
}

// requestSeenHook, when set, is called as a read has taken a request
// from an idle connection's socket, before that is noted (for tests).
var requestSeenHook atomic.Pointer[func(*jsonErrorConn)]

// seenReader reads a connection, calling a function with what each read
// brought under a lock that its wait for something to read does not hold
// (see rawcall.Reader.ReadSeen).
type seenReader interface {
	ReadSeen(p []byte, mu sync.Locker, seen func([]byte)) (int, error)
}

func (c *jsonErrorConn) Close() error {
	c.closed.Do(func() {
		if c.idle != nil {
			c.idle.remove(c)
		}
		if c.open != nil {
			c.open.Add(-1)
		}
	})
	c.headers.end()
	err := c.Conn.Close()
	if c.spare != nil {
		c.spareWait.Stop()
		c.spare.take()
	}
	return err
}

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if c.timeWrites {
		c.writingSince.Store(c.idle.now())
		defer c.writingSince.Store(0)
	}
	if b, ok := jsonProtocolError(p); ok {
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// NetConn returns the connection whose errors c rewrites.
func (c *jsonErrorConn) NetConn() net.Conn { return c.Conn }

// CloseWrite lets net/http half-close the connection after a 431, so that
// the client reads the answer before the connection is reset.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// jsonProtocolError returns the JSON form of p when p is a whole plain-text
// answer of net/http's own: "HTTP/1.1 NNN Status" and plainErrorHeaders,
// then the text.
func jsonProtocolError(p []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(proto)) || len(p) < len(proto)+3 {
		return nil, false
	}
	line, rest, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok {
		return nil, false
	}
	// rest follows the status line's "\r\n", which plainErrorHeaders
	// begins with.
	text, ok := bytes.CutPrefix(rest, []byte(plainErrorHeaders[len("\r\n"):]))
	if !ok {
		return nil, false
	}
	status, err := strconv.Atoi(string(line[len(proto) : len(proto)+3]))
	if err != nil {
		return nil, false
	}
	// net/http says what is wrong, when it does, after the status, in the
	// status line and the text alike: "400 Bad Request: missing required
	// Host header". The message says it without the status.
	code := api.CodeInvalidArgument
	_, msg, _ := strings.Cut(strings.TrimSpace(string(text)), ": ")
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		code = api.CodePayloadTooLarge
		msg = fmt.Sprintf("request line and headers over %d bytes", http.DefaultMaxHeaderBytes)
	case status >= 500:
		code = api.CodeUnsupportedOperation
	}
	if msg == "" {
		msg = "the request is not one HTTP/1.1 can read: a malformed request line, header line or Content-Length"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": string(code), "message": msg}})
	body = append(body, '\n')
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"+
		"X-Request-Id: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", status, http.StatusText(status), rand.Text(), len(body))
	b.Write(body)
	return b.Bytes(), true
}
