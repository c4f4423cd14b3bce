package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/statefile"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/server"
)

// shutdownTimeout bounds how long a stopping daemon waits for its processes
// (each gets TERM, then KILL after 5 s).
const shutdownTimeout = 30 * time.Second

// defaultDrainTimeout is how long work in flight gets to finish after
// SIGTERM, SIGINT or SIGHUP, before the shutdown ends what is left.
const defaultDrainTimeout = 30 * time.Second

// serveOptions are the flags of `conch serve`.
type serveOptions struct {
	listen, tokenFile                                     string
	retention, budget                                     byteSize
	bodyLimit, maxCommand                                 byteSize
	exitTTL                                               time.Duration
	maxSessions, maxProcesses, maxConnections, maxStreams int
	maxEnded                                              int
	stdinBudget                                           byteSize
	commandTextBudget                                     byteSize
	allowHosts                                            stringList
	level                                                 slog.Level
	contain                                               containment.Config
	containMode                                           string // --containment: auto or none
	logFormat                                             string
	drainTimeout                                          time.Duration
	metricsListen                                         string
	streamDir                                             string // --stream-dir
}

func cmdServe(ctx context.Context, e *env, args []string) int {
	o, code, ok := parseServe(e, args)
	if !ok {
		return code
	}
	sig, started, release := catchStop()
	defer release()
	e, lb := gatherStderr(e)
	defer lb.Flush()
	dl := newDaemonLog(lb, o.logFormat, o.level)
	logger := dl.Logger
	var mln net.Listener
	a, err := startAPI(o, dl, func() (err error) {
		if o.metricsListen != "" {
			if mln, err = net.Listen("tcp", o.metricsListen); err != nil {
				return fmt.Errorf("--metrics-listen: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return dl.fail(e, exitFailure, err)
	}
	defer a.stop()
	started()
	recordEndpoint(a.ln, dl, a.stateDir, a.tokenPath)
	if err := serveUntilStopped(ctx, sig, a.srv, listeners{api: a.ln, metrics: mln}, o.drainTimeout, a.d, logger, a.stateDir); err != nil {
		return dl.fail(e, exitFailure, err)
	}
	logger.Info("stopped")
	return 0
}

// apiDaemon is conch's own API, started and bound but not serving yet.
type apiDaemon struct {
	ln                  net.Listener
	d                   *daemon
	srv                 *server.Server
	stateDir, tokenPath string
	lock                *os.File // the state directory's, held while the daemon runs
}

// stop stops the daemon, then lets the state directory go.
func (a *apiDaemon) stop() {
	a.d.stop()
	a.lock.Close()
}

// startAPI starts what `conch serve` (and `conch sandboxd` beside its own
// API) serves; bind opens the caller's other listeners, once the API's
// address is bound. A start that fails changes nothing on disk: another
// daemon of the state directory is looked for, the token read and every
// address bound before anything is written, then the state directory is
// locked (one daemon at a time, two started at once included), and a new
// token is written last, so that a failed second start
// cannot replace the token the first daemon's clients use. The caller
// stops a.
func startAPI(o serveOptions, dl daemonLog, bind func() error) (a *apiDaemon, err error) {
	logger := dl.Logger
	a = &apiDaemon{}
	if a.stateDir, err = client.StateDir(); err != nil {
		return nil, err
	}
	if ep, ok := liveDaemon(a.stateDir); ok {
		return nil, runsAlready(a.stateDir, ep)
	}
	token, tokenPath, err := loadToken(o.tokenFile)
	if err != nil {
		return nil, err
	}
	if a.ln, err = listen(o.listen, logger); err != nil {
		return nil, err
	}
	if err = bind(); err != nil {
		a.ln.Close()
		return nil, err
	}
	// Locked once every address is bound: a start that fails before
	// leaves the state directory as it was, not even made.
	lock, err := lockState(a.stateDir)
	if err != nil {
		a.ln.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close() // a is nil by now
		}
	}()
	a.lock = lock
	fresh := token == ""
	if fresh {
		if token, err = newToken(); err != nil {
			a.ln.Close()
			return nil, err
		}
	}
	// The token must not reach the commands the daemon runs.
	os.Unsetenv(client.EnvToken)
	if a.d, err = startDaemon(logger, a.stateDir, o.streamDir, o.contain); err != nil {
		a.ln.Close()
		return nil, err
	}
	if a.srv, err = server.New(o.server(token, logger, a.d.rec.StreamDir, a.d.root)); err != nil {
		a.ln.Close()
		a.d.stop()
		return nil, err
	}
	if fresh {
		if tokenPath, err = writeToken(a.stateDir, token); err != nil {
			a.ln.Close()
			a.d.stop()
			return nil, err
		}
		dl.notice("token written to "+tokenPath, "token written", "path", tokenPath)
	}
	a.tokenPath = tokenPath
	dl.notice("containment "+describeContainment(a.d.root), "containment",
		"mode", string(a.d.root.Mode()), "cgroup", a.d.root.Path(), "description", describeContainment(a.d.root))
	setMemoryLimit(a.srv, logger)
	return a, nil
}

// lockState takes the state directory's lock, which the daemon holds for
// as long as it runs: a second daemon of the directory is refused, one
// started at the same moment too (each looked for the other's record
// before either wrote it, and both ran, the token file the second's).
func lockState(stateDir string) (*os.File, error) {
	if err := statefile.MakeDir(stateDir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(stateDir, lockFile), os.O_RDWR|os.O_CREATE|unix.O_NOCTTY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock the state directory: %w", err)
		}
		if ep, ok := liveDaemon(stateDir); ok {
			return nil, runsAlready(stateDir, ep)
		}
		return nil, fmt.Errorf("a daemon of %s runs already (it is starting or stopping); stop it first, or start this one with another XDG_STATE_HOME", stateDir)
	}
	return f, nil
}

func runsAlready(stateDir string, ep client.Endpoint) error {
	return fmt.Errorf("a daemon of %s runs already: pid %d, listening on %s; stop it first, or start this one with another XDG_STATE_HOME", stateDir, ep.PID, ep.URL)
}

// lockFile is the file in the state directory a running daemon holds
// locked.
const lockFile = "daemon.lock"

// parseServe reads the flags of `conch serve`. When ok is false the command
// ends with code: help was asked for, or the flags are wrong.
func parseServe(e *env, args []string) (o serveOptions, code int, ok bool) {
	fs := flags(e, "serve", "")
	logLevel := o.addFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return o, code, false
	}
	if fs.NArg() > 0 {
		return o, usageError(e, "serve takes no arguments"), false
	}
	if code, ok := o.check(e, *logLevel); !ok {
		return o, code, false
	}
	return o, 0, true
}

// addFlags defines the flags of `conch serve` on fs, into o, which conch
// sandboxd shares for the API it serves beside its own; it returns where
// --log-level goes, which check reads.
func (o *serveOptions) addFlags(fs *flag.FlagSet) (logLevel *string) {
	fs.StringVar(&o.listen, "listen", server.DefaultAddr, "`address` to listen on; a non-loopback address is served only when named explicitly")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from `path` (default: $CONCH_TOKEN, else a new token written to the state directory)")
	o.retention = byteSize(logstore.DefaultRetention)
	fs.Var(&o.retention, "log-retention", "output `bytes` kept per process (suffixes K, M, G), in a frame per 128 bytes at most (rounded down to a power of two)")
	o.budget = byteSize(server.DefaultLogBudget)
	fs.Var(&o.budget, "log-budget", "`bytes` kept by the logs of all processes together, counting each log's output and its frame table (64 bytes a slot); over it the logs of the processes that ended first are dropped first")
	fs.DurationVar(&o.exitTTL, "exit-ttl", server.DefaultExitTTL, "how long a process with keepLogs on_exit_ttl is kept after it ends")
	fs.IntVar(&o.maxSessions, "max-sessions", server.DefaultMaxSessions, "sessions alive at once")
	fs.IntVar(&o.maxProcesses, "max-processes", server.DefaultMaxProcesses, "processes running or queued at once")
	fs.IntVar(&o.maxConnections, "max-connections", server.DefaultMaxConnections, "connections to the API open at once, at most half the limit of open files; one past it closes the connection idle longest, or is answered 429 when none is idle (conch sandboxd: its gRPC and REST ports share it with the API, a quarter of it at most for each, past which a connection to them waits to be accepted)")
	fs.IntVar(&o.maxStreams, "max-streams", server.DefaultMaxStreams, "log streams and PTY attachments open at once; one past it is refused 429")
	fs.IntVar(&o.maxEnded, "max-ended", server.DefaultMaxEnded, "records of ended processes, commands and sessions kept together; over it the oldest ended records are forgotten first")
	o.stdinBudget = byteSize(server.DefaultStdinBudget)
	o.commandTextBudget = byteSize(server.DefaultCommandTextBudget)
	fs.Var(&o.commandTextBudget, "command-text-budget", "`bytes` of text (command, code, argv) of the commands and processes not yet ended, together; one over it is refused with 429 resource_exhausted")
	fs.Var(&o.stdinBudget, "stdin-budget", "`bytes` written to the stdin of all processes together that they have not read yet; a write over it is refused with 409 stdin_full")
	o.bodyLimit = byteSize(server.DefaultBodyLimit)
	fs.Var(&o.bodyLimit, "body-limit", "largest request body in `bytes`")
	o.maxCommand = byteSize(server.DefaultMaxCommandBytes)
	fs.Var(&o.maxCommand, "max-command-bytes", "largest command text (cmd) in `bytes`; a larger one is refused with 413")
	fs.Var(&o.allowHosts, "allow-host", "also accept this `name` in the Host header (repeatable)")
	fs.StringVar(&o.containMode, "containment", "auto", "`mode`: auto puts every session, process and code context in a cgroup of its own where a writable cgroup v2 hierarchy exists; none never does")
	fs.StringVar(&o.contain.Path, "cgroup-root", "", "make the daemon's cgroups under this cgroup v2 `directory` (default: beside the daemon's own cgroup, else the root of the v2 mount)")
	fs.Func("default-limits", "`limits` of every session, process and context that sets none: memory=512M,pids=256,cpu=500 (cpu in thousandths of a core)", func(v string) error {
		l, err := parseLimits(v)
		o.contain.Defaults = l
		return err
	})
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json (one JSON object a line)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, "on SIGTERM, SIGINT or SIGHUP, how long work in flight gets to finish while new work is refused; 0: stop at once")
	fs.StringVar(&o.streamDir, "stream-dir", "", "make the instance's directory of FIFOs and command files in this `directory`, made when missing (default: /dev/shm, else the temp directory); on a host shared with users you do not trust, one only the daemon's user can write to")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "also serve /metrics, /livez and /readyz without a token on this `address`")
	return fs.String("log-level", "info", "log `level`: debug, info, warn or error")
}

