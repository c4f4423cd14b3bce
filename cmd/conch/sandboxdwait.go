package main

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// sandboxdRequestTimeout bounds how long a call to the gRPC port waits for
// its first message, its request, from its headers on (every
// ProcessService call has one request, sent with its headers by grpc
// clients). Past it the call ends DEADLINE_EXCEEDED. Without it a call that
// never sent its request was held, a goroutine and its buffers, as long as
// its connection, and the connection, never idle with a call in flight, for
// ever. A request is at most 4 MiB (sandboxdMaxRecvMsgSize): 30 s is some
// 140 KiB/s for the largest. The next messages of a call that streams them
// (the reflection service's, whose clients keep a stream open and send
// their next request when they need one) are waited for without it, bounded
// by sandboxdMaxWaitingCalls alone: bounded by it too, an idle reflection
// stream was ended after 30 s, DEADLINE_EXCEEDED.
const sandboxdRequestTimeout = 30 * time.Second

// sandboxdMaxWaitingCalls bounds the calls of the gRPC port, on all its
// connections together, that wait for a message of their client at once:
// one more ends one of them, RESOURCE_EXHAUSTED, the one that has waited
// longest of the connection that has the most calls waiting (see
// requestWaits.begin). The timeout alone left a client free to keep 256
// calls waiting on each of its connections, each opened again once ended:
// 10,240 such calls on 40 connections took 10,374 goroutines and 120 MB. A
// call that sends its request at once, as grpc clients do, waits for it
// only while it arrives and its handler comes to read it, which under load
// may take a while. A stream waiting for its next message counts too.
const sandboxdMaxWaitingCalls = 1024

// requestWaits bounds the calls of a gRPC server that wait for a message of
// their client: how long each waits, and how many wait at once. tap, the
// server's InTapHandle, begins each call's wait when its headers come;
// waitRegistrar wraps each service's handlers so that a wait ends when the
// message comes, and begins again when a call that streams its messages
// waits for its next one. Its connections are told apart by connTagger,
// the server's stats handler.
type requestWaits struct {
	timeout time.Duration
	most    int

	mu       sync.Mutex
	n        int                    // the calls that wait, on all connections
	conns    map[*waitConn]struct{} // the connections with a call that waits
	begun    uint64                 // the waits begun, which orders them
	untagged *waitConn              // the calls of a connection not tagged
}

// waitConn is the calls of one connection that wait for a message of their
// client.
type waitConn struct {
	waiting list.List // of *requestWait, the one waiting longest first
	// in counts the bytes of messages the connection has read, when its
	// connection is a dataConn (else nil).
	in *dataConn
}

// requestWait is one call's wait for a message of its client.
type requestWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   *waitConn
	elem   *list.Element  // in conn.waiting while it waits
	nth    uint64         // of the waits begun, when it began
	in     uint64         // the bytes of messages its connection had read when it began
	timer  *time.Timer    // nil for a wait not bounded in time
	ended  *status.Status // why the daemon ended the call, once it has
	// out writes the call's status, once its handler runs (see attach).
	out statusWriter
}

// statusWriter is what ends a call with a status of its server's choosing
// from outside its handler: grpc-go's server-side transport stream, which
// grpc.ServerTransportStreamFromContext returns, has it (where it has
// not, a call is ended by the cancelling of its context alone, its status
// CANCELLED, which TestSandboxdGRPCEndsCallsWaitingForTheirClient tells).
type statusWriter interface {
	WriteStatus(*status.Status) error
}

type requestWaitKey struct{}

type waitConnKey struct{}

func newRequestWaits(timeout time.Duration, most int) *requestWaits {
	return &requestWaits{timeout: timeout, most: most,
		conns: map[*waitConn]struct{}{}, untagged: &waitConn{}}
}

// connTagger is the stats handler of a gRPC server whose calls requestWaits
// bounds: it gives each connection the waitConn its calls wait in, which
// the context of each of its calls carries.
type connTagger struct{}

func (connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	c := &waitConn{}
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.AuthInfo.(dataAuth); ok {
			c.in = a.conn
		}
	}
	return context.WithValue(ctx, waitConnKey{}, c)
}

func (connTagger) HandleConn(context.Context, stats.ConnStats) {}

func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (connTagger) HandleRPC(context.Context, stats.RPCStats) {}

// tap begins the wait of a call whose headers have come. Its context, the
// one the call reads its messages under, is cancelled when the wait is
// ended, which ends the call: nothing else ends a read that no message
// comes to.
func (w *requestWaits) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	conn, ok := ctx.Value(waitConnKey{}).(*waitConn)
	if !ok {
		conn = w.untagged
	}
	ctx, cancel := context.WithCancel(ctx)
	rw := &requestWait{ctx: ctx, cancel: cancel, conn: conn}
	w.begin(rw, true)
	// The call's context ends with the call, whichever way it ends (also
	// when no handler ever runs, as for a method that does not exist).
	context.AfterFunc(ctx, func() { w.stop(rw) })
	return context.WithValue(ctx, requestWaitKey{}, rw), nil
}

