package localsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
)

// ErrStopped is returned by Run and Spawn once the session was stopped or
// destroyed; use errors.Is.
var ErrStopped = errors.New("sandbox session stopped")

// errNotNew is returned by the methods of a Session that New did not make
// (its zero value, or a nil pointer), which has no directory to resolve
// against and no port.
var errNotNew = errors.New("sandbox session not made by New: call localsandbox.New")

// errNilContext is returned, rather than a panic, by every method that
// takes a context when it is given a nil one.
var errNilContext = errors.New("nil context: pass context.Background() for none")

// ErrPortNotLeased is wrapped by PortEndpoint's error for a port the session
// did not lease; use errors.Is.
var ErrPortNotLeased = errors.New("port not leased by this session")

// Sandbox is what a session lets code run and touch: commands and files in
// its directory with its environment. Session implements it, and so does the
// value Session.Restricted returns, which offers nothing more: code handed
// that value cannot stop the session or reach its ports.
type Sandbox interface {
	// Dir returns the absolute working directory of the sandbox.
	Dir() string
	// Run runs a command and waits for it; see Session.Run.
	Run(ctx context.Context, opts RunOptions) (RunResult, error)
	// Spawn starts a command and returns at once; see Session.Spawn.
	Spawn(ctx context.Context, opts RunOptions) (*Process, error)
	// ReadFile reads a file; see Session.ReadFile.
	ReadFile(path string) (data []byte, ok bool, err error)
	// ReadTextFile reads a file as text; see Session.ReadTextFile.
	ReadTextFile(path string) (text string, ok bool, err error)
	// WriteFile writes a file; see Session.WriteFile.
	WriteFile(path string, data []byte) error
	// WriteTextFile writes a file from text; see Session.WriteTextFile.
	WriteTextFile(path, text string) error
}

// Session is a local sandbox: a working directory plus one leased loopback
// port. Processes started through it, or through its Restricted view, are
// tracked until they exit, so that Stop can end them. A Session is safe for
// concurrent use.
//
// Make one with New. A Session that New did not make (the zero value, a nil
// pointer) has no directory and no port: its Run, Spawn, file helpers and
// Stop return an error saying to call New, its Dir is "" and its Ports
// none.
type Session struct {
	dir   string
	env   map[string]string
	id    string // the value of SandboxEnv in every command's environment
	lease *portlease.Lease

	// mu is held for reading while a process starts and for writing by
	// Stop, so that no process starts unseen by Stop.
	mu      sync.RWMutex
	stopped bool

	procsMu sync.Mutex // guards procs
	procs   map[*Process]struct{}

	// begin starts a command's process: startProcess, or in tests one
	// whose end the engine sees late.
	begin func(command, dir string, env map[string]string, open bool) (started, error)
}

// Option configures a Session in New.
type Option func(*Session) error

// WithEnv adds env to the environment of every command the session runs, on
// top of this process's environment; RunOptions.Env is added on top of it.
// A name that is empty or holds "=" or NUL, or a value that holds NUL, is
// an error of New.
func WithEnv(env map[string]string) Option {
	return func(s *Session) error {
		if err := checkEnv(env); err != nil {
			return err
		}
		for k, v := range env {
			s.env[k] = v
		}
		return nil
	}
}

// New returns a session in dir, which must be an existing directory, with one
// loopback port leased (see portlease). A nil option is ignored, so that an
// option chosen by a condition may be left out as nil. A lease that fails is
// New's error, wrapping portlease.ErrNoFreePort (another try may work once
// other leases are released) or portlease.ErrLockDir (the machine's lease
// directory cannot be used by this user; none will).
func New(dir string, opts ...Option) (*Session, error) {
	if dir == "" {
		// filepath.Abs makes "" the process's own directory, which the
		// caller did not name.
		return nil, fmt.Errorf("new sandbox session: %w", ErrEmptyPath)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("new sandbox session: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("new sandbox session: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("new sandbox session: %s is not a directory", abs)
	}
	s := &Session{
		dir:   abs,
		env:   make(map[string]string),
		id:    process.NewID(),
		procs: make(map[*Process]struct{}),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, fmt.Errorf("new sandbox session: %w", err)
		}
	}
	if s.lease, err = portlease.Acquire(); err != nil {
		return nil, fmt.Errorf("new sandbox session: %w", err)
	}
	return s, nil
}

// Dir returns the session's absolute working directory, or "" for a
// Session that New did not make.
func (s *Session) Dir() string {
	if s == nil {
		return ""
	}
	return s.dir
}

