package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/server"
)

// shutdownTimeout bounds how long a stopping daemon waits for its processes
// (each gets TERM, then KILL after 5 s).
const shutdownTimeout = 30 * time.Second

func cmdServe(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "serve", "")
	listen := fs.String("listen", server.DefaultAddr, "`address` to listen on; a non-loopback address is served only when named explicitly")
	tokenFile := fs.String("token-file", "", "read the bearer token from `path` (default: $CONCH_TOKEN, else a new token written to the state directory)")
	retention := byteSize(logstore.DefaultRetention)
	fs.Var(&retention, "log-retention", "output `bytes` kept per process (suffixes K, M, G)")
	budget := byteSize(server.DefaultLogBudget)
	fs.Var(&budget, "log-budget", "output `bytes` kept by all processes together; over it the logs of the processes that ended first are dropped first")
	exitTTL := fs.Duration("exit-ttl", server.DefaultExitTTL, "how long a process with keepLogs on_exit_ttl is kept after it ends")
	maxSessions := fs.Int("max-sessions", server.DefaultMaxSessions, "sessions alive at once")
	maxProcesses := fs.Int("max-processes", server.DefaultMaxProcesses, "processes running or queued at once")
	bodyLimit := byteSize(server.DefaultBodyLimit)
	fs.Var(&bodyLimit, "body-limit", "largest request body in `bytes`")
	maxCommand := byteSize(server.DefaultMaxCommandBytes)
	fs.Var(&maxCommand, "max-command-bytes", "largest command text (cmd) in `bytes`; a larger one is refused with 413")
	var allowHosts stringList
	fs.Var(&allowHosts, "allow-host", "also accept this `name` in the Host header (repeatable)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, "serve takes no arguments")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError(e, "--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	if err := checkListen(*listen); err != nil {
		return usageError(e, "--listen: %v", err)
	}
	stateDir, err := client.StateDir()
	if err != nil {
		return fail(e, exitFailure, err)
	}
	token, tokenPath, err := loadToken(*tokenFile, stateDir)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	if tokenPath != "" && *tokenFile == "" {
		fmt.Fprintf(e.stderr, "conch: token written to %s\n", tokenPath)
	}
	// The token must not reach the commands the daemon runs.
	os.Unsetenv(client.EnvToken)

	d, err := startDaemon(logger, stateDir)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	defer d.stop()

	srv, err := server.New(server.Options{
		Token:           token,
		BodyLimit:       int64(bodyLimit),
		MaxCommandBytes: int(maxCommand),
		LogRetention:    int(retention),
		LogBudget:       int64(budget),
		ExitTTL:         *exitTTL,
		MaxSessions:     *maxSessions,
		MaxProcesses:    *maxProcesses,
		AllowedHosts:    allowHosts,
		Logger:          logger,
		StreamDir:       d.rec.StreamDir,
	})
	if err != nil {
		return fail(e, exitFailure, err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		logger.Warn("listening beyond loopback: anyone who can reach this address and holds the token can run commands", "addr", ln.Addr().String())
	}
	url := "http://" + ln.Addr().String()
	if err := client.WriteEndpoint(stateDir, client.Endpoint{URL: url, TokenFile: tokenPath, PID: os.Getpid()}); err != nil {
		logger.Warn("record endpoint for clients", "err", err)
	}
	fmt.Fprintf(e.stderr, "conch: listening on %s\n", url)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		logger.Info("stopping: ending every process")
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if serveErr := <-served; err == nil {
		err = serveErr
	}
	d.stop()
	forgetEndpoint(stateDir)
	if err == nil {
		err = shutErr
	}
	if err != nil {
		return fail(e, exitFailure, err)
	}
	logger.Info("stopped")
	return 0
}

// checkListen refuses an address without a host: serving on every address
// must be asked for by naming one (0.0.0.0:7070).
func checkListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q names no host: say 127.0.0.1%s, or 0.0.0.0%s to serve every address", addr, addr, addr)
	}
	return nil
}

// loadToken returns the token and the file clients can read it from: the
// token file given, else $CONCH_TOKEN (no file), else a new random token
// written 0600 to the state directory.
func loadToken(tokenFile, stateDir string) (token, path string, err error) {
	if tokenFile != "" {
		if err := checkTokenFile(tokenFile); err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		tok, err := client.ReadToken(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		abs, err := filepath.Abs(tokenFile)
		return tok, abs, err
	}
	if tok := strings.TrimSpace(os.Getenv(client.EnvToken)); tok != "" {
		return tok, "", nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(b)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", "", err
	}
	path = filepath.Join(stateDir, client.TokenFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", "", err
	}
	return token, path, nil
}

// forgetEndpoint removes the endpoint record if it is still this daemon's.
func forgetEndpoint(stateDir string) {
	if ep, err := client.ReadEndpoint(stateDir); err == nil && ep.PID == os.Getpid() {
		_ = os.Remove(filepath.Join(stateDir, client.EndpointFile))
	}
}

// byteSize is a flag holding a size in bytes, with an optional K, M or G
// suffix (powers of 1024; KiB, MiB, GiB and B are accepted too).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	v := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	v = strings.TrimSuffix(v, "I")
	mult := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			v = v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return errors.New("want a positive size in bytes, like 8388608 or 8M")
	}
	*b = byteSize(n * mult)
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