// begin begins the wait of rw, bounded by w.timeout when timed (a call's
// first message). When w.most calls wait already, one is ended first (see
// victim).
func (w *requestWaits) begin(rw *requestWait, timed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw.elem != nil || rw.ended != nil || rw.ctx.Err() != nil {
		return
	}
	if w.n >= w.most && w.n > 0 {
		w.end(w.victim(), status.Newf(codes.ResourceExhausted,
			"conch sandboxd: %d calls waited at once for a message of their client, its most: this one, waiting longest of the connection with the most calls waiting (of those that sent nothing, if any), was ended", w.most))
	}
	c := rw.conn
	if c.waiting.Len() == 0 {
		w.conns[c] = struct{}{}
	}
	rw.elem = c.waiting.PushBack(rw)
	rw.nth = w.begun
	rw.in = c.read()
	w.begun++
	w.n++
	rw.timer = nil
	if !timed {
		return
	}
	nth := rw.nth
	rw.timer = time.AfterFunc(w.timeout, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if rw.elem != nil && rw.nth == nth {
			w.end(rw, status.Newf(codes.DeadlineExceeded,
				"conch sandboxd: no message of the client came within %s", w.timeout))
		}
	})
}

// victim returns the wait begin ends to make room: of the calls whose
// connection has read no byte of a message since they began to wait (the
// calls that have sent nothing, if any wait), the one that has waited
// longest of the connection with the most of them (of those with as many,
// the one that has waited longest). A client that opens calls and sends no
// request on them thus ends its own calls, not those of a connection with
// a call or two waiting for their handlers to read the requests they sent,
// which under load may take hundreds of milliseconds while it opens a
// thousand more, nor a call whose request is arriving, a large one sent
// slowly, while any call waits that has sent nothing: such calls are
// ended only when no connection has more calls waiting than theirs, or
// when every call that waits has had bytes of a message come since. What
// a connection reads is told apart by connection, not by call: a call that
// sent nothing on a connection that has read another's message since it
// began counts as one whose message arrives. w.mu is held, and a call
// waits.
func (w *requestWaits) victim() *requestWait {
	var mostFirst *list.Element
	mostN := 0
	pick := func(silent bool) {
		for c := range w.conns {
			// The calls of c that have sent nothing are the last ones
			// to begin to wait: once bytes of a message came, every
			// call that waited before has seen them come.
			first, n := c.waiting.Front(), c.waiting.Len()
			if silent {
				read := c.read()
				first, n = nil, 0
				for e := c.waiting.Back(); e != nil && e.Value.(*requestWait).in == read; e = e.Prev() {
					first, n = e, n+1
				}
			}
			if n == 0 {
				continue
			}
			if mostFirst == nil || n > mostN ||
				n == mostN && first.Value.(*requestWait).nth < mostFirst.Value.(*requestWait).nth {
				mostFirst, mostN = first, n
			}
		}
	}
	if pick(true); mostFirst == nil {
		pick(false)
	}
	return mostFirst.Value.(*requestWait)
}

// read returns the bytes of messages c has read, or 0 when they are not
// counted.
func (c *waitConn) read() uint64 {
	if c.in == nil {
		return 0
	}
	return c.in.data.Load()
}

// unwait takes rw, which waits, out of the calls that wait. w.mu is held.
func (w *requestWaits) unwait(rw *requestWait) {
	c := rw.conn
	c.waiting.Remove(rw.elem)
	if c.waiting.Len() == 0 {
		delete(w.conns, c)
	}
	rw.elem = nil
	w.n--
	if rw.timer != nil {
		rw.timer.Stop()
	}
}

// end ends the call of rw, which waits, for why: its status is written
// first, and then its context cancelled, which ends its read (whose own
// status, CANCELLED, comes too late to be sent). A call whose handler has
// not run yet has its status written when it does (see attach). w.mu is
// held.
func (w *requestWaits) end(rw *requestWait, why *status.Status) {
	w.unwait(rw)
	rw.ended = why
	if rw.out != nil {
		_ = rw.out.WriteStatus(why)
	}
	rw.cancel()
}

