package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/daemontest"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/server"
)

// TestMain runs the tests as the daemon runs: a subreaper that reaps the
// orphans of the processes it starts. Then it looks for leaked goroutines.
func TestMain(m *testing.M) { reapertest.Main(m) }

const testToken = "s3cret-test-token"

// daemon is a real server on a loopback port and a client for it.
type daemon struct {
	srv  *server.Server
	url  string // http://127.0.0.1:PORT
	addr string // 127.0.0.1:PORT
	c    *client.Client
}

// start serves a new Server with opts (Token filled in) until the test ends.
func start(t testing.TB, opts server.Options) *daemon {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	d := daemontest.Start(t, opts)
	return &daemon{srv: d.Server, addr: d.Addr, url: d.URL, c: d.Client}
}

// serveOwn serves a daemon, as start does, for a test that shuts it down
// itself; served has what Serve returned once it has.
func serveOwn(t testing.TB) (d *daemon, served <-chan error) {
	t.Helper()
	dt, served := daemontest.Serve(t, server.Options{Token: testToken})
	return &daemon{srv: dt.Server, addr: dt.Addr, url: dt.URL, c: dt.Client}, served
}

// dial opens a raw connection to the daemon, closed when the test ends at
// the latest, its reads and writes bounded by a hang guard.
func (d *daemon) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", d.addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	return conn
}

// ctx is the test's context bounded by a hang guard.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// raw sends a request as is and returns the status and body.
func (d *daemon) raw(t *testing.T, method, path, body string, header http.Header) (int, string) {
	t.Helper()
	resp, b := d.send(t, method, path, body, header)
	return resp.StatusCode, b
}

// send sends a request as is, on a connection of its own, and returns the
// answer, its body read. A Host header names the request's host.
func (d *daemon) send(t *testing.T, method, path, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, d.url+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Host") != "" {
		req.Host = req.Header.Get("Host")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// authed is a header with the test token.
func authed() http.Header { return http.Header{"Authorization": {"Bearer " + testToken}} }

// requireCode asserts that err is an API error with code.
func requireCode(t *testing.T, err error, code client.Code) {
	t.Helper()
	require.Error(t, err)
	var e *client.Error
	require.ErrorAs(t, err, &e, "want an API error with code %s", code)
	require.Equal(t, code, e.Code, "error: %v", err)
}
