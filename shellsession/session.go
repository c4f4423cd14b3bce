package shellsession

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/queue"
	"github.com/conchsh/conch/sentinel"
	"github.com/google/uuid"
	"mvdan.cc/sh/v3/syntax"
)

// ErrSessionEnded is returned by Submit once the session's shell has ended,
// and is the error of commands that were queued behind its end. It matches
// process.ErrUnsupported too; use errors.Is.
var ErrSessionEnded error = sessionEnded{}

type sessionEnded struct{}

func (sessionEnded) Error() string        { return "session ended" }
func (sessionEnded) Is(target error) bool { return target == process.ErrUnsupported }

// Options configure a new Session. Zero values mean the defaults.
type Options struct {
	// ID is the session's id; empty means a new random one.
	ID string
	// Name is a label for listings.
	Name string
	// Cwd is the shell's first working directory, an absolute path; empty
	// means the daemon's.
	Cwd string
	// Env is added to the daemon's environment.
	Env map[string]string
	// Shell is a name or absolute path resolved by internal/shells; empty means bash.
	Shell string
	// Login starts a login shell, which reads the profile files. Otherwise no
	// rc or profile file is read.
	Login bool
	// Retention bounds each command's retained output in bytes; zero means
	// logstore.DefaultRetention.
	Retention int
	// Ports are loopback ports leased for the session, reported in Info.
	Ports []int
	// StreamDir is where the session makes the directory of its stream
	// FIFOs; empty means /dev/shm when writable, else the temp directory.
	StreamDir string
	// StopGrace is how long a command has to stop after the interrupt at its
	// execution timeout before the session is ended, after TERM from Stop
	// before KILL (and after that before Stop gives up), and the shell after
	// a signal that ends the session before KILL; zero means
	// process.StopGrace.
	StopGrace time.Duration
	// DrainDelay bounds how long a command's output is still read after its
	// shell died under it; zero means process.DrainDelay.
	DrainDelay time.Duration
}

// Session is one long-lived shell and its serial queue of commands. It
// implements process.Process: it is the process of its shell.
type Session struct {
	id        string
	opts      Options
	sh        shells.Shell
	cmd       *exec.Cmd
	stdin     *os.File // the shell's script input
	inputName string   // what /proc says the shell's fd 0 is while it reads stdin: "pipe:[N]"
	fifoDir   string
	log       *logstore.Log // the session's own log stays empty: its shell's output is the engine's
	createdAt time.Time
	queue     queue.Queue
	diag      *diagReader
	parser    *syntax.Parser // used by the queue's goroutine only
	script    *os.File       // the file commands are sourced from; the queue's goroutine only
	wg        sync.WaitGroup // every goroutine the session starts
	exited    chan struct{}  // closed once the shell has exited and been reaped
	done      chan struct{}  // closed once the session is terminal
	waitErr   error          // the shell's wait status; read after exited is closed

	writeMu sync.Mutex // serializes writes to stdin

	mu         sync.Mutex // guards the fields below
	state      process.State
	result     *process.Result
	exitedAt   time.Time
	cwd        string
	lastStatus int
	flags      string // the shell's option letters ($-) after the last command that reported them
	seq        int
	commands   []*Command
	drains     map[*os.File]bool // stream ends still read after their command ended
	pool       []*stream         // clean streams for the next commands
	epoll      *epoller          // an empty epoll set for the next command's reader
	live       int               // streams made and not discarded: in the pool or in use
	closing    bool
}

