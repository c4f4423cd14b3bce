package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/hostcheck"
	"github.com/conchsh/conch/sandboxd"
	"github.com/conchsh/conch/server"
)

// sandboxdOptions are the flags of `conch sandboxd`: upstream sandboxd's,
// with their defaults, and conch serve's for the API served beside them.
type sandboxdOptions struct {
	listenHost        string
	grpcPort          int
	restPort          int
	rootDir           string
	metadataEnvPrefix string
	shutdownTimeout   time.Duration
	httpIdleTimeout   time.Duration
	streamChunkSize   int
	printVersion      bool
	serve             serveOptions
}

// sandboxdMaxRecvMsgSize bounds a gRPC request, encoded: grpc-go's default,
// which upstream's sandboxd serves with too, so clients written for it
// already split larger stdin into several WriteStdin calls. Named here so
// that docs/sandboxd.md's bound is not an accident of a dependency's
// default. Not raised: each request is held whole until the process has read
// it, and nothing bounds how many arrive at once on these tokenless ports.
const sandboxdMaxRecvMsgSize = 4 << 20

// sandboxdReadHeaderTimeout bounds the reading of a REST request's headers,
// and a gRPC connection's handshake (grpc's own default is 120 s); bodies
// are not bounded, since file transfers may be large.
const sandboxdReadHeaderTimeout = 10 * time.Second

// sandboxdGRPCIdleTimeout is how long a gRPC connection with no call in
// flight is kept: its client, told to go away, connects again for its next
// call, and one forgotten open gives its place (see boundSandboxdPorts)
// back. It is the API's idle timeout.
const sandboxdGRPCIdleTimeout = 2 * time.Minute

// sandboxdMaxStreams bounds the calls in flight on one gRPC connection,
// announced in its SETTINGS (MAX_CONCURRENT_STREAMS): a client's calls past
// it wait on the client's side until one ends (grpc clients queue them), or
// go on another connection. grpc-go bounds none by default: one connection,
// which needs no token, opened 20,000 Start streams that sent no request,
// each a goroutine held as long as the connection (a connection with a call
// in flight is never idle), which took some 180 MB. A REST connection
// serves one request at a time; the connections, these ports' included,
// are bounded together (see boundSandboxdPorts), so that the calls these
// ports hold are bounded too.
const sandboxdMaxStreams = 256

// newSandboxdGRPC returns the gRPC server of conch sandboxd, with its
// bounds, the calls waiting for a message of their client bounded by w (see
// sandboxdRequestTimeout), which tells its connections apart by
// connTagger and sees the bytes of messages they read by dataCreds, and what its services register with so that w sees their
// reads. No MaxConnectionAge: a connection is not ended while
// it has a call in flight, as a Start stream that follows a process may
// last hours, and one with none is ended by MaxConnectionIdle.
func newSandboxdGRPC(w *requestWaits) (*grpc.Server, waitRegistrar) {
	g := grpc.NewServer(grpc.MaxRecvMsgSize(sandboxdMaxRecvMsgSize),
		grpc.MaxConcurrentStreams(sandboxdMaxStreams),
		grpc.ConnectionTimeout(sandboxdReadHeaderTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: sandboxdGRPCIdleTimeout}),
		grpc.InTapHandle(w.tap), grpc.StatsHandler(connTagger{}), grpc.Creds(dataCreds{}))
	return g, waitRegistrar{Server: g, w: w}
}

// boundSandboxdPorts bounds the connections the gRPC and REST ports hold
// open under the API's bound, srv's MaxConnections (--max-connections,
// lowered to half the limit of open files when over it), shared with the
// API's own connections. They need no token, and idle ones, unbounded,
// took every descriptor the daemon had, so that neither the API nor its
// probes answered; bounded each at that bound on its own, the three could
// together hold one and a half times the limit of open files. Past the
// bound a connection waits to be accepted until one of them closes. The
// API's own listener is not used: it answers a refusal as HTTP/1.1 in
// conch's error shape, where these ports speak HTTP/2 (gRPC) and upstream
// sandboxd's shape.
func boundSandboxdPorts(srv *server.Server, grpcLn, restLn net.Listener) (net.Listener, net.Listener) {
	return srv.BoundListener(grpcLn), srv.BoundListener(restLn)
}

