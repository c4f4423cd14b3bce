package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/conchsh/conch/sandboxd"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// serveWaits serves conch sandboxd's gRPC server, its calls waiting for a
// message of their client bounded by w, until the test ends, and returns a
// client connection to it.
func serveWaits(t *testing.T, w *requestWaits) *grpc.ClientConn {
	t.Helper()
	sbx, err := sandboxd.New(sandboxd.Options{Root: t.TempDir()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g, reg := newSandboxdGRPC(w)
	sbx.RegisterGRPC(reg)
	reflection.Register(reg)
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, sbx.Shutdown(ctx))
		require.NoError(t, cc.Close())
		g.Stop()
		require.NoError(t, <-served)
	})
	return cc
}

// stall opens a call of method on cc and sends no message, as a client
// that sends its headers and never its request.
func stall(t *testing.T, ctx context.Context, cc *grpc.ClientConn, method string) grpc.ClientStream {
	t.Helper()
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	require.NoError(t, err)
	return s
}

// A call that never sends its request, whether streaming (Start, a
// reflection stream) or unary (Execute), is ended by the daemon once it has
// waited its bound, with a status that says why, and the goroutines it held
// are gone. It was held as long as its connection, which a call in flight
// keeps from ever being idle. A reflection stream that sent its first
// request, idle past the bound, is not ended, and serves its next one: its
// next request was waited for as its first, and the stream that grpcurl and
// grpc_cli keep open was ended after 30 s idle. A Start stream that
// outlasts the bound, its request sent at once, is not ended.
func TestSandboxdGRPCEndsCallsWaitingForTheirClient(t *testing.T) {
	// Not parallel: it counts the goroutines the calls hold.
	w := newRequestWaits(100*time.Millisecond, 64)
	cc := serveWaits(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	// The connection, and the goroutines it holds, before any call.
	_, err := sandboxdpb.NewProcessServiceClient(cc).Execute(ctx, &sandboxdpb.ExecuteRequest{
		Config: &sandboxdpb.ProcessConfig{Command: []string{"true"}}})
	require.NoError(t, err)
	before := goleak.IgnoreCurrent()

	ended := func(s grpc.ClientStream) {
		t.Helper()
		var m rpb.ServerReflectionResponse
		err := s.RecvMsg(&m)
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "no message of the client came within 100ms")
	}
	for _, m := range []string{"/process.v1.ProcessService/Start", "/process.v1.ProcessService/Execute",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"} {
		ended(stall(t, ctx, cc, m))
	}
	// A reflection stream idle past the bound after its first request.
	r, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	list := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}
	require.NoError(t, r.Send(list))
	_, err = r.Recv()
	require.NoError(t, err)
	for w.waits() != 1 { // it waits for its next request, and counts
		require.NoError(t, ctx.Err(), "the stream does not wait for its next request")
		time.Sleep(time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // five times the bound
	require.NoError(t, r.Send(list))
	res, err := r.Recv()
	require.NoError(t, err)
	require.NotEmpty(t, res.GetListServicesResponse().GetService())
	require.NoError(t, r.CloseSend())
	_, err = r.Recv()
	require.Equal(t, io.EOF, err)

	// A Start stream that outlasts the bound.
	st, err := sandboxdpb.NewProcessServiceClient(cc).Start(ctx, &sandboxdpb.StartRequest{
		Config: &sandboxdpb.ProcessConfig{Command: []string{"sh", "-c", "sleep 1; echo done"}}})
	require.NoError(t, err)
	var out []byte
	var exit *sandboxdpb.ExitEvent
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(out, ev.GetStdout()...)
		if ev.GetExit() != nil {
			exit = ev.GetExit()
		}
	}
	require.Equal(t, "done\n", string(out))
	require.NotNil(t, exit)
	require.Zero(t, exit.ExitCode)

	require.Zero(t, w.waits())
	require.NoError(t, goleak.Find(before))
}