// check reads logLevel into o and checks the flags addFlags defined; when
// ok is false the command ends with code.
func (o *serveOptions) check(e *env, logLevel string) (code int, ok bool) {
	if err := o.level.UnmarshalText([]byte(logLevel)); err != nil {
		return usageError(e, "--log-level: %v", err), false
	}
	if err := checkListen(o.listen); err != nil {
		return usageError(e, "--listen: %v", err), false
	}
	switch o.containMode {
	case "auto":
	case "none":
		o.contain.Disabled = true
	default:
		return usageError(e, "--containment: want auto or none, not %q", o.containMode), false
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return usageError(e, "--log-format %q: want text or json", o.logFormat), false
	}
	if o.drainTimeout < 0 {
		return usageError(e, "--drain-timeout %v: want a duration of 0 or more", o.drainTimeout), false
	}
	if o.metricsListen != "" {
		if err := checkListen(o.metricsListen); err != nil {
			return usageError(e, "--metrics-listen: %v", err), false
		}
	}
	return 0, true
}

// server is the server's configuration under these flags.
func (o serveOptions) server(token string, logger *slog.Logger, streamDir string, root *containment.Root) server.Options {
	return server.Options{
		Token:             token,
		BodyLimit:         int64(o.bodyLimit),
		MaxCommandBytes:   int(o.maxCommand),
		LogRetention:      int(o.retention),
		LogBudget:         int64(o.budget),
		ExitTTL:           o.exitTTL,
		MaxSessions:       o.maxSessions,
		MaxProcesses:      o.maxProcesses,
		MaxConnections:    o.maxConnections,
		MaxStreams:        o.maxStreams,
		MaxEnded:          o.maxEnded,
		StdinBudget:       int64(o.stdinBudget),
		CommandTextBudget: int64(o.commandTextBudget),
		AllowedHosts:      o.allowHosts,
		Logger:            logger,
		StreamDir:         streamDir,
		Containment:       root,
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

// describeContainment is the line serve prints about its cgroups.
func describeContainment(r *containment.Root) string {
	if r.Mode() == containment.ModeNone {
		return "none: " + r.Reason()
	}
	var ctl []string
	for c, where := range r.Controllers() {
		ctl = append(ctl, c+" "+where)
	}
	sort.Strings(ctl)
	limits := "limits: none can be applied"
	if len(ctl) > 0 {
		limits = "limits through " + strings.Join(ctl, ", ")
	}
	return fmt.Sprintf("%s in %s (%s)", r.Mode(), r.Path(), limits)
}

// parseLimits reads memory=SIZE,pids=N,cpu=MILLICORES.
func parseLimits(v string) (containment.Limits, error) {
	var l containment.Limits
	seen := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return l, fmt.Errorf("%q: want name=value", kv)
		}
		if seen[k] {
			return l, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "memory":
			// 0 is no limit, as for pids and cpu, and as a request's 0 is.
			if strings.TrimSpace(val) == "0" {
				break
			}
			var b byteSize
			err = b.Set(val)
			l.MemoryBytes = int64(b)
		case "pids":
			l.Pids, err = strconv.ParseInt(val, 10, 64)
		case "cpu":
			l.CPUMillis, err = strconv.ParseInt(val, 10, 64)
		default:
			return l, fmt.Errorf("%q: want memory, pids or cpu", k)
		}
		if err != nil {
			return l, fmt.Errorf("%s: %w", k, err)
		}
	}
	return l, l.Validate()
}

