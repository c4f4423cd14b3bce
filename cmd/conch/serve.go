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
	"runtime/debug"
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

// serveOptions are the flags of `conch serve`.
type serveOptions struct {
	listen, tokenFile         string
	retention, budget         byteSize
	bodyLimit, maxCommand     byteSize
	exitTTL                   time.Duration
	maxSessions, maxProcesses int
	maxEnded                  int
	stdinBudget               byteSize
	allowHosts                stringList
	level                     slog.Level
}

func cmdServe(ctx context.Context, e *env, args []string) int {
	o, code, ok := parseServe(e, args)
	if !ok {
		return code
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: o.level}))
	stateDir, err := client.StateDir()
	if err != nil {
		return fail(e, exitFailure, err)
	}
	token, tokenPath, err := takeToken(e, o.tokenFile, stateDir)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	d, err := startDaemon(logger, stateDir)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	defer d.stop()
	srv, err := server.New(o.server(token, logger, d.rec.StreamDir))
	if err != nil {
		return fail(e, exitFailure, err)
	}
	setMemoryLimit(srv, logger)
	ln, err := listen(e, o.listen, logger, stateDir, tokenPath)
	if err != nil {
		return fail(e, exitFailure, err)
	}
	if err := serveUntilStopped(ctx, srv, ln, d, logger, stateDir); err != nil {
		return fail(e, exitFailure, err)
	}
	logger.Info("stopped")
	return 0
}

// parseServe reads the flags of `conch serve`. When ok is false the command
// ends with code: help was asked for, or the flags are wrong.
func parseServe(e *env, args []string) (o serveOptions, code int, ok bool) {
	fs := flags(e, "serve", "")
	fs.StringVar(&o.listen, "listen", server.DefaultAddr, "`address` to listen on; a non-loopback address is served only when named explicitly")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from `path` (default: $CONCH_TOKEN, else a new token written to the state directory)")
	o.retention = byteSize(logstore.DefaultRetention)
	fs.Var(&o.retention, "log-retention", "output `bytes` kept per process (suffixes K, M, G)")
	o.budget = byteSize(server.DefaultLogBudget)
	fs.Var(&o.budget, "log-budget", "output `bytes` kept by all processes together; over it the logs of the processes that ended first are dropped first")
	fs.DurationVar(&o.exitTTL, "exit-ttl", server.DefaultExitTTL, "how long a process with keepLogs on_exit_ttl is kept after it ends")
	fs.IntVar(&o.maxSessions, "max-sessions", server.DefaultMaxSessions, "sessions alive at once")
	fs.IntVar(&o.maxProcesses, "max-processes", server.DefaultMaxProcesses, "processes running or queued at once")
	fs.IntVar(&o.maxEnded, "max-ended", server.DefaultMaxEnded, "records of ended processes and commands kept together; over it the oldest ended records are forgotten first")
	o.stdinBudget = byteSize(server.DefaultStdinBudget)
	fs.Var(&o.stdinBudget, "stdin-budget", "`bytes` written to the stdin of all processes together that they have not read yet; a write over it is refused with 409 stdin_full")
	o.bodyLimit = byteSize(server.DefaultBodyLimit)
	fs.Var(&o.bodyLimit, "body-limit", "largest request body in `bytes`")
	o.maxCommand = byteSize(server.DefaultMaxCommandBytes)
	fs.Var(&o.maxCommand, "max-command-bytes", "largest command text (cmd) in `bytes`; a larger one is refused with 413")
	fs.Var(&o.allowHosts, "allow-host", "also accept this `name` in the Host header (repeatable)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	if code, ok := parse(fs, args); !ok {
		return o, code, false
	}
	if fs.NArg() > 0 {
		return o, usageError(e, "serve takes no arguments"), false
	}
	if err := o.level.UnmarshalText([]byte(*logLevel)); err != nil {
		return o, usageError(e, "--log-level: %v", err), false
	}
	if err := checkListen(o.listen); err != nil {
		return o, usageError(e, "--listen: %v", err), false
	}
	return o, 0, true
}

// server is the server's configuration under these flags.
func (o serveOptions) server(token string, logger *slog.Logger, streamDir string) server.Options {
	return server.Options{
		Token:           token,
		BodyLimit:       int64(o.bodyLimit),
		MaxCommandBytes: int(o.maxCommand),
		LogRetention:    int(o.retention),
		LogBudget:       int64(o.budget),
		ExitTTL:         o.exitTTL,
		MaxSessions:     o.maxSessions,
		MaxProcesses:    o.maxProcesses,
		MaxEnded:        o.maxEnded,
		StdinBudget:     int64(o.stdinBudget),
		AllowedHosts:    o.allowHosts,
		Logger:          logger,
		StreamDir:       streamDir,
	}
}

// setMemoryLimit runs the daemon under the Go memory limit its budgets add
// up to, so that the garbage collector works harder as the heap nears it
// rather than letting it grow to twice what is live. GOMEMLIMIT, when set,
// wins.
func setMemoryLimit(srv *server.Server, logger *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	limit := srv.MemoryLimit()
	debug.SetMemoryLimit(limit)
	logger.Info("memory limit", "bytes", limit)
}

// takeToken loads the token (see loadToken), says where a new one was
// written, and removes $CONCH_TOKEN from the environment: the token must not
// reach the commands the daemon runs.
func takeToken(e *env, tokenFile, stateDir string) (token, path string, err error) {
	token, path, err = loadToken(tokenFile, stateDir)
	if err != nil {
		return "", "", err
	}
	if path != "" && tokenFile == "" {
		fmt.Fprintf(e.stderr, "conch: token written to %s\n", path)
	}
	os.Unsetenv(client.EnvToken)
	return token, path, nil
}

// listen opens the daemon's listener and records its endpoint for clients.
func listen(e *env, addr string, logger *slog.Logger, stateDir, tokenPath string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		logger.Warn("listening beyond loopback: anyone who can reach this address and holds the token can run commands", "addr", ln.Addr().String())
	}
	url := "http://" + ln.Addr().String()
	if err := client.WriteEndpoint(stateDir, client.Endpoint{URL: url, TokenFile: tokenPath, PID: os.Getpid()}); err != nil {
		logger.Warn("record endpoint for clients", "err", err)
	}
	fmt.Fprintf(e.stderr, "conch: listening on %s\n", url)
	return ln, nil
}

// serveUntilStopped serves ln until the server fails or SIGTERM or SIGINT arrives, then
// shuts the server down within shutdownTimeout, ends what is left under the
// daemon and removes the endpoint record. It returns the first error of
// serving and shutting down.
func serveUntilStopped(ctx context.Context, srv *server.Server, ln net.Listener, d *daemon, logger *slog.Logger, stateDir string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
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
	return err
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