// Past the daemon's bound on the calls waiting for a message of their
// client, one more ends the one that has waited longest, so that calls
// opened without end on bounded connections hold a bounded memory, and a
// call that sends its request at once is still served.
func TestSandboxdGRPCBoundsCallsWaitingForTheirClient(t *testing.T) {
	t.Parallel()
	w := newRequestWaits(time.Hour, 2)
	cc := serveWaits(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	waiting := func(n int) {
		t.Helper()
		for w.waits() != n {
			require.NoError(t, ctx.Err(), "%d calls wait, not %d", w.waits(), n)
			time.Sleep(time.Millisecond)
		}
	}
	var calls []grpc.ClientStream
	for i := range 2 {
		calls = append(calls, stall(t, ctx, cc, "/process.v1.ProcessService/Start"))
		waiting(i + 1)
	}
	calls = append(calls, stall(t, ctx, cc, "/process.v1.ProcessService/Execute"))
	var m sandboxdpb.StartResponse
	err := calls[0].RecvMsg(&m)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "2 calls waited at once")
	waiting(2)

	res, err := sandboxdpb.NewProcessServiceClient(cc).Execute(ctx, &sandboxdpb.ExecuteRequest{
		Config: &sandboxdpb.ProcessConfig{Command: []string{"echo", "served"}}})
	require.NoError(t, err)
	require.Equal(t, "served\n", string(res.Stdout))
	for _, c := range calls[1:] {
		require.NoError(t, c.CloseSend())
	}
	cancel()
}

// begun reports how many waits w has begun.
func begun(w *requestWaits) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.begun
}

// Past the bound, the call ended is the one that has waited longest of the
// connection with the most calls waiting: a client that opens calls without
// end and sends no request on them ends its own, not the call of another
// connection whose request has come and waits for its handler to read it,
// which under load may take hundreds of milliseconds while the other client
// opens a thousand calls more. Ending the call that had waited longest of
// all, that call was ended RESOURCE_EXHAUSTED, as one of every seven calls
// of a grpc client was under such a flood.
func TestSandboxdGRPCBoundEndsCallsOfTheConnectionWithTheMostWaiting(t *testing.T) {
	t.Parallel()
	w := newRequestWaits(time.Hour, 4)
	flooder := serveWaits(t, w)
	other, err := grpc.NewClient(flooder.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	open := func(cc *grpc.ClientConn) grpc.ClientStream {
		t.Helper()
		n := begun(w)
		s := stall(t, ctx, cc, "/process.v1.ProcessService/Start")
		for begun(w) == n {
			require.NoError(t, ctx.Err(), "the call did not begin to wait")
			time.Sleep(time.Millisecond)
		}
		return s
	}
	var floods []grpc.ClientStream
	for range 4 {
		floods = append(floods, open(flooder))
	}
	// The call of the other connection, its headers come, and its request
	// not read yet, while the flooder opens four calls more.
	call := open(other)
	for range 4 {
		floods = append(floods, open(flooder))
	}
	// (io.EOF: the call was ended, which its status, read next, says.)
	if err := call.SendMsg(&sandboxdpb.StartRequest{
		Config: &sandboxdpb.ProcessConfig{Command: []string{"echo", "served"}}}); err != io.EOF {
		require.NoError(t, err)
	}
	require.NoError(t, call.CloseSend())
	var out []byte
	for {
		var ev sandboxdpb.StartResponse
		err := call.RecvMsg(&ev)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(out, ev.GetStdout()...)
	}
	require.Equal(t, "served\n", string(out))
	// The flooder's five oldest calls were ended, and its three newest wait.
	for _, s := range floods[:5] {
		var m sandboxdpb.StartResponse
		err := s.RecvMsg(&m)
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(),
			"4 calls waited at once for a message of their client, its most: this one, waiting longest of the connection with the most calls waiting (of those that sent nothing, if any), was ended")
	}
	require.Equal(t, 3, w.waits())
	// Calls that send their request at once are served too.
	for range 4 {
		res, err := sandboxdpb.NewProcessServiceClient(other).Execute(ctx, &sandboxdpb.ExecuteRequest{
			Config: &sandboxdpb.ProcessConfig{Command: []string{"echo", "served"}}})
		require.NoError(t, err)
		require.Equal(t, "served\n", string(res.Stdout))
	}
	for _, s := range floods[5:] {
		require.NoError(t, s.CloseSend())
	}
	cancel()
}

// statusRecorder is a call's server-side transport stream that records the
// status written to it.
type statusRecorder struct {
	grpc.ServerTransportStream
	written *status.Status
}

func (r *statusRecorder) WriteStatus(st *status.Status) error {
	r.written = st
	return nil
}