// made returns errNotNew for a Session that New did not make: its
// relative paths would have been resolved against this process's working
// directory.
func (s *Session) made() error {
	if s == nil || s.lease == nil {
		return errNotNew
	}
	return nil
}

// isStopped reports whether Stop was called.
func (s *Session) isStopped() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stopped
}

// Ports returns the leased port: one, or none once the session is stopped.
func (s *Session) Ports() []int {
	if s.made() != nil || s.isStopped() {
		return nil
	}
	return []int{s.lease.Port()}
}

// PortEndpoint returns the URL of a leased port on 127.0.0.1 for protocol
// ("http" when empty, "ws", "https", ...), such as "ws://127.0.0.1:60479". It
// does not check that anything listens there. A port the session did not
// lease, or no longer holds, is an error wrapping ErrPortNotLeased.
func (s *Session) PortEndpoint(port int, protocol string) (string, error) {
	if protocol == "" {
		protocol = "http"
	}
	if !isScheme(protocol) {
		return "", fmt.Errorf("port endpoint: bad protocol %q", protocol)
	}
	if !slices.Contains(s.Ports(), port) {
		return "", fmt.Errorf("port endpoint %d: %w", port, ErrPortNotLeased)
	}
	return protocol + "://127.0.0.1:" + strconv.Itoa(port), nil
}

// Restricted returns a view of the session with Run, Spawn and the file
// helpers, in the same directory and with the same environment, and nothing
// else: it is not a *Session, so code handed it can neither stop the session
// nor reach its ports. Processes it starts are the session's, and Stop ends
// them too.
func (s *Session) Restricted() Sandbox { return restricted{s} }

// restricted is the value of Session.Restricted. Its only field is
// unexported and it has no methods beyond Sandbox's.
type restricted struct{ s *Session }

func (r restricted) Dir() string { return r.s.Dir() }
func (r restricted) Run(ctx context.Context, opts RunOptions) (RunResult, error) {
	return r.s.Run(ctx, opts)
}
func (r restricted) Spawn(ctx context.Context, opts RunOptions) (*Process, error) {
	return r.s.Spawn(ctx, opts)
}
func (r restricted) ReadFile(path string) ([]byte, bool, error)     { return r.s.ReadFile(path) }
func (r restricted) ReadTextFile(path string) (string, bool, error) { return r.s.ReadTextFile(path) }
func (r restricted) WriteFile(path string, data []byte) error       { return r.s.WriteFile(path, data) }
func (r restricted) WriteTextFile(path, text string) error          { return r.s.WriteTextFile(path, text) }

// Stop ends the session: it sends SIGTERM to every process started through
// it or its Restricted view that is still running, to their current
// descendants, and to the processes they left behind that were reparented
// away (found by SandboxEnv in their environment, so not those that cleared
// it), once to each, since many programs take a second SIGTERM for "quit
// now" and would cut their graceful shutdown short; then SIGKILL to those still running 5 s later (process.StopGrace),
// and it releases the leased port. A Run in flight returns with exit code
// 143, or 137 when its command outlived the grace (it handles or ignores
// SIGTERM). Stop does not wait for the processes to exit, and leaves the
// directory as it is. Run and Spawn return ErrStopped afterwards. Calling
// Stop again does nothing.
func (s *Session) Stop() error {
	if err := s.made(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()

	s.procsMu.Lock()
	procs := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.procsMu.Unlock()
	s.terminate(procs)
	// A timer, not a goroutine that waits: Stop returns at once, and a
	// harness that ends before the grace leaves nothing waiting behind.
	time.AfterFunc(stopGrace, func() {
		for _, p := range procs {
			if !p.exited() {
				p.p.Kill(syscall.SIGKILL, 0, 0)
			}
		}
		s.signalOrphans(syscall.SIGKILL)
	})
	return s.lease.Release()
}

// stopGrace is how long Stop leaves the processes it sent SIGTERM before it
// sends SIGKILL to those still running, as the rest of conch does.
const stopGrace = process.StopGrace

// Destroy is Stop: a local session has nothing more to tear down.
func (s *Session) Destroy() error { return s.Stop() }

// checkEnv returns an error for a variable the environment cannot hold: a
// name that is empty or holds "=" or NUL, a value that holds NUL.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("bad environment variable name %q", k)
		}
		if strings.Contains(v, "\x00") {
			return fmt.Errorf("bad environment variable %s: its value holds NUL, which no environment can", k)
		}
	}
	return nil
}

// isScheme reports whether p is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func isScheme(p string) bool {
	for i, c := range p {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return p != ""
}