// listen opens the daemon's listener.
func listen(addr string, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		logger.Warn("listening beyond loopback: anyone who can reach this address and holds the token can run commands", "addr", ln.Addr().String())
	}
	return ln, nil
}

// recordEndpoint records the daemon's endpoint for clients.
func recordEndpoint(ln net.Listener, dl daemonLog, stateDir, tokenPath string) {
	url := "http://" + ln.Addr().String()
	if err := client.WriteEndpoint(stateDir, client.Endpoint{URL: url, TokenFile: tokenPath, PID: os.Getpid()}); err != nil {
		dl.Warn("record endpoint for clients", "err", err)
	}
	dl.notice("listening on "+url, "listening", "url", url)
}

// listeners are what the daemon serves: the API, and the metrics and
// probes without a token when asked for (nil otherwise).
type listeners struct{ api, metrics net.Listener }

// serveUntilStopped serves the listeners until the server fails or one of
// stopSignals arrives on sig (see catchStop), then drains for drainTimeout
// (see server.Drain; another signal cuts it short), shuts the server down
// within shutdownTimeout, ends what is left under the daemon and removes
// the endpoint record. It returns the first error of serving and shutting
// down.
func serveUntilStopped(ctx context.Context, sig <-chan os.Signal, srv *server.Server, ls listeners, drainTimeout time.Duration, d *daemon, logger *slog.Logger, stateDir string) error {
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ls.api) }()
	serving := 1
	if ls.metrics != nil {
		go func() { served <- srv.ServeMetrics(ls.metrics) }()
		serving++
	}
	var err error
	select {
	case err = <-served:
		serving--
	case s := <-sig:
		logger.Info("stopping", "signal", s.String())
		drain(srv, drainTimeout, sig, logger)
	case <-ctx.Done():
	}
	logger.Info("shutting down: ending every process")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	for ; serving > 0; serving-- {
		if serveErr := <-served; err == nil {
			err = serveErr
		}
	}
	d.stop()
	forgetEndpoint(stateDir)
	if err == nil {
		err = shutErr
	}
	return err
}

