package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/hostcheck"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
)

// Defaults of Options' zero fields.
const (
	DefaultAddr         = "127.0.0.1:7070"
	DefaultBodyLimit    = 16 << 20
	DefaultExitTTL      = 10 * time.Minute
	DefaultMaxSessions  = 1024
	DefaultMaxProcesses = 4096
	// DefaultMaxConnections bounds the API's open connections: an idle
	// one costs the daemon a descriptor and about 20 KB.
	DefaultMaxConnections = 4096
	// DefaultMaxStreams bounds the log streams open at once: one whose
	// client reads nothing holds up to about 1.3 MB until it is let go.
	DefaultMaxStreams  = 256
	DefaultLogBudget   = 512 << 20
	DefaultMaxEnded    = 10000
	DefaultStdinBudget = 64 << 20
	// DefaultCommandTextBudget bounds the text of the commands, cells and
	// processes not yet ended, together: 64 commands of the largest size,
	// or tens of thousands of ordinary ones.
	DefaultCommandTextBudget = 64 << 20
)

// heartbeat is how often an idle stream gets a comment, so that proxies keep
// it open.
const heartbeat = 15 * time.Second

// writeTimeout bounds the write of one stream event: a client that takes
// longer to read it is let go (it may resume with Last-Event-ID).
const writeTimeout = 30 * time.Second

// bodyIdle bounds the wait for each next byte of a request body: a client
// that stops sending one holds its place under the bodies' budget (what
// came of it) until it is let go.
const bodyIdle = 30 * time.Second

// bodyGrace and bodyMinRate bound how slowly a request body may come: past
// its first bodyGrace, bodyMinRate bytes a second on average. A client that
// sent a byte just within bodyIdle, again and again, held its place under
// the bodies' budget for as long as it kept on; now a body of 16 MiB, the
// default --body-limit, is read within 94 s or let go. A client that
// reaches the daemon at 256 KiB/s (2 Mbit/s) sends it in 64 s.
const (
	bodyGrace   = 30 * time.Second
	bodyMinRate = 256 << 10
)

// restBytes and restFor bound what the daemon reads, and discards, of a
// request body its answer did not need (see Server.readRest).
const (
	restBytes = 256 << 20
	restFor   = 5 * time.Second
)

// Options configure a Server. Zero fields mean the defaults written beside
// them.
type Options struct {
	// Token is the bearer token every route but /healthz requires. It must
	// not be empty.
	Token string
	// BodyLimit bounds request bodies in bytes; zero means DefaultBodyLimit.
	BodyLimit int64
	// LogRetention bounds each process's retained output in bytes; zero
	// means logstore.DefaultRetention.
	LogRetention int
	// LogBudget bounds the memory of the logs of all processes together, in
	// bytes: the output they retain and their frame tables (see
	// logstore.Budget); zero means DefaultLogBudget. Over it, the logs of the processes
	// that ended first are dropped first (see logstore.Budget).
	LogBudget int64
	// MaxCommandBytes bounds the text of a command (cmd) in bytes; zero
	// means DefaultMaxCommandBytes.
	MaxCommandBytes int
	// ExitTTL is how long a process with keepLogs on_exit_ttl is kept after
	// it ends; zero means DefaultExitTTL.
	ExitTTL time.Duration
	// MaxSessions bounds the sessions alive at once; zero means
	// DefaultMaxSessions.
	MaxSessions int
	// MaxProcesses bounds the exec, PTY and session-command processes not yet
	// ended; zero means DefaultMaxProcesses.
	MaxProcesses int
	// MaxConnections bounds the connections to the API open at once; zero
	// means DefaultMaxConnections. One past it closes the connection idle
	// longest, one with no request in flight nor waiting; when there is
	// none, it is answered 429 and closed.
	// New lowers it to half the process's limit of open files when it is
	// over that.
	MaxConnections int
	// MaxStreams bounds the log streams and PTY attachments open at once; zero means
	// DefaultMaxStreams. One past it is refused 429.
	MaxStreams int
	// MaxEnded bounds the records of ended processes, session commands,
	// code cells and ended sessions kept together; over it the oldest
	// ended records are forgotten first. Zero means DefaultMaxEnded.
	MaxEnded int
	// StdinBudget bounds the bytes queued for the stdin of all processes
	// together, beyond each one's process.StdinQueueLimit; zero means
	// DefaultStdinBudget.
	StdinBudget int64
	// CommandTextBudget bounds the bytes of text (command, code, argv) of
	// the processes, session commands and cells not yet ended, together:
	// the daemon holds a queued command's text until it runs, and a
	// running one's until it ends. Zero means DefaultCommandTextBudget.
	CommandTextBudget int64
	// AllowedHosts are host names accepted in the Host header besides
	// localhost, loopback addresses and the listen address.
	AllowedHosts []string
	// Logger receives the daemon's structured log; nil means slog.Default().
	Logger *slog.Logger
	// Version is reported by /healthz; empty means the module's version.
	Version string
	// StreamDir is where sessions make the directories of their stream
	// FIFOs, and code contexts their private directories; empty means
	// shellsession's and codecontext's defaults.
	StreamDir string
	// Containment gives every session, process and code context a cgroup
	// of its own; nil contains nothing (and refuses limits).
	Containment *containment.Root
	// ReadyWithin bounds how long a new session's shell has to come up
	// (a login shell's profile read) and a code context's interpreter to
	// become ready: past it the creation is answered 400 invalid_argument
	// and what was started is killed. Zero means process.ReadyWithin.
	ReadyWithin time.Duration
}

