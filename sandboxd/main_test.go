package sandboxd

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// TestMain runs the tests as the daemon runs: a subreaper with the reaper
// on, and a leak check of goroutines.
func TestMain(m *testing.M) { reapertest.Main(m) }

// daemon is a Server served on two loopback ports, as conch sandboxd serves
// it, with clients of both.
type daemon struct {
	srv  *Server
	root string
	rest string // http://127.0.0.1:PORT
	addr string // the gRPC port's, 127.0.0.1:PORT
	grpc sandboxdpb.ProcessServiceClient
	http *http.Client
}

// serve serves a Server with opts (Root defaults to a new temporary
// directory) until the test ends, then shuts it down as the daemon does.
func serve(t *testing.T, opts Options) *daemon {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	srv, err := New(opts)
	require.NoError(t, err)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	gDone, hDone := make(chan error, 1), make(chan error, 1)
	go func() { gDone <- g.Serve(gl) }()
	go func() { hDone <- hs.Serve(rl) }()
	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	d := &daemon{
		srv:  srv,
		root: srv.Root(),
		rest: "http://" + rl.Addr().String(),
		addr: gl.Addr().String(),
		grpc: sandboxdpb.NewProcessServiceClient(conn),
		http: &http.Client{Timeout: 30 * time.Second},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.NoError(t, conn.Close())
		g.GracefulStop()
		require.NoError(t, hs.Shutdown(ctx))
		require.NoError(t, <-gDone)
		require.ErrorIs(t, <-hDone, http.ErrServerClosed)
		d.http.CloseIdleConnections()
	})
	return d
}

// ctx is the test's context with a hang guard.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// do sends a request to the REST API and returns the answer's status and
// body.
func (d *daemon) do(t *testing.T, method, path string, body io.Reader, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, d.rest+path, body)
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h // net/http sends req.Host, never a Host in req.Header
	}
	resp, err := d.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}