func cmdSandboxd(ctx context.Context, e *env, args []string) int {
	o, code, ok := parseSandboxd(e, args)
	if !ok {
		return code
	}
	if o.printVersion {
		e.printf("conch sandboxd %s\n", version())
		return 0
	}
	sig, started, release := catchStop()
	defer release()
	e, lb := gatherStderr(e)
	defer lb.Flush()
	dl := newDaemonLog(lb, o.serve.logFormat, o.serve.level)
	logger := dl.Logger
	// The environment /v1/metadata serves is the one the daemon was given,
	// read before the token leaves it.
	environ := os.Environ()
	if err := os.MkdirAll(o.rootDir, 0o755); err != nil {
		return dl.fail(e, exitFailure, fmt.Errorf("--root-dir: %w", err))
	}
	// Every port is open before anything is written, and before the
	// daemon says it listens: one that cannot be had ends the start with
	// nothing on disk and nothing printed but why.
	var grpcLn, restLn, metricsLn net.Listener
	a, err := startAPI(o.serve, dl, func() (err error) {
		grpcLn, restLn, metricsLn, err = o.listeners()
		return err
	})
	if err != nil {
		return dl.fail(e, exitFailure, err)
	}
	defer a.stop()
	srv, d, ln, stateDir := a.srv, a.d, a.ln, a.stateDir
	sbx, err := sandboxd.New(sandboxd.Options{
		Root:            o.rootDir,
		MetadataPrefix:  o.metadataEnvPrefix,
		Environ:         environ,
		StreamChunkSize: o.streamChunkSize,
		StopGrace:       min(sandboxd.DefaultStopGrace, o.shutdownTimeout/2),
		LogRetention:    int(o.serve.retention),
		// Through conch's API server: its processes are listed and logged
		// there, count against --max-processes, are waited for by its drain,
		// and end with it.
		Start: func(opts exec.Options) (*exec.Process, error) {
			p, err := srv.StartExec(opts)
			if errors.Is(err, server.ErrDraining) {
				err = fmt.Errorf("%w: %w", sandboxd.ErrUnavailable, err)
			}
			return p, err
		},
		// Within the API's stdin budget, in which these processes are
		// counted: a write over it is refused, as the API's are.
		WriteStdin: func(p *exec.Process, b []byte) error {
			err := srv.QueueStdin(p, b)
			if errors.Is(err, server.ErrStdinBudget) {
				err = fmt.Errorf("%w: %w", sandboxd.ErrStdinBudget, err)
			}
			return err
		},
		// The drain waits for every Start stream and Execute call too, not
		// only for their processes: a stream whose process has ended may
		// still be sending its output to a slow client, and its exit last.
		Work: func() (func(), error) {
			end, err := srv.BeginWork()
			if err != nil {
				err = fmt.Errorf("%w: %w", sandboxd.ErrUnavailable, err)
			}
			return end, err
		},
		// /v1/health answers 503 from the start of the drain.
		Readiness: notDraining{srv},
		Host:      o.restHost(),
	})
	if err != nil {
		return dl.fail(e, exitFailure, err)
	}
	started()
	recordEndpoint(ln, dl, stateDir, a.tokenPath)
	defer forgetEndpoint(stateDir) // whichever way the daemon ends
	dl.notice(fmt.Sprintf("sandboxd gRPC on %s, REST on %s, root %s", grpcLn.Addr(), restLn.Addr(), sbx.Root()),
		"sandboxd listening", "grpc", grpcLn.Addr().String(), "rest", restLn.Addr().String(), "root", sbx.Root())
	err = serveSandboxd(ctx, sig, o, sbx, srv, grpcLn, restLn, ln, metricsLn, d, logger, stateDir)
	if err != nil {
		return dl.fail(e, exitFailure, err)
	}
	logger.Info("stopped")
	return 0
}