// Server serves the conch HTTP API over the processes and sessions it
// starts. Create it with New, run it with Serve, end it with Shutdown.
type Server struct {
	opts   Options
	log    *slog.Logger
	reg    *process.Registry
	budget *logstore.Budget // what every tracked process's log counts against
	bodies bodyBudget       // the request bodies being read and decoded
	// smallBodies is the budget of the bodies of the routes smallBodyLimit
	// bounds (kill, resize): large bodies that fill bodies, read slowly,
	// leave them room, so that a process can still be signalled.
	smallBodies bodyBudget
	headers     headerBudget            // the request headers being read
	spare       atomic.Pointer[spareFD] // the API listener's spare descriptor (see spareFD), once it serves
	streams     chan struct{}           // one element for each log stream open, MaxStreams of them
	hs          *http.Server
	handler     http.Handler
	ctx         context.Context    // the base of every request's context
	cancel      context.CancelFunc // ends streams, waits and attachments at Shutdown
	stopped     chan struct{}      // closed once Shutdown stopped every process
	watchers    sync.WaitGroup     // one watch goroutine per tracked process
	deadlines   deadlines          // the timeouts of waits for a process
	ports       portWatch          // looks at the ports that ready calls wait for
	matching    chan struct{}      // one element for each ready pattern matching a piece now (see matchSlots)
	expiry      *expiry            // forgets records kept on_exit_ttl when they are due
	inputs      sync.Map           // id -> *inputwatch.Watcher, for processes with open input
	interacts   sync.Map           // id -> *turns, for processes that had an interact call
	hijacked    sync.WaitGroup     // attach handlers, which http.Server does not wait for
	stdinMu     sync.Mutex         // makes the stdin budget's check and the write one step
	// background runs the checks that a shell starts (probes.go) and the
	// stops of what forgotten records left (ended.go); Shutdown waits for it.
	background sync.WaitGroup
	metrics    *metrics
	ms         *http.Server // serves ServeMetrics' listener
	// conns counts the connections under MaxConnections: the API's, on
	// every listener Serve serves, and those of BoundListener's.
	conns *connCount
	// idle holds the API's connections, on every listener Serve serves,
	// so that the idlest can be closed to make room, for another of the
	// API's or one of BoundListener's.
	idle *idleConns
	// beside counts BoundListener's connections, under half MaxConnections.
	beside  besideBound
	once    sync.Once // runs Shutdown's work once
	shutErr error
	// heartbeat is the period of a stream's keep-alive comments, in
	// nanoseconds; tests shorten it while the server serves.
	heartbeat atomic.Int64
	// writeTimeout bounds the write of one stream event, in nanoseconds;
	// tests shorten it while the server serves.
	writeTimeout atomic.Int64
	// bodyIdle bounds the wait for a request body's next byte, in
	// nanoseconds; tests shorten it while the server serves.
	bodyIdle atomic.Int64
	// bodyGrace is bodyGrace, in nanoseconds; tests shorten it while the
	// server serves.
	bodyGrace atomic.Int64
	// restBytes and restFor bound the reading of a body's rest after an
	// answer that did not need it; tests lower them while it serves.
	restBytes, restFor atomic.Int64
	// refuse bounds the reading of a connection refused past
	// MaxConnections (see refuseConn); tests lengthen it while it serves.
	refuse refuseTimes
	// leasePort leases a session's port: portlease.Acquire, which tests
	// replace while the server serves, to see how its failures are
	// answered without spoiling the machine's lease directory.
	leasePort atomic.Pointer[func() (*portlease.Lease, error)]

	mu      sync.Mutex // guards everything below
	hosts   map[string]struct{}
	closing bool
	// The drain (drain.go): draining once it began; owed counts the
	// requests in flight that are owed an answer and the work begun with
	// BeginWork; drained is closed, and drainDone set, once a drain found
	// nothing left.
	draining  bool
	drainDone bool
	// linger is drainLinger, in nanoseconds; tests lengthen it while the
	// server serves.
	linger atomic.Int64
	// drainLingers says the drain began with work in flight, whose end
	// is followed by drainLinger; lingering is the timer of that wait.
	drainLingers bool
	lingering    *time.Timer
	drained      chan struct{}
	owed         int
	// The last check that a shell starts (probes.go).
	shellChecking, shellChecked bool
	shellErr                    error
	shellCheckedAt              time.Time
	active                      [slotCount]int           // processes not yet ended, per slot
	textHeld                    int64                    // the text of the processes not yet ended (lifecycle.go)
	releases                    map[string]held          // the tracked processes that hold their claims still, by id
	sessions                    map[string]*sessionEntry // by session id
	naming                      map[string]chan struct{} // the names being created with uniqueName, closed once done
	ended                       endedRecords             // the ended records kept, in the order they ended
}