// New starts a session's shell and returns once it is ready to run a
// command, or ctx is done.
func New(ctx context.Context, opts Options) (*Session, error) {
	sh, err := shells.Resolve(opts.Shell)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", process.ErrInvalidArgument, err)
	}
	if err := process.CheckEnv(opts.Env); err != nil {
		return nil, err
	}
	opts.StopGrace = process.OrDefault(opts.StopGrace, process.StopGrace)
	opts.DrainDelay = process.OrDefault(opts.DrainDelay, process.DrainDelay)
	if opts.Cwd != "" {
		if !filepath.IsAbs(opts.Cwd) {
			return nil, fmt.Errorf("%w: cwd %q is not an absolute path", process.ErrInvalidArgument, opts.Cwd)
		}
		if fi, err := os.Stat(opts.Cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: cwd %q is not a directory", process.ErrInvalidArgument, opts.Cwd)
		}
	}
	// Commands start with default signal dispositions even when this
	// process was started with some ignored.
	proctree.ResetChildSignals()

	id := opts.ID
	if id == "" {
		id = uuid.NewString()
	}
	base := opts.StreamDir
	if base == "" {
		base = fifoBase()
	}
	dir, err := os.MkdirTemp(base, "conch-")
	if err != nil {
		return nil, fmt.Errorf("make stream directory: %w", err)
	}
	s := &Session{
		id: id, opts: opts, sh: sh, fifoDir: dir,
		log:       logstore.New(logstore.Options{Keep: logstore.KeepNone}),
		createdAt: time.Now(),
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		state:     process.Starting,
		cwd:       opts.Cwd,
		drains:    make(map[*os.File]bool),
		parser:    newParser(sh),
	}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ready := s.newCommand(CommandOptions{Cmd: ":"})
	if err := s.queue.Push(ready); err != nil {
		s.Close()
		return nil, err
	}
	select {
	case <-ready.done:
	case <-ctx.Done():
		tail := s.diag.tail()
		s.Close()
		return nil, fmt.Errorf("start %s: %w (the shell said: %q)", sh.Path, ctx.Err(), tail)
	}
	if r := ready.result; r.Reason != process.Exited {
		s.Close()
		return nil, fmt.Errorf("start %s: the shell did not come up: %s", sh.Path, s.diag.tail())
	}
	s.mu.Lock()
	if s.state == process.Starting {
		s.state = process.Running
	}
	s.mu.Unlock()
	return s, nil
}

// fifoBase is where sessions keep their stream FIFOs: /dev/shm when it can,
// out of the way of commands that clean /tmp.
func fifoBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && syscall.Access("/dev/shm", 2) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// start starts the shell and the goroutines that watch it.
func (s *Session) start() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start shell: %w", err)
	}
	dr, dw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("start shell: %w", err)
	}
	argv := shellArgs(s.sh, s.opts.Login)
	cmd := &exec.Cmd{
		Path:        s.sh.Path,
		Args:        argv,
		Dir:         s.opts.Cwd,
		Env:         shellEnv(s.opts.Env, s.opts.Login, proctree.Tag(s.id)),
		Stdin:       r,
		Stdout:      dw,
		Stderr:      dw,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	var first string // what the shell is sent before its init script
	if readsInputLink(s.sh) {
		first, err = s.linkInput(cmd)
	}
	if err == nil {
		err = proctree.Start(cmd)
	}
	r.Close()
	dw.Close()
	if err != nil {
		w.Close()
		dr.Close()
		return fmt.Errorf("start %s: %w", s.sh.Path, err)
	}
	s.cmd, s.stdin = cmd, w
	if rc, err := w.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { s.inputName, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) })
	}
	s.diag = newDiagReader(dr)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.diag.run()
	}()
	go func() {
		defer s.wg.Done()
		s.waitErr = proctree.Wait(cmd)
		close(s.exited)
		s.shellEnded()
	}()
	if _, err := w.WriteString(first + initScript(s.sh)); err != nil {
		return fmt.Errorf("start %s: %w", s.sh.Path, err)
	}
	return nil
}

// linkInput starts cmd in the session's directory, reading its input
// through inputLink, and returns the line that moves it to its cwd.
func (s *Session) linkInput(cmd *exec.Cmd) (string, error) {
	cwd := cmd.Dir
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	cmd.Dir = s.fifoDir
	return linkInput(s.fifoDir, cwd, cmd.Env)
}

// write sends text to the shell.
func (s *Session) write(text string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_, err := s.stdin.WriteString(text)
	return err
}