// A call ended before its handler ran is not served, though its request
// came (its context cancelled, a read of a message that has come may return
// it or the cancelling): its handler reads why the daemon ended it, and its
// client is sent that at once. It was served under a cancelled context, and
// its client, sent no status by the daemon, was told CANCELLED.
func TestSandboxdGRPCCallEndedBeforeItsHandlerRunsIsToldWhy(t *testing.T) {
	t.Parallel()
	w := newRequestWaits(time.Hour, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	first, err := w.tap(ctx, &tap.Info{})
	require.NoError(t, err)
	_, err = w.tap(ctx, &tap.Info{}) // ends the first, at the bound
	require.NoError(t, err)
	require.Error(t, first.Err())

	out := &statusRecorder{}
	served := false
	h := w.method(func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(nil); err != nil {
			return nil, err
		}
		served = true
		return nil, nil
	})
	// Its request came: the read returns it.
	_, err = h(nil, grpc.NewContextWithServerTransportStream(first, out), func(any) error { return nil }, nil)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.False(t, served)
	require.NotNil(t, out.written)
	require.Equal(t, codes.ResourceExhausted, out.written.Code())
	require.Contains(t, out.written.Message(), "1 calls waited at once")
	cancel()
}

// pacedConn is a client's connection whose writes, once paced, go out a
// piece at a time, one piece for each value sent on its channel: a client
// that sends a large request slowly.
type pacedConn struct {
	net.Conn
	paced atomic.Bool
	go_   chan struct{}
}

func (c *pacedConn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := len(b)
		if c.paced.Load() {
			<-c.go_
			k = min(k, 1024)
		}
		m, err := c.Conn.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}

// arriving reports how many of the calls that wait have had bytes of a
// message come on their connection since they began to wait.
func arriving(w *requestWaits) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for c := range w.conns {
		for e := c.waiting.Front(); e != nil; e = e.Next() {
			if e.Value.(*requestWait).in != c.read() {
				n++
			}
		}
	}
	return n
}

// Past the bound, a call whose request is arriving, a large one sent
// slowly, is not ended while a call that has sent nothing waits: ended in
// its stead, as the call that had waited longest of connections with one
// call waiting each, a client that opened calls on many connections and
// sent nothing on them ended the real call of another.
func TestSandboxdGRPCBoundSparesACallWhoseRequestArrives(t *testing.T) {
	t.Parallel()
	w := newRequestWaits(time.Hour, 2)
	flooder := serveWaits(t, w)
	slow := &pacedConn{go_: make(chan struct{})}
	uploader, err := grpc.NewClient(flooder.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			slow.Conn = c
			return slow, err
		}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, uploader.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	uploader.Connect()
	for uploader.GetState() != connectivity.Ready {
		require.True(t, uploader.WaitForStateChange(ctx, uploader.GetState()), "no connection")
	}

	// Its headers, then a piece of its request at a time, until the
	// daemon has seen some of it come since the call began to wait.
	slow.paced.Store(true)
	env := map[string]string{}
	for i := range 4 {
		env[fmt.Sprintf("BIG%d", i)] = strings.Repeat("x", 64<<10)
	}
	type result struct {
		res *sandboxdpb.ExecuteResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sandboxdpb.NewProcessServiceClient(uploader).Execute(ctx, &sandboxdpb.ExecuteRequest{
			Config: &sandboxdpb.ProcessConfig{Command: []string{"sh", "-c", "echo ${#BIG3}"}, EnvVars: env}})
		done <- result{res, err}
	}()
	for w.waits() != 1 || arriving(w) != 1 {
		select {
		case slow.go_ <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("the request did not begin to arrive")
		}
	}

	// Two calls of the flooder that send nothing: the second ends one.
	first := stall(t, ctx, flooder, "/process.v1.ProcessService/Start")
	for w.waits() != 2 {
		require.NoError(t, ctx.Err(), "the flooder's call does not wait")
		time.Sleep(time.Millisecond)
	}
	second := stall(t, ctx, flooder, "/process.v1.ProcessService/Start")
	var m sandboxdpb.StartResponse
	err = first.RecvMsg(&m)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)

	// The rest of the request, at once: it is served.
	slow.paced.Store(false)
	close(slow.go_)
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "65536\n", string(r.res.Stdout))
	require.NoError(t, second.CloseSend())
	cancel()
}