// New returns a Server with opts.
func New(opts Options) (*Server, error) {
	if opts.Token == "" {
		return nil, errors.New("server: empty token")
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.LogRetention <= 0 {
		opts.LogRetention = logstore.DefaultRetention
	}
	if opts.LogBudget <= 0 {
		opts.LogBudget = DefaultLogBudget
	}
	if opts.MaxCommandBytes <= 0 {
		opts.MaxCommandBytes = DefaultMaxCommandBytes
	}
	if opts.ExitTTL <= 0 {
		opts.ExitTTL = DefaultExitTTL
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	asked := opts.MaxConnections
	opts.MaxConnections = fitConnections(opts.MaxConnections)
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.MaxEnded <= 0 {
		opts.MaxEnded = DefaultMaxEnded
	}
	if opts.StdinBudget <= 0 {
		opts.StdinBudget = DefaultStdinBudget
	}
	if opts.CommandTextBudget <= 0 {
		opts.CommandTextBudget = DefaultCommandTextBudget
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = Version()
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		reg:      process.NewRegistry(),
		budget:   logstore.NewBudget(opts.LogBudget),
		stopped:  make(chan struct{}),
		hosts:    make(map[string]struct{}),
		sessions: make(map[string]*sessionEntry),
		naming:   make(map[string]chan struct{}),
		releases: make(map[string]held),
		drained:  make(chan struct{}),
		streams:  make(chan struct{}, opts.MaxStreams),
		matching: make(chan struct{}, matchSlots()),
		conns:    new(connCount),
		idle:     newIdleConns(false),
	}
	if opts.MaxConnections < asked {
		s.log.Warn("connections bounded below --max-connections, to half the limit of open files", "maxConnections", opts.MaxConnections, "asked", asked)
	}
	s.heartbeat.Store(int64(heartbeat))
	s.writeTimeout.Store(int64(writeTimeout))
	s.bodyIdle.Store(int64(bodyIdle))
	s.bodyGrace.Store(int64(bodyGrace))
	s.restBytes.Store(restBytes)
	s.restFor.Store(int64(restFor))
	s.linger.Store(int64(drainLinger))
	acquire := portlease.Acquire
	s.leasePort.Store(&acquire)
	for _, h := range opts.AllowedHosts {
		s.hosts[hostcheck.Canonical(h)] = struct{}{}
	}
	s.bodies.limit, s.bodies.what = 2*opts.BodyLimit, "twice --body-limit"
	s.smallBodies.limit, s.smallBodies.what = smallBodiesBudget, "kill's and resize's own budget"
	s.headers.limit = headerLimit
	s.expiry = &expiry{ttl: opts.ExitTTL, max: opts.MaxEnded, forget: s.forgetExpired}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.metrics = newMetrics(s)
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.pattern, s.wrap(rt))
	}
	none := s.wrap(route{pattern: "/", handler: noRoute(mux)})
	mux.Handle("/", none)
	s.handler = cleanPaths(mux, none)
	s.hs = s.httpServer(s.handler)
	s.ms = s.httpServer(s.metricsMux())
	s.ms.IdleTimeout = metricsIdleTimeout
	s.ms.ReadHeaderTimeout = metricsIdleTimeout
	s.ms.WriteTimeout = metricsWriteTimeout
	return s, nil
}