// CommandOptions describe a command submitted to a session.
type CommandOptions struct {
	// Cmd is the command text: anything a user could type, on any number of lines.
	Cmd string
	// Name is a label for listings.
	Name string
	// Stdin is closed (the default: reads get end-of-file) or open (bytes
	// come from WriteStdin until CloseStdin).
	Stdin process.Stdin
	// ExecutionTimeout, when positive, interrupts the command that long
	// after it starts (not while it waits in the queue), and ends the session
	// if it has not stopped Options.StopGrace later.
	ExecutionTimeout time.Duration
	// KeepLogs is the command's log policy.
	KeepLogs logstore.KeepLogs
}

// Submit queues a command and returns at once. The command runs after every
// command submitted before it. After the session has ended, Submit returns
// an error wrapping ErrSessionEnded.
func (s *Session) Submit(opts CommandOptions) (*Command, error) {
	switch opts.Stdin {
	case "", process.StdinClosed, process.StdinOpen:
	default:
		return nil, fmt.Errorf("%w: stdin %q: want closed or open", process.ErrInvalidArgument, opts.Stdin)
	}
	keep, err := logstore.ParseKeepLogs(string(opts.KeepLogs))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", process.ErrInvalidArgument, err)
	}
	opts.KeepLogs = keep
	s.mu.Lock()
	ended := s.state == process.Terminal || s.closing
	s.mu.Unlock()
	select {
	case <-s.exited:
		ended = true
	default:
	}
	if ended {
		return nil, fmt.Errorf("session %s: %w", s.id, ErrSessionEnded)
	}
	c := s.newCommand(opts)
	if err := s.queue.Push(c); err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, ErrSessionEnded)
	}
	s.mu.Lock()
	s.commands = append(s.commands, c)
	s.mu.Unlock()
	return c, nil
}

// Run submits a command and waits for it to end or ctx to be done. A
// command that fails is not an error: its Result says how it ended.
func (s *Session) Run(ctx context.Context, opts CommandOptions) (*Command, process.Result, error) {
	c, err := s.Submit(opts)
	if err != nil {
		return nil, process.Result{}, err
	}
	r, err := process.Wait(ctx, c)
	return c, r, err
}

// Commands returns the session's commands in submission order.
func (s *Session) Commands() []*Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Command(nil), s.commands...)
}

// recordEnd records how a command left the shell, the one place that
// writes it: its exit status, which the next command's frame restores as $?,
// and, when its end markers told them (e non-nil), the shell's working
// directory and option letters. It returns the working directory now.
func (s *Session) recordEnd(status int, e *sentinel.End) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastStatus = status
	if e != nil {
		s.cwd, s.flags = e.Cwd, e.Flags
	}
	return s.cwd
}

// Cwd returns the shell's working directory after its last command.
func (s *Session) Cwd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}

// Shell returns the resolved shell.
func (s *Session) Shell() shells.Shell { return s.sh }

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Log returns the session's own log, which stays empty: what its shell
// writes outside commands is the engine's business.
func (s *Session) Log() *logstore.Log { return s.log }

// Done is closed once the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Info describes the session as the process of its shell.
func (s *Session) Info() process.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := process.Info{
		ID: s.id, Name: s.opts.Name, Kind: process.KindSession, State: s.state,
		System: true, SessionID: s.id, Shell: s.sh.Name, ResolvedShell: s.sh.Path,
		Login: s.opts.Login, Cwd: s.cwd, Stdin: process.StdinClosed,
		KeepLogs: s.log.Keep(), CreatedAt: s.createdAt, StartedAt: s.createdAt,
		ExitedAt: s.exitedAt, Ports: s.opts.Ports,
	}
	if s.cmd != nil && s.cmd.Process != nil {
		i.PID = s.cmd.Process.Pid
	}
	if s.result != nil {
		r := *s.result
		i.Result = &r
	}
	return i
}

// Kill with SIGINT interrupts the running command; any other signal ends
// the session: its shell and every process under it.
func (s *Session) Kill(sig syscall.Signal, _ time.Duration, _ syscall.Signal) error {
	if sig == syscall.SIGINT {
		if c := s.running(); c != nil {
			return c.Kill(sig, 0, 0)
		}
		return nil
	}
	s.end(&process.Result{Reason: process.Signaled, Signal: process.SignalName(sig)}, sig)
	return nil
}

