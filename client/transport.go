package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/rawnet"
)

// direct sends a Client's requests to a daemon reached over plain HTTP with
// no proxy between, one at a time on each of its connections, on the
// caller's goroutine: it writes the request and reads the answer there, with
// net/http's own writer and parser (Request.Write, http.ReadResponse).
//
// net/http's Transport hands each request to a goroutine that writes it and
// each answer from a goroutine that reads it, and when the process has been
// idle for a few milliseconds — as a client is while a command runs — each
// hand-off wakes a sleeping thread: a session's `true` over HTTP cost
// 1.0-1.5 ms of wall time after 6 ms of the process idle against 0.7-0.9 ms
// this way, and a `/healthz` 0.44-0.62 ms against 0.12-0.24 ms.
//
// It writes a request whole before it reads the answer, which suits a
// Client: every request body it sends is a byte slice. WebSocket upgrades
// (Attach) go through the http.Client.
type direct struct {
	dialer net.Dialer
	mu     sync.Mutex
	idle   []*directConn // the newest last
}

// directConn is a connection to the daemon, with what its reader read
// ahead and the room its requests are written into.
type directConn struct {
	c         net.Conn
	lr        *headLimit // between c and br: bounds an answer's headers
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// maxIdle bounds the connections kept for later requests, and idleFor how
// long one is kept (the daemon closes them after 2 minutes).
const (
	maxIdle = 64
	idleFor = 90 * time.Second
)

// newDirect returns the transport for base, or nil when requests to it
// need the http.Client: https, or a proxy from the environment.
func newDirect(base *url.URL) *direct {
	if base.Scheme != "http" {
		return nil
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: base}); err != nil || p != nil {
		return nil
	}
	// Dialled as http.DefaultTransport dials.
	return &direct{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// roundTrip sends req and returns the daemon's answer, whose body the
// caller must close. Each request is written whole before the answer is
// read: its body is in memory.
func (t *direct) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.try(req)
	if errors.Is(err, errStale) && replayable(req) {
		resp, err = t.try(req) // on a kept one found alive, or a new one
	}
	if err != nil {
		return nil, &url.Error{Op: urlOp(req.Method), URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// errStale says that a kept connection failed before any byte of its
// answer came: the daemon closed it as the request went, most likely (a
// kept connection is looked at before it is used, see alive).
var errStale = errors.New("connection closed by the daemon before its answer")

// noAnswerError says that the connection of a request written whole ended
// before any byte of the answer came: the daemon died or was killed, or
// closed it, and may have carried out the request all the same.
type noAnswerError struct {
	method string
	err    error
	kept   bool // on a kept connection: errStale
}

func (e *noAnswerError) Error() string {
	msg := "the connection closed before the daemon answered (" + e.err.Error() + ")"
	if !idempotent(e.method) {
		msg += "; the daemon may have carried the request out"
	}
	return msg
}

func (e *noAnswerError) Unwrap() error { return e.err }

func (e *noAnswerError) Is(target error) bool { return e.kept && target == errStale }

func (t *direct) try(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dc, kept, err := t.conn(ctx, req.URL.Host)
	if err != nil {
		return nil, err
	}
	// A deadline in the past ends a blocked read or write once ctx is
	// done; the connection is then not kept.
	stop := context.AfterFunc(ctx, func() { dc.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		dc.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	werr := req.Write(dc.bw)
	if werr == nil {
		werr = dc.bw.Flush()
	}
	// The daemon may answer before it has read the whole body (a 413 for
	// one over --body-limit) and close the connection: the write then
	// fails, and the answer, already sent, is there to read. A write that
	// failed with no answer there has none to wait for.
	if werr != nil && dc.br.Buffered() == 0 {
		if n, _ := peek(dc.c); n == 0 {
			return fail(werr)
		}
	}
	// The answer's headers, interim answers' too, are bounded as
	// net/http's Transport bounds them: a header with no end fails.
	dc.lr.left = maxHeaderBytes
	defer func() { dc.lr.left = -1 }()
	if _, err := dc.br.Peek(1); err != nil { // the answer's first byte
		switch {
		case werr == nil:
			err = &noAnswerError{method: req.Method, err: err, kept: kept}
		case kept:
			err = errors.Join(errStale, werr)
		default:
			err = werr
		}
		return fail(err)
	}
	resp, err := readFinal(dc.br, req)
	if err != nil {
		if dc.lr.left == 0 {
			err = errHeaders
		}
		return fail(err)
	}
	resp.Body = &directBody{t: t, dc: dc, r: resp.Body, ctx: ctx, stop: stop, keep: werr == nil && !resp.Close && !req.Close}
	return resp, nil
}

// maxInterim bounds the interim answers (1xx) read before a request's
// final one, so that a server sending nothing else cannot hold a request
// for ever. net/http's Transport bounds the bytes of their headers
// instead; a count is enough here: the daemon sends none, and a server
// that does sends one or two.
const maxInterim = 16

// readFinal reads the answer to req, passing over the interim answers
// (1xx) that may come before it, as net/http's Transport does: taken as the
// answer, one would leave the real answer to be read as the next request's.
// A 101 Switching Protocols is final.
func readFinal(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for range maxInterim {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		// An interim answer has no body: the next one starts where its
		// headers end.
	}
	return nil, fmt.Errorf("more than %d interim answers (1xx) before the final one", maxInterim)
}

// conn returns a kept connection to host, or a new one.
func (t *direct) conn(ctx context.Context, host string) (dc *directConn, kept bool, err error) {
	now := time.Now()
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		dc = t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(dc.idleSince) < idleFor && alive(dc.c) {
			return dc, true, nil
		}
		dc.c.Close()
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	c, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
	}
	// Raw reads and writes (see package rawnet): through net.Conn, the
	// first request after the process was idle, as a client is while a
	// command runs, woke the runtime's monitor thread as it wrote.
	c = rawnet.Of(c)
	lr := &headLimit{r: c, left: -1}
	return &directConn{c: c, lr: lr, br: bufio.NewReader(lr), bw: bufio.NewWriter(c)}, false, nil
}

// maxHeaderBytes bounds the headers of an answer, its interim answers'
// with them (and what of its body is read with them, a buffer's worth at
// most), as the Client's own http.Client bounds them
// (Transport.MaxResponseHeaderBytes).
const maxHeaderBytes = 1 << 20

// errHeaders says that an answer's headers passed maxHeaderBytes.
var errHeaders = fmt.Errorf("the answer's headers exceeded %d bytes: not the daemon's answer", maxHeaderBytes)

// headLimit reads from r at most left bytes while left is not negative:
// then it fails with errHeaders.
type headLimit struct {
	r    io.Reader
	left int64 // -1: no bound
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, errHeaders
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// alive reports whether a kept connection can carry a request: the daemon
// has not closed it (an idle one it closes, or all of them when it
// restarts), nor sent anything unasked.
func alive(c net.Conn) bool {
	_, err := peek(c)
	return err == syscall.EAGAIN // nothing to read: open, and quiet
}

// peek looks, without waiting, at what c holds to be read: n > 0 bytes,
// 0 at its end, or an error (EAGAIN: nothing yet). One call.
func peek(c net.Conn) (n int, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, syscall.EAGAIN
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var b [1]byte
	if cerr := rc.Read(func(fd uintptr) bool {
		n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		n = 0
	}
	return n, err
}

// put keeps dc for a later request, or closes it.
func (t *direct) put(dc *directConn) {
	dc.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle) < maxIdle {
		t.idle = append(t.idle, dc)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	dc.c.Close()
}

// closeIdle closes the connections kept for later requests.
func (t *direct) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, dc := range idle {
		dc.c.Close()
	}
}

// directBody is an answer's body: read to its end, it gives its
// connection back for the next request; closed before, it closes it.
type directBody struct {
	t    *direct
	dc   *directConn
	r    io.ReadCloser
	ctx  context.Context
	stop func() bool
	keep bool // the connection may serve another request
	done bool
	eof  bool
}

func (b *directBody) Read(p []byte) (int, error) {
	if b.done {
		if b.eof {
			return 0, io.EOF
		}
		return 0, errors.New("read on a closed answer")
	}
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.end(true)
	case err != nil:
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
		b.end(false)
	}
	return n, err
}

func (b *directBody) Close() error {
	b.end(false)
	return nil
}

// end lets go of the connection, kept when the body was read to its end,
// no deadline of a done context can be on it, and nothing came after the
// answer: bytes its reader read past the body's end (a body longer than
// its Content-Length, an answer no request asked for) would be read as the
// next request's answer. Bytes still in the socket, alive sees.
func (b *directBody) end(eof bool) {
	if b.done {
		return
	}
	b.done, b.eof = true, eof
	if b.stop() && eof && b.keep && b.dc.br.Buffered() == 0 {
		b.t.put(b.dc)
		return
	}
	b.dc.c.Close()
}

// replayable reports whether req may be sent again after a kept
// connection failed under it, as net/http's Transport would: its method has
// no effect a second time (GET, HEAD, OPTIONS, TRACE) and its body, if any,
// can be had again. A POST is not: the daemon may have run it.
func replayable(req *http.Request) bool {
	if !idempotent(req.Method) {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return false
		}
		body, err := req.GetBody()
		if err != nil {
			return false
		}
		req.Body = body
	}
	return true
}

// idempotent reports whether a request of method has no effect a second
// time.
func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// urlOp is the Op of the *url.Error an http.Client returns for method.
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}
