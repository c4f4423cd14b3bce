// Package daemontest serves a conch daemon in the test's own process, on a
// loopback port, with a client of it, for the tests of the server and the CLI.
package daemontest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// Token is the bearer token of a daemon started without one.
const Token = "daemontest-token"

// shutdownTimeout is a hang guard on the daemon's shutdown at the end of a
// test.
const shutdownTimeout = 30 * time.Second

// Daemon is a server serving on a loopback port and a client of it.
type Daemon struct {
	Server *server.Server
	Addr   string // 127.0.0.1:PORT
	URL    string // http://127.0.0.1:PORT
	Token  string
	Client *client.Client
}

// Start serves a new server.Server with opts until the test ends, then shuts
// it down and requires that serving and shutting down return no error. A
// zero opts.Token means [Token]; a nil opts.Logger discards the log.
func Start(t testing.TB, opts server.Options) *Daemon {
	t.Helper()
	d, served := Serve(t, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		require.NoError(t, d.Server.Shutdown(ctx))
		require.NoError(t, <-served)
		d.Client.CloseIdleConnections()
	})
	return d
}

// Serve serves a new server.Server with opts, as Start does, for a test that
// shuts it down itself: served has what Serve returned once it has. The
// client's idle connections are closed when the test ends.
func Serve(t testing.TB, opts server.Options) (d *Daemon, served <-chan error) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = Token
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := server.New(opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	d = &Daemon{Server: srv, Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(), Token: opts.Token}
	d.Client, err = client.New(d.URL, opts.Token)
	require.NoError(t, err)
	t.Cleanup(d.Client.CloseIdleConnections)
	return d, done
}