// parseSandboxd reads the flags of `conch sandboxd`. When ok is false the
// command ends with code.
func parseSandboxd(e *env, args []string) (o sandboxdOptions, code int, ok bool) {
	fs := flags(e, "sandboxd", "")
	fs.StringVar(&o.listenHost, "listen-host", "127.0.0.1", "`host` the gRPC and REST ports bind; another than loopback must be asked for (0.0.0.0: every address)")
	fs.IntVar(&o.grpcPort, "grpc-port", 9090, "`port` of the gRPC ProcessService (0: any free port)")
	fs.IntVar(&o.restPort, "rest-port", 8080, "`port` of the REST filesystem and runtime API (0: any free port)")
	fs.StringVar(&o.rootDir, "root-dir", "/workspace", "sandbox root `dir` every file path and working directory is confined to; created if missing")
	fs.StringVar(&o.metadataEnvPrefix, "metadata-env-prefix", sandboxd.DefaultMetadataPrefix, "only environment variables with this `prefix` are served on GET /v1/metadata")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a stopping daemon waits for its processes (TERM, then KILL) and requests")
	fs.DurationVar(&o.httpIdleTimeout, "http-idle-timeout", 60*time.Second, "close idle REST keep-alive connections after this `duration`")
	fs.IntVar(&o.streamChunkSize, "stream-chunk-size", 0, "largest stdout or stderr event of Start in `bytes` (0: 4096)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	logLevel := o.serve.addFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return o, code, false
	}
	if fs.NArg() > 0 {
		return o, usageError(e, "sandboxd takes no arguments"), false
	}
	if code, ok := o.serve.check(e, *logLevel); !ok {
		return o, code, false
	}
	for _, p := range []struct {
		name string
		port int
	}{{"grpc-port", o.grpcPort}, {"rest-port", o.restPort}} {
		if p.port < 0 || p.port > 65535 {
			return o, usageError(e, "--%s must be in 0-65535, not %d", p.name, p.port), false
		}
	}
	if o.grpcPort != 0 && o.grpcPort == o.restPort {
		return o, usageError(e, "--grpc-port and --rest-port must differ (both %d)", o.grpcPort), false
	}
	if o.shutdownTimeout <= 0 {
		return o, usageError(e, "--shutdown-timeout must be positive"), false
	}
	if o.streamChunkSize < 0 {
		return o, usageError(e, "--stream-chunk-size must not be negative"), false
	}
	if o.listenHost == "" {
		return o, usageError(e, "--listen-host names no host: say 127.0.0.1, or 0.0.0.0 to serve every address"), false
	}
	return o, 0, true
}

// restHost is what checks the REST port's Host headers: on a loopback
// --listen-host, only localhost, loopback addresses and --allow-host names
// are taken, as conch serve takes them, so that a web page cannot reach the
// port through DNS rebinding; on another host, which a pod's Service or the
// sandbox router reaches by names of their own, nil (any).
func (o sandboxdOptions) restHost() func(string) bool {
	if !hostcheck.Loopback(hostcheck.Canonical(o.listenHost)) {
		return nil
	}
	allowed := make(map[string]bool)
	for _, h := range o.serve.allowHosts {
		allowed[hostcheck.Canonical(h)] = true
	}
	return func(hostport string) bool {
		host, ok := hostcheck.Split(hostport)
		return ok && (hostcheck.Loopback(host) || allowed[host])
	}
}