// httpServer returns the http.Server that serves h for the server.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ReadHeaderTimeout: 10 * time.Second,
		// OPTIONS * reaches the handler, which answers it as any request
		// it has no route for: net/http answered it itself, 200, for any
		// Host and with no token.
		DisableGeneralOptionsHandler: true,
		IdleTimeout:                  2 * time.Minute,
		ConnContext:                  withConn,
		ConnState:                    connState,
		ErrorLog:                     slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
	}
}

// routes is the API: every route, its handler, whether it needs the
// token, and the query parameters it reads (any other is refused).
func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", s.healthz, true, nil, false},
		{"GET /livez", s.livez, true, nil, false},
		{"GET /readyz", s.readyz, true, nil, false},
		{"GET /metrics", s.serveMetrics, false, nil, false},

		{"POST /v1/processes", s.startProcess, false, nil, true},
		{"POST /v1/processes/run", s.runProcess, false, nil, true},
		{"GET /v1/processes", s.listProcesses, false, []string{"state", "kind", "sessionId", "name", "pid", "limit", "cursor"}, false},
		{"GET /v1/processes/{id}", s.getProcess, false, nil, false},
		{"DELETE /v1/processes/{id}", s.deleteProcess, false, nil, false},
		{"POST /v1/processes/{id}/kill", s.killProcess, false, nil, false},
		{"GET /v1/processes/{id}/wait", s.waitProcess, false, []string{"timeout"}, false},
		{"GET /v1/processes/{id}/logs", s.logs, false, []string{"cursor", "limit", "encoding"}, false},
		{"GET /v1/processes/{id}/logs/stream", s.streamLogs, false, []string{"cursor", "encoding"}, false},
		{"POST /v1/processes/{id}/stdin", s.writeStdin, false, []string{"eof"}, false},
		{"POST /v1/processes/{id}/resize", s.resize, false, nil, false},
		{"GET /v1/processes/{id}/attach", s.attach, false, nil, false},
		{"POST /v1/processes/{id}/interact", s.interact, false, nil, false},
		{"GET /v1/processes/{id}/ready", s.ready, false, []string{"port", "pattern", "timeout"}, false},

		{"POST /v1/sessions", s.createSession, false, nil, true},
		{"GET /v1/sessions", s.listSessions, false, nil, false},
		{"GET /v1/sessions/{id}", s.getSession, false, nil, false},
		{"DELETE /v1/sessions/{id}", s.deleteSession, false, nil, false},
		{"POST /v1/sessions/{id}/commands", s.submitCommand, false, nil, true},
		{"POST /v1/sessions/{id}/commands/run", s.runCommand, false, nil, true},
	}
}

// MaxConnections returns the bound of the API's connections: Options'
// MaxConnections, lowered to half the limit of open files when over it
// (see fitConnections). A surface served beside the API shares it, through
// BoundListener.
func (s *Server) MaxConnections() int { return s.opts.MaxConnections }

// Handler returns the API as an http.Handler, for a caller that serves it
// itself; Host checks then know only loopback names and AllowedHosts.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until Shutdown. It returns nil after
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.addListenHosts(ln.Addr())
	s.log.Info("serving", "addr", ln.Addr().String(), "version", s.opts.Version)
	s.checkShell()
	spare := newSpareFD()
	s.spare.Store(spare)
	// When full, the connection idle longest is closed to make room, so
	// that idle ones, which need no token to open, cannot keep every
	// other client out; a write that waits on its client does not make
	// one idle, as streams and attachments wait on slow readers.
	bounded := jsonErrorListener{Listener: ln, max: s.opts.MaxConnections, open: s.conns, headers: &s.headers, spare: spare,
		idle: s.idle, refuse: &s.refuse,
		full: fmt.Sprintf("the daemon has %d connections open, its most (--max-connections), each serving a request or with one waiting: try again once some are answered", s.opts.MaxConnections)}
	if err := s.hs.Serve(bounded); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting requests, ends every stream and attachment, ends