// drain lets the work in flight finish for at most timeout (none when it is
// zero) while new work is refused, or until another signal arrives.
func drain(srv *server.Server, timeout time.Duration, sig <-chan os.Signal, logger *slog.Logger) {
	if timeout <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- srv.Drain(ctx) }()
	select {
	case <-drained:
	case s := <-sig:
		logger.Info("drain: stopping at once", "signal", s.String())
		cancel()
		<-drained
	}
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

// loadToken returns the token given, and the file clients can read it
// from: the token file's, else $CONCH_TOKEN's (no file). Both are empty
// when neither gives one. It writes nothing.
func loadToken(tokenFile string) (token, path string, err error) {
	if tokenFile != "" {
		if err := checkTokenFile(tokenFile); err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		tok, err := client.ReadGivenToken(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		abs, err := filepath.Abs(tokenFile)
		return tok, abs, err
	}
	return strings.TrimSpace(os.Getenv(client.EnvToken)), "", nil
}

// writeToken writes a new random token 0600 to the state directory and
// returns it and its file.
// newToken returns a fresh random token.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeToken writes token to the state directory's token file, whole or
// not at all.
func writeToken(stateDir, token string) (path string, err error) {
	if err := statefile.MakeDir(stateDir); err != nil {
		return "", err
	}
	path = filepath.Join(stateDir, client.TokenFile)
	if err := statefile.Write(path, []byte(token+"\n")); err != nil {
		return "", fmt.Errorf("write the token: %w", err)
	}
	return path, nil
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