// WriteStdin fails: a session's own stdin belongs to the engine.
func (s *Session) WriteStdin([]byte) error { return process.ErrStdinNotOpen }

// CloseStdin fails: a session's own stdin belongs to the engine.
func (s *Session) CloseStdin() error { return process.ErrStdinNotOpen }

// Resize fails: sessions have no terminal.
func (s *Session) Resize(process.TerminalSize) error { return process.ErrNotPTY }

// Stop ends the session like Close.
func (s *Session) Stop(context.Context) error { return s.Close() }

// Close ends the shell and every process started under it — descendants,
// those that called setsid and those orphaned since — and waits for the
// session's goroutines. Commands still queued fail with ErrSessionEnded.
// Close is idempotent.
func (s *Session) Close() error {
	s.end(&process.Result{Reason: process.Signaled, Signal: "KILL"}, syscall.SIGKILL)
	s.wg.Wait()
	if s.script != nil { // the queue is closed: nothing writes it any more
		s.script.Close()
	}
	os.RemoveAll(s.fifoDir)
	return nil
}

// end kills the shell's tree with sig, fails queued commands and waits for
// the running one, then marks the session terminal with r unless the shell
// had already ended by itself.
func (s *Session) end(r *process.Result, sig syscall.Signal) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closing = true
	s.mu.Unlock()
	s.killTree(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-s.exited:
		case <-time.After(s.opts.StopGrace):
			s.killTree(syscall.SIGKILL)
		}
	}
	<-s.exited
	s.queue.Close(fmt.Errorf("session %s: %w", s.id, ErrSessionEnded))
	s.finish(r)
	s.closeDrains()
}

// killTree signals the shell, its descendants and the processes tagged with
// the session's id that left its tree.
func (s *Session) killTree(sig syscall.Signal) {
	proctree.Signal(s.cmd.Process.Pid, sig, true)
	proctree.SignalTagged(s.id, sig)
}

// finish marks the session terminal with r, or with what its shell's exit
// status says when r is nil or the shell ended by itself first.
func (s *Session) finish(r *process.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == process.Terminal {
		return
	}
	if st, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && (r == nil || !s.closing) {
		switch {
		case st.Exited():
			r = &process.Result{Reason: process.Exited, ExitCode: ptr(st.ExitStatus())}
		case st.Signaled() && r == nil:
			r = &process.Result{Reason: process.Signaled, Signal: process.SignalName(st.Signal())}
		}
	}
	if r == nil {
		r = &process.Result{Reason: process.Lost}
	}
	s.state = process.Terminal
	s.result = r
	s.exitedAt = time.Now()
	s.log.Close()
	close(s.done)
}

// shellEnded ends the session as soon as its shell has exited by itself —
// killed from outside, or ended by a command (exit, exec, set -e) — whether
// or not a command was running: later submissions fail with
// ErrSessionEnded, queued commands fail, and a running command ends (see
// shellExited) before the session is marked terminal.
func (s *Session) shellEnded() {
	s.mu.Lock()
	closing := s.closing
	s.closing = true
	s.mu.Unlock()
	if closing {
		return // end runs: it marks the session terminal
	}
	s.killTree(syscall.SIGKILL) // what the dead shell left behind
	s.queue.Close(fmt.Errorf("session %s: %w", s.id, ErrSessionEnded))
	s.finish(nil)
	s.closeDrains()
}

// running returns the command now running, if any.
func (s *Session) running() *Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.commands {
		if c.state() == process.Running {
			return c
		}
	}
	return nil
}

// addDrain and dropDrain track stream ends still read after their command.
func (s *Session) addDrain(f *os.File) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing && s.state == process.Terminal {
		return false
	}
	s.drains[f] = true
	return true
}

func (s *Session) dropDrain(f *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.drains, f)
}

// closeDrains stops reading streams that background jobs still hold.
func (s *Session) closeDrains() {
	s.mu.Lock()
	fs := s.drains
	s.drains = make(map[*os.File]bool)
	s.mu.Unlock()
	for f := range fs {
		f.Close()
	}
	s.closePool()
	s.stdin.Close()
}

func ptr[T any](v T) *T { return &v }