// every process and session the server started (descendants included), and
// returns once they are all gone or ctx is done. Calling it again returns
// the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.cancel()
		s.deadlines.stop()
		// Handlers may be blocked on a process (a stdin write it does not
		// read): they end with it, so processes are stopped while the HTTP
		// server drains rather than after.
		httpDone := make(chan error, 1)
		go func() { httpDone <- s.hs.Shutdown(ctx) }()
		metricsDone := make(chan error, 1)
		go func() { metricsDone <- s.ms.Shutdown(ctx) }()
		s.stopAll(ctx)
		// Every process has ended, and with it every handler that waited
		// on one. A connection still open after a grace is a client slow
		// to send its request or its body, which would hold net/http's
		// Shutdown until ctx ends (a byte a second does): it is closed.
		late := time.AfterFunc(closeGrace, func() {
			_ = s.hs.Close()
			_ = s.ms.Close()
		})
		err := cmp.Or(<-httpDone, <-metricsDone)
		late.Stop()
		s.hijacked.Wait()
		s.background.Wait()
		close(s.stopped)
		s.watchers.Wait()
		s.expiry.stop()
		s.shutErr = err
	})
	return s.shutErr
}

// closeGrace is how long Shutdown lets requests finish once every process
// has ended, before it closes the connections still open.
const closeGrace = 2 * time.Second

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.health())
}

// probedMethods are the methods noRoute looks for routes with.
var probedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete}

// noRoute answers what no route takes: 405 with the methods that the path
// has routes for in Allow, else 404. The catch-all "/" that renders these
// as JSON hides every method of every path from the mux, which would
// otherwise answer 405 itself, in text.
func noRoute(mux *http.ServeMux) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var allow []string
		for _, m := range probedMethods {
			// A target that is no path (OPTIONS *, CONNECT's host:port,
			// HTTP/2's preface PRI *) is the catch-all's too: the mux
			// answered CONNECT itself, in text.
			if !strings.HasPrefix(r.URL.Path, "/") || unclean(r.URL.EscapedPath()) {
				break // the mux's pattern is that of the path cleaned
			}
			probe := &http.Request{Method: m, Host: r.Host, URL: r.URL, Header: http.Header{}}
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			return errorf(http.StatusNotFound, api.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return errorf(http.StatusMethodNotAllowed, api.CodeUnsupportedOperation,
			"%s is not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
	}
}

// cleanPaths passes a request whose path has an empty, "." or ".."
// segment to none rather than to mux, which would redirect it to the path
// cleaned: an id left empty (GET /v1/processes//wait) got a 307 with an
// HTML body, not the API's answer, and a client that followed it reached
// another resource. So does it a request whose target is no path.
func cleanPaths(mux *http.ServeMux, none http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A target that is no path (OPTIONS *, CONNECT's host:port,
		// HTTP/2's preface PRI *) is the catch-all's too: the mux
		// answered CONNECT itself, in text.
		if !strings.HasPrefix(r.URL.Path, "/") || unclean(r.URL.EscapedPath()) {
			none.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// unclean reports whether the path p has an empty segment, or a "." or
// "..": one the mux would redirect.
func unclean(p string) bool {
	if strings.Contains(p, "//") {
		return true
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// Version is the version of the conch module in this binary, or "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path == "github.com/conchsh/conch" && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "devel"
}

// fitConnections returns n, the bound of the API's connections, lowered to
// half of this process's limit of open files (RLIMIT_NOFILE) when it is
// over it: idle connections, which need no token to open, took every
// descriptor of a daemon started under a limit below the default bound
// (ulimit -n 1024), and nothing answered until they went. The other half
// is left to the sessions and processes.
func fitConnections(n int) int {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil || rl.Cur == ^uint64(0) /* RLIM_INFINITY */ {
		return n
	}
	if half := rl.Cur / 2; uint64(n) > half {
		return max(1, int(half))
	}
	return n
}
