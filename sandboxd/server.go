package sandboxd

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// Defaults of Options' zero fields.
const (
	DefaultMetadataPrefix  = "SANDBOX_"
	DefaultStreamChunkSize = 4096
	// DefaultStopGrace is how long a process has between TERM and KILL when
	// the server shuts down.
	DefaultStopGrace = 2 * time.Second
	// DefaultIOIdle is how long an upload's next bytes, a download's next
	// write, or a Start stream's next event, may take by default.
	DefaultIOIdle = 30 * time.Second
)

// Readiness says whether the daemon takes work. A daemon that embeds the
// Server plugs its own probes in here (a drain in progress, a shell that
// cannot start); /v1/health answers 503 when it says no.
type Readiness interface {
	Ready() bool
}

// StartFunc starts a process, as exec.Start does. A daemon that keeps its
// own record of processes wraps exec.Start to add each one to it; an error
// wrapping ErrUnavailable (the daemon drains) is answered UNAVAILABLE.
type StartFunc func(exec.Options) (*exec.Process, error)

// ErrUnavailable is what a StartFunc wraps when the daemon takes no new
// processes for now, as while it drains: the client should try again,
// elsewhere or later.
var ErrUnavailable = errors.New("unavailable")

// ErrStdinBudget is what an Options.WriteStdin wraps when the daemon's
// budget for the stdin of all its processes is full.
var ErrStdinBudget = errors.New("stdin budget full")

// Options configure a Server. Zero fields mean the defaults beside them.
type Options struct {
	// Root confines every file path and working directory; it must exist.
	Root string
	// MetadataPrefix selects the environment variables /v1/metadata serves;
	// empty means DefaultMetadataPrefix.
	MetadataPrefix string
	// Environ is the environment /v1/metadata serves from; nil means the
	// process's environment when New is called.
	Environ []string
	// StreamChunkSize bounds the bytes of one stdout or stderr event of
	// Start; zero means DefaultStreamChunkSize.
	StreamChunkSize int
	// StopGrace is the time between TERM and KILL at Shutdown; zero means
	// DefaultStopGrace.
	StopGrace time.Duration
	// LogRetention bounds the output kept per process, in bytes; zero means
	// the engine's default. A Start stream that falls further behind loses
	// the oldest output.
	LogRetention int
	// Start starts the processes; nil means exec.Start.
	Start StartFunc
	// WriteStdin, when set, queues b for p's stdin as p.WriteStdin does,
	// within a budget the daemon keeps for the stdin of all its processes
	// together (conch's --stdin-budget): a write over it is an error
	// wrapping ErrStdinBudget and a *process.StdinFullError whose Accepted
	// bytes were queued, and WriteStdin refuses it RESOURCE_EXHAUSTED. Nil
	// means p.WriteStdin, bounded by each process's own queue alone.
	WriteStdin func(p *exec.Process, b []byte) error
	// Work, when set, is called as a Start or Execute call begins, before
	// its process starts, and the end it returns once the call has
	// answered: a Start stream, once its exit was sent. A daemon that
	// drains counts the calls with it, since a stream whose process has
	// ended may still owe the client its output. An error wrapping
	// ErrUnavailable refuses the call UNAVAILABLE.
	Work func() (end func(), err error)
	// IOIdle bounds how long an upload's next bytes, a download's next
	// write, or a Start stream's next event (while the client's
	// flow-control window is full), may take: a client that stops sending
	// or reading for that long is let go, a Start stream's process killed;
	// zero means DefaultIOIdle.
	IOIdle time.Duration
	// Readiness, when set, is asked by /v1/health besides the server's own
	// state.
	Readiness Readiness
	// Host, when set, is asked whether a REST request's Host header names
	// this server; a request whose Host it refuses is answered 403. A
	// server on a loopback address sets it so that a web page cannot reach
	// it through DNS rebinding, whose requests name the page's domain.
	Host func(hostport string) bool
}

// Server serves the sandboxd API. Create it with New.
type Server struct {
	sandboxdpb.UnimplementedProcessServiceServer

	opts Options
	root string // Options.Root, absolute, symlinks evaluated
	// rootNames are the absolute paths a client names the root by: root,
	// and Options.Root as configured when that is another (a symlink).
	rootNames []string
	meta      map[string]string
	started   time.Time
	handler   http.Handler // the REST API
	start     StartFunc
	// parentsMade, when set (by tests), is called by a PUT between making
	// its file's parent directories and creating its temporary file there.
	parentsMade func(dir string)
	// looked, when set (by tests), is called by walk with the path of a
	// directory it has looked at and is about to open.
	looked func(dir string)
	// namedTemporary, when set (by tests), has a PUT's temporary file
	// named throughout, as on a file system without unnamed files.
	namedTemporary bool

	mu      sync.Mutex // guards the fields below
	closing bool
	nextID  int32
	byID    map[int32]*startedProcess  // processes of Start, by the id clients see
	live    map[*exec.Process]struct{} // every process started and not yet handled to its end
}

// New returns a Server with opts.
func New(opts Options) (*Server, error) {
	if opts.Root == "" {
		return nil, errors.New("sandboxd: empty root")
	}
	named, root, err := resolveRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, errors.New("sandboxd: root " + root + " is not a directory")
	}
	if opts.MetadataPrefix == "" {
		opts.MetadataPrefix = DefaultMetadataPrefix
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.StreamChunkSize <= 0 {
		opts.StreamChunkSize = DefaultStreamChunkSize
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.IOIdle <= 0 {
		opts.IOIdle = DefaultIOIdle
	}
	s := &Server{
		opts:      opts,
		root:      root,
		rootNames: slices.Compact([]string{root, named}),
		meta:      metadataEnv(opts.Environ, opts.MetadataPrefix),
		started:   time.Now(),
		start:     opts.Start,
		byID:      make(map[int32]*startedProcess),
		live:      make(map[*exec.Process]struct{}),
	}
	if s.start == nil {
		s.start = exec.Start
	}
	s.handler = s.routes()
	if opts.Host != nil {
		s.handler = checkHost(opts.Host, s.handler)
	}
	return s, nil
}

// Root returns the root every path is confined to, symlinks evaluated.
func (s *Server) Root() string { return s.root }

// RegisterGRPC registers the ProcessService with g.
func (s *Server) RegisterGRPC(g grpc.ServiceRegistrar) {
	sandboxdpb.RegisterProcessServiceServer(g, s)
}

// Ready reports whether the server takes work: not once Shutdown has
// begun, nor while Options.Readiness says no.
func (s *Server) Ready() bool {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	return !closing && (s.opts.Readiness == nil || s.opts.Readiness.Ready())
}

// Shutdown makes /v1/health answer 503 and refuses new processes, then
// ends every process the server started: TERM to each one's tree, KILL
// Options.StopGrace later to what is left, and KILL to everything when ctx
// is done first. It returns once they have all ended (their Start streams
// then end with their exit events) or, should some outlive KILL, when ctx is
// done. The listeners are the caller's: it closes them after, so health
// answers 503 until its port closes.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	procs := make([]*exec.Process, 0, len(s.live))
	for p := range s.live {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			if p.Stop(ctx) != nil {
				_ = p.Kill(syscall.SIGKILL, 0, 0)
			}
		})
	}
	wg.Wait()
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