// attach takes the call of ctx, whose handler runs, as one whose status end
// can write, and writes it at once if the call was ended before its handler
// ran: its context cancelled, the call is over, whether or not its message
// came, and its client is told why rather than CANCELLED.
func (w *requestWaits) attach(ctx context.Context) {
	rw, ok := ctx.Value(requestWaitKey{}).(*requestWait)
	if !ok {
		return
	}
	out, _ := grpc.ServerTransportStreamFromContext(ctx).(statusWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	rw.out = out
	if rw.ended != nil && out != nil {
		_ = out.WriteStatus(rw.ended)
	}
}

// stop ends the wait of rw, if it waits: its message came, or its call ended.
func (w *requestWaits) stop(rw *requestWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw.elem != nil {
		w.unwait(rw)
	}
}

// received ends the wait of the call of ctx, its message read with err: when
// the daemon ended the call, what it returns is why (the status its client
// was sent), instead of "context canceled", and also when the message was
// read, as it may be from a call ended before its handler read it (the
// message there, and its context cancelled, the read does either): the
// call, its context cancelled, is not served.
func (w *requestWaits) received(ctx context.Context, err error) error {
	rw, ok := ctx.Value(requestWaitKey{}).(*requestWait)
	if !ok {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw.elem != nil {
		w.unwait(rw)
	}
	if rw.ended != nil {
		return rw.ended.Err()
	}
	return err
}

// waits reports how many calls wait for a message of their client.
func (w *requestWaits) waits() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// waitRegistrar registers services with a gRPC server, their handlers
// wrapped to end the waits of requestWaits: it is what the services of
// conch sandboxd register with, reflection's included.
type waitRegistrar struct {
	*grpc.Server
	w *requestWaits
}

func (r waitRegistrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	d := *sd
	d.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		m.Handler = r.w.method(m.Handler)
		d.Methods[i] = m
	}
	d.Streams = make([]grpc.StreamDesc, len(sd.Streams))
	for i, s := range sd.Streams {
		h := s.Handler
		s.Handler = func(srv any, ss grpc.ServerStream) error {
			r.w.attach(ss.Context())
			return h(srv, &waitStream{ServerStream: ss, w: r.w})
		}
		d.Streams[i] = s
	}
	r.Server.RegisterService(&d, impl)
}

// method wraps the handler of a unary method so that its read ends its
// call's wait.
func (w *requestWaits) method(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		w.attach(ctx)
		return h(srv, ctx, func(v any) error { return w.received(ctx, dec(v)) }, in)
	}
}

// waitStream is a call's stream whose reads end its waits: the first, begun
// by requestWaits.tap, and each next one, begun when it reads again, not
// bounded in time.
type waitStream struct {
	grpc.ServerStream
	w    *requestWaits
	read bool
}

func (s *waitStream) RecvMsg(m any) error {
	ctx := s.Context()
	if s.read {
		if rw, ok := ctx.Value(requestWaitKey{}).(*requestWait); ok {
			s.w.begin(rw, false)
		}
	}
	s.read = true
	return s.w.received(ctx, s.ServerStream.RecvMsg(m))
}

// dataCreds are the transport credentials of a gRPC server whose calls
// requestWaits bounds: none (the connection is used as it is, as without
// credentials), but each connection is a dataConn, which connTagger finds
// in the call's peer, so that requestWaits.victim sees which connections
// are reading messages. grpc's stats handlers tell when a message has come
// whole, not when bytes of one come.
type dataCreds struct{}

// dataAuth is the AuthInfo of a connection of dataCreds.
type dataAuth struct {
	credentials.CommonAuthInfo
	conn *dataConn
}

func (dataAuth) AuthType() string { return "insecure" }

func (dataCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	dc := &dataConn{Conn: c, skip: len(http2.ClientPreface)}
	return dc, dataAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, conn: dc}, nil
}

func (dataCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("conch sandboxd: dataCreds are a server's")
}

func (dataCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (dataCreds) Clone() credentials.TransportCredentials { return dataCreds{} }

func (dataCreds) OverrideServerName(string) error { return nil }

// dataConn is a server's HTTP/2 connection that counts the bytes of DATA
// frames, those of the messages of its calls, as it reads them. Its reads
// are its server's, one at a time.
type dataConn struct {
	net.Conn
	data atomic.Uint64 // the bytes of DATA frames read
	skip int           // bytes left of the client preface, or of a frame not DATA
	left int           // bytes left of a DATA frame
	head [9]byte       // a frame header being read
	got  int           // of head
}

func (c *dataConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	return n, err
}

// scan reads the frames of b, the next bytes read.
func (c *dataConn) scan(b []byte) {
	var data uint64
	for len(b) > 0 {
		switch {
		case c.skip > 0:
			k := min(c.skip, len(b))
			c.skip -= k
			b = b[k:]
		case c.left > 0:
			k := min(c.left, len(b))
			c.left -= k
			data += uint64(k)
			b = b[k:]
		default:
			k := copy(c.head[c.got:], b)
			c.got += k
			b = b[k:]
			if c.got < len(c.head) {
				break
			}
			c.got = 0
			n := int(c.head[0])<<16 | int(c.head[1])<<8 | int(c.head[2])
			if http2.FrameType(c.head[3]) == http2.FrameData {
				c.left = n
			} else {
				c.skip = n
			}
		}
	}
	if data > 0 {
		c.data.Add(data)
	}
}