// listeners opens the gRPC and REST ports, and the metrics port when
// --metrics-listen asks for one (else metricsLn is nil). On an error none
// is left open.
func (o sandboxdOptions) listeners() (grpcLn, restLn, metricsLn net.Listener, err error) {
	grpcLn, err = net.Listen("tcp", net.JoinHostPort(o.listenHost, strconv.Itoa(o.grpcPort)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("grpc: %w", err)
	}
	restLn, err = net.Listen("tcp", net.JoinHostPort(o.listenHost, strconv.Itoa(o.restPort)))
	if err != nil {
		grpcLn.Close()
		return nil, nil, nil, fmt.Errorf("rest: %w", err)
	}
	if o.serve.metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", o.serve.metricsListen); err != nil {
			grpcLn.Close()
			restLn.Close()
			return nil, nil, nil, fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	return grpcLn, restLn, metricsLn, nil
}

// notDraining is the readiness of the sandboxd surface: it takes work until
// conch's API server begins to drain.
type notDraining struct{ srv *server.Server }

func (n notDraining) Ready() bool { return !n.srv.Draining() }

// serveSandboxd serves the sandboxd surface and conch's API until one
// fails or one of stopSignals arrives, then stops. First both surfaces
// drain, as conch serve does, for --drain-timeout: /v1/health and /readyz
// answer 503 from then on, new processes are refused (UNAVAILABLE, 503
// draining), and the work in flight — Start streams included — finishes.
// Then what is left of the sandboxd processes gets TERM and, within
// --shutdown-timeout, KILL; the gRPC and REST servers finish their requests
// within what is left of it (then are closed), and conch's API shuts down
// as conch serve's does.
func serveSandboxd(ctx context.Context, sig <-chan os.Signal, o sandboxdOptions, sbx *sandboxd.Server, srv *server.Server,
	grpcLn, restLn, ln, metricsLn net.Listener, d *daemon, logger *slog.Logger, stateDir string,
) error {
	grpcLn, restLn = boundSandboxdPorts(srv, grpcLn, restLn)
	g, reg := newSandboxdGRPC(newRequestWaits(sandboxdRequestTimeout, sandboxdMaxWaitingCalls))
	sbx.RegisterGRPC(reg)
	reflection.Register(reg) // grpcurl lists and calls the service without the .proto
	hs := &http.Server{
		Handler:           sbx.Handler(),
		ReadHeaderTimeout: sandboxdReadHeaderTimeout,
		IdleTimeout:       o.httpIdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	failed := make(chan error, 4)
	served := make(chan error, 4)
	serving := 3
	if metricsLn != nil {
		serving++
		go func() {
			err := srv.ServeMetrics(metricsLn)
			if err != nil {
				failed <- fmt.Errorf("metrics: %w", err)
			}
			served <- err
		}()
	}
	go func() {
		err := g.Serve(grpcLn)
		if err != nil {
			failed <- fmt.Errorf("grpc: %w", err)
		}
		served <- err
	}()
	go func() {
		err := hs.Serve(restLn)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else {
			failed <- fmt.Errorf("rest: %w", err)
		}
		served <- err
	}()
	go func() {
		err := srv.Serve(ln)
		if err != nil {
			failed <- err
		}
		served <- err
	}()
	var err error
	select {
	case err = <-failed:
	case s := <-sig:
		logger.Info("stopping", "signal", s.String())
		drain(srv, o.serve.drainTimeout, sig, logger)
	case <-ctx.Done():
	}
	// The message conch serve logs for this step (docs/api.md), so that one
	// query of the log finds the shutdown of either daemon.
	logger.Info("shutting down: ending every process")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	// conch's own API processes end beside sandboxd's, at once and within
	// the same timeout: after them, as they once did, they got their TERM
	// only once every sandboxd process was gone, and a bound of their own.
	apiShut := make(chan error, 1)
	go func() { apiShut <- srv.Shutdown(sctx) }()
	if serr := sbx.Shutdown(sctx); serr != nil {
		logger.Warn("sandboxd processes outlive the shutdown timeout", "err", serr)
	}
	stopped := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-sctx.Done():
		g.Stop()
		<-stopped
	}
	if herr := hs.Shutdown(sctx); herr != nil {
		hs.Close()
	}
	shutErr := <-apiShut
	for range serving {
		<-served
	}
	d.stop()
	forgetEndpoint(stateDir)
	if err == nil {
		err = shutErr
	}
	return err
}
