package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/mcpserver"
	"github.com/conchsh/conch/server"
)

// cmdMcp serves the Model Context Protocol on stdin and stdout. By default
// the engine runs in this process and everything it started ends when
// stdin closes or SIGTERM arrives; with --url (or $CONCH_URL) the tools
// drive that daemon and leave its sessions to it.
func cmdMcp(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "mcp", "")
	url := fs.String("url", "", "drive the daemon at `url` (default $CONCH_URL) instead of an engine in this process; the token is found as for the other commands")
	logLevel := fs.String("log-level", "warn", "log `level` of the engine in this process, on stderr")
	if code, ok := parseArgs(fs, args, func(n int) bool { return n == 0 }); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError(e, "--log-level: %v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, stopSignals()...)
	defer stop()
	if *url == "" {
		*url = os.Getenv(client.EnvURL)
	}
	if *url != "" {
		os.Setenv(client.EnvURL, *url)
		c, err := client.Discover()
		if err != nil {
			return fail(e, exitFailure, err)
		}
		defer c.CloseIdleConnections()
		srv := mcpserver.New(c, version())
		srv.Shared = true // the daemon's sessions outlive this process
		if err := srv.Run(ctx); err != nil {
			return fail(e, exitFailure, err)
		}
		return 0
	}
	// The engine's log waits for no stderr, as conch serve's does.
	e, lb := gatherStderr(e)
	defer lb.Flush()
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if err := serveMcpInProcess(ctx, logger); err != nil {
		return fail(e, exitFailure, err)
	}
	return 0
}

// serveMcpInProcess runs the engine as `conch serve` does (subreaper,
// reaper, instance record), on a loopback port with a token of its own
// that no file holds, serves the tools against it until stdin closes or ctx
// ends, then shuts the engine down, ending every session and process.
func serveMcpInProcess(ctx context.Context, logger *slog.Logger) error {
	stateDir, err := client.StateDir()
	if err != nil {
		return err
	}
	// The commands must not see a token of the user's daemon.
	os.Unsetenv(client.EnvToken)
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	token := hex.EncodeToString(b)
	d, err := startDaemon(logger, stateDir, "", containment.Config{})
	if err != nil {
		return err
	}
	defer d.stop()
	srv, err := server.New(server.Options{Token: token, Logger: logger, StreamDir: d.rec.StreamDir, Containment: d.root})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c, err := client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		ln.Close()
		return err
	}
	defer c.CloseIdleConnections()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	runErr := mcpserver.New(c, version()).Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	serveErr := <-served
	d.stop()
	for _, err := range []error{runErr, serveErr, shutErr} {
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
	}
	return nil
}
