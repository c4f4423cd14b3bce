package shellsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/queue"
	"github.com/conchsh/conch/sentinel"
	"golang.org/x/sys/unix"
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
	// ID is the session's id; empty means a new random one. An id given
	// must be unique among the sessions, processes and code contexts this
	// program starts: the engine finds the shell's descendants by it (see
	// proctree.Tag), so ending one session ends every live process tagged
	// with the same id, another's too.
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
	// A missing one is made (and left after Close). It must be a directory
	// of this process's user or root that no other user may write, or a
	// shared one with the sticky bit (as /dev/shm is): anything else found
	// there (a symbolic link, a file, another user's directory, one others
	// may write) is left as it is, never followed, and a directory is made
	// beside it in its place, named StreamDir-N, which every session and
	// code context of the process then uses (see resident.Dir).
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
	// ReadyWithin bounds how long the shell has to come up and run its
	// first command — a login shell reads its profile first — before New
	// kills it and every process under it and fails with an error wrapping
	// process.ErrInvalidArgument; zero means process.ReadyWithin.
	ReadyWithin time.Duration
	// Containment is where the session gets a cgroup of its own, entered
	// as the shell starts, which everything it starts stays in and ends with
	// it; nil contains nothing (processes that leave the tree are found by
	// tags only).
	Containment *containment.Root
	// Limits bound the session's cgroup, its zero fields taken from the
	// Containment's defaults; a limit the host cannot apply is refused with
	// an error wrapping containment.ErrUnsupported.
	Limits containment.Limits
}

// Session is one long-lived shell and its serial queue of commands. It
// implements process.Process: it is the process of its shell.
type Session struct {
	id         string
	opts       Options
	sh         shells.Shell
	h          *resident.Host
	cmd        *exec.Cmd       // the shell, once started
	exited     <-chan struct{} // closed once the shell has exited and been reaped
	diag       *resident.Diag
	stdin      *os.File                       // the shell's script input
	input      *rawcall.Writer                // writes stdin; guarded by writeMu
	inputName  string                         // what /proc says the shell's fd 0 is while it reads stdin: "pipe:[N]", "socket:[N]"
	dir        *resident.Dir                  // holds fifoDir, which it may move (see makeDir)
	fifoDir    string                         // the queue's goroutine only, once the shell started
	scriptName string                         // the file commands are sourced from: fifoDir/cmd; likewise
	parser     *syntax.Parser                 // used by the queue's goroutine only
	script     rawcall.File                   // the file commands are sourced from; the queue's goroutine only
	scriptBuf  []byte                         // room for what is written to it (see writeScript); likewise
	frame      rawcall.File                   // the file frames run from (see writeFrame); the queue's goroutine only
	status     rawcall.File                   // the file that gives $? a status (see statusFramed); the queue's goroutine only
	endFile    string                         // the last command's end file (see writeFrame); the queue's goroutine only
	templates  map[frameKey]sentinel.Template // frames by the streams they use (see newFrame); the queue's goroutine only
	// own is the path by which the shell writes the frame's markers for
	// the engine once its stderr is closed (see closeOwn), or "";
	// ownOnly says that it is closed: set once the shell is up (see
	// lookOwn), before any command but the first is framed.
	own     string
	ownOnly bool
	// upTo is how much of its own output the shell had written once it
	// came up: what it says after that is what its end may quote (see
	// exitedBetween).
	upTo int64

	// written counts the bytes written to stdin; readTo, once the shell
	// has exited, how many of them it read (-1: not known; see
	// noteInputRead). Guarded by writeMu.
	written, readTo int64

	// lastEnded is the command that ended last, until the next starts (see
	// endedBefore): weak, since the session keeps nothing of an ended
	// command (see Commands), and one nobody holds asks for no tree.
	// Guarded by mu.
	lastEnded weak.Pointer[Command]

	idleGen   uint64         // commands given to the idle looks (see watchIdle); guarded by idleWatch.mu
	wg        sync.WaitGroup // the goroutines of commands
	closeOnce sync.Once      // the teardown of Close, which closes the files above once

	writeMu sync.Mutex // serializes writes to stdin
	wbuf    []byte     // what is written; guarded by writeMu

	// intMu is held while an interrupt is signalled to the shell, from the
	// look that its command has not ended on; a command's frame waits for
	// it before it is sent (see signalINT).
	intMu         sync.Mutex
	intSinceFrame bool // an interrupt was signalled since the last frame; guarded by intMu

	mu  sync.Mutex // guards the fields below
	cwd string
	// cwdTooLong says that cwd is empty because the shell's directory's
	// path is longer than the engine reports (sentinel.MaxCwd).
	cwdTooLong bool
	// cwdID is the directory cwd named when it was looked at, and
	// cwdPath cwd's Path: while both it and the shell's own directory
	// (procCwd) are that directory, cwd still holds (see checkCwd).
	cwdID      rawcall.ID
	cwdPath    rawcall.Path
	procCwd    rawcall.Path // /proc/PID/cwd of the shell, once it runs
	lastStatus int
	flags      string // the shell's option letters ($-) after the last command that reported them
	seq        int
	commands   []*Command // the commands that have not ended, in submission order
	pool       []*stream  // clean streams for the next commands
	epolls     []*epoller // empty epoll sets for the next commands' readers (see spareEpolls)
	live       int        // streams made and not discarded: in the pool or in use
	// lateOut is the stdout stream of the last command ended by its end
	// marker, whose shell may still run that command's end line, and write
	// the real marker to it by its path (see sentinel.Late): until a later
	// command's marker comes, which the shell writes after it. lateMissed
	// is set when a command took its streams while lateOut was not in the
	// pool (see takeStreams).
	lateOut    *stream
	lateMissed bool

	readerIDs atomic.Int32 // the last id given to a stream's reader
	awaiting  *Command     // the command whose streams are read where it is waited for (see Command.await)
	// unsettled is the readers of the last command, ended with nothing
	// forked, whose streams' end-of-file had not come yet (see
	// readLoop.settleLater); the next command's start settles them.
	unsettled *readLoop
	held      heldStreams // streams background jobs hold after their command's end
	kickFn    func()      // kickAwaiting, made once: a method value made for each command is an allocation
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
	// The id tags the shell's environment (CONCH_TREE), which cannot hold
	// NUL: the shell failed to start, with an error that was no
	// ErrInvalidArgument.
	if err := process.CheckArg("id", opts.ID); err != nil {
		return nil, err
	}
	opts.StopGrace = process.OrDefault(opts.StopGrace, process.StopGrace)
	opts.DrainDelay = process.OrDefault(opts.DrainDelay, process.DrainDelay)
	opts.ReadyWithin = process.OrDefault(opts.ReadyWithin, process.ReadyWithin)
	if opts.Cwd != "" {
		if !filepath.IsAbs(opts.Cwd) {
			return nil, fmt.Errorf("%w: cwd %s is not an absolute path", process.ErrInvalidArgument, api.Quote(opts.Cwd))
		}
		if fi, err := os.Stat(opts.Cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: cwd %s is not a directory", process.ErrInvalidArgument, api.Quote(opts.Cwd))
		}
	}
	id := opts.ID
	if id == "" {
		id = process.NewID()
	}
	base := opts.StreamDir
	if base == "" {
		base = resident.PrivateBase()
	}
	dir, err := resident.NewDir(base, "conch-")
	if err != nil {
		return nil, fmt.Errorf("make stream directory: %w", err)
	}
	fifoDir := dir.Path()
	s := &Session{id: id, opts: opts, sh: sh, dir: dir, fifoDir: fifoDir, scriptName: filepath.Join(fifoDir, "cmd"), cwd: opts.Cwd, parser: newParser(sh), readTo: -1}
	s.h = resident.New(resident.Config{
		ID: id, Name: opts.Name, Noun: "session", Ended: ErrSessionEnded,
		Containment: opts.Containment, Limits: opts.Limits,
		Ports: opts.Ports, StopGrace: opts.StopGrace,
		Interrupt: s.interrupt, Describe: s.describe,
		Reaped:  s.noteInputRead,
		Exited:  s.shellExited,
		Release: s.releaseAll,
	})
	s.exited = s.h.Exited()
	s.kickFn = s.kickAwaiting
	if err := s.start(); err != nil {
		if s.cmd != nil { // the shell started, and closed its input at once
			return nil, s.didNotStart(ctx)
		}
		dir.Remove()
		return nil, err
	}
	// The first command, which sees the shell come up, runs here in the new
	// session's idle queue, whose turn it gives back before New returns:
	// run by a worker, it let go of the turn after New had returned now and
	// then, and a command sent at once was queued rather than run on its
	// caller's goroutine. A shell whose profile blocks never runs it:
	// bounded, the wait ends, and so does the shell with its tree.
	bounded, cancel := context.WithTimeout(ctx, opts.ReadyWithin)
	defer cancel()
	ready := s.newCommand(CommandOptions{Cmd: upCheck(sh)})
	if beforeReady != nil {
		beforeReady(s)
	}
	if s.h.Queue.Claim() {
		ready.runHere(bounded)
	} else if err := s.h.Queue.Push(ready); errors.Is(err, queue.ErrClosed) {
		// Nothing else has the session yet: its shell exited, and the
		// queue closed with it, before the first command was sent.
		return nil, s.didNotStart(ctx)
	} else if err != nil {
		s.Close()
		return nil, err
	}
	select {
	case <-ready.done:
	case <-bounded.Done():
		if ctx.Err() == nil {
			return nil, s.notReady()
		}
		tail := s.diag.Tail()
		s.Close()
		return nil, fmt.Errorf("start %s: %w (the shell said: %q)", sh.Path, ctx.Err(), tail)
	}
	if err := ctx.Err(); err != nil {
		// Both came at once, and select took the shell's readiness: the
		// caller has gone all the same, and would hold a session nobody
		// knows of.
		s.Close()
		return nil, fmt.Errorf("start %s: %w", sh.Path, err)
	}
	if err := ready.prepErr; err != nil {
		// The engine could not prepare the first command (no descriptors
		// left): the daemon's limit, not the shell's fault.
		s.Close()
		return nil, fmt.Errorf("start %s: %w", sh.Path, err)
	}
	// A shell that exited before it ran the first command (its profile
	// ran exit) ended that command with its own exit status.
	select {
	case <-s.exited:
		return nil, s.didNotStart(ctx)
	default:
	}
	if exe := s.replacedBy(); exe != "" {
		return nil, s.refuse("was replaced by " + exe + " as it started (its login profile runs exec)")
	}
	if r := ready.result; r.Reason != process.Exited {
		return nil, s.didNotStart(ctx)
	}
	if !wentUp(ready.Log()) {
		return nil, s.refuse("lost what it was sent before its first command: its login profile reads its standard input, the session's commands (read, cat)")
	}
	s.lookOwn()
	s.upTo = s.diag.Written()
	s.h.Ready()
	return s, nil
}

// lookOwn notes, once the shell is up, whether the init script closed its
// stderr (see closeOwn): then later frames write their markers for the
// engine by path alone, else to stderr alone. The first command's frame,
// sent with the init script, tries both.
func (s *Session) lookOwn() {
	if s.own == "" {
		return
	}
	_, err := os.Lstat("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/fd/2")
	if s.ownOnly = errors.Is(err, fs.ErrNotExist); !s.ownOnly {
		s.own = ""
	}
}

// beforeReady, when a test sets it, is called as New is about to send its
// first command.
var beforeReady func(*Session)

// didNotStart closes the session whose shell did not come up and says why:
// how it ended, when it did within a moment, and what it said. Its cause
// is what the session was asked to start (the shell, its profile, its
// environment, its limits), not the daemon: invalid_argument.
func (s *Session) didNotStart(ctx context.Context) error {
	return s.refuse(cmp.Or(s.h.StartEnded(ctx), "did not come up"))
}

// notReady closes the session whose shell, still running, did not run
// its first command within Options.ReadyWithin, and says so. Before that
// command a login shell reads its profile, which may block; a non-login
// shell reads no file (its ENV is /dev/null).
func (s *Session) notReady() error {
	how := resident.NotReady(s.opts.ReadyWithin)
	switch {
	case strings.Contains(s.diag.Tail(), "Resource temporarily unavailable"):
		// Its forks failed, and bash retries each for a while: the
		// session's pids limit (its own or the daemon's default) is
		// the likely cause, more than its profile.
		how += " (its forks failed: a pids limit may be too small for it)"
	case s.opts.Login:
		if exe := s.replacedBy(); exe != "" {
			how += " (its login profile replaced it with " + exe + ": exec)"
		} else {
			how += " (its login profile may block)"
		}
	}
	return s.refuse(how)
}

// refuse closes the session whose shell did not come up, how says why,
// and returns the error that refuses it, with what the shell said.
func (s *Session) refuse(how string) error {
	tail := s.diag.Tail()
	s.Close()
	return fmt.Errorf("%w: start %s: the shell %s; it said: %q", process.ErrInvalidArgument, s.sh.Path, how, tail)
}

// start starts the shell and the goroutines that watch it.
func (s *Session) start() error {
	r, w, err := shellInput(s.sh)
	if err != nil {
		return fmt.Errorf("start shell: %w", err)
	}
	argv := shellArgs(s.sh, s.opts.Login)
	cmd := &exec.Cmd{
		Path:  s.sh.Path,
		Args:  argv,
		Dir:   s.opts.Cwd,
		Env:   shellEnv(s.opts.Env, s.opts.Login, proctree.Tag(s.id)),
		Stdin: r,
	}
	var first string // what the shell is sent before its init script
	if readsInputLink(s.sh) {
		if first, err = s.linkInput(cmd); err != nil {
			err = fmt.Errorf("start %s: %w", s.sh.Path, err)
		}
	}
	if err == nil {
		// Set before the shell runs: one that exits at once is ended
		// (releaseAll closes its input) on the goroutine that reaps it.
		s.stdin = w
		err = s.h.Start(cmd) // its error names the shell already, or says what was refused
	}
	if rc, cerr := r.SyscallConn(); cerr == nil {
		// The shell's end: a socket's two ends are two inodes.
		rc.Control(func(fd uintptr) { s.inputName, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) })
	}
	r.Close()
	if err != nil {
		w.Close()
		return err
	}
	s.cmd, s.diag = cmd, s.h.Diag()
	wrc, err := w.SyscallConn()
	if err != nil {
		return fmt.Errorf("start %s: %w", s.sh.Path, err)
	}
	s.input = rawcall.NewWriter(wrc)
	if closesStderr(s.sh) {
		s.own = s.h.OwnPath()
	}
	init := upLine + first + initScript(s.sh, s.opts.Env, s.opts.Login, s.own)
	s.opts.Env = nil // the shell has it now (see resident.Host.Start)
	if _, err := w.WriteString(init); err != nil {
		return fmt.Errorf("start %s: %w", s.sh.Path, err)
	}
	return nil
}

// linkInput starts cmd in the session's directory, reading its input
// through inputLink, and returns the line that moves it to its cwd.
func (s *Session) linkInput(cmd *exec.Cmd) (string, error) {
	cwd := cmd.Dir
	if cwd == "" {
		dir, removed, err := procfs.Cwd()
		if err != nil {
			return "", err
		}
		cwd = dir
		if removed {
			// No path leads to a removed directory but this process's
			// own link to it.
			cwd = "/proc/" + strconv.Itoa(os.Getpid()) + "/cwd"
		}
	}
	cmd.Dir = s.fifoDir
	return linkInput(s.fifoDir, cwd, cmd.Env)
}

// write sends the concatenation of text to the shell, in one write.
func (s *Session) write(text ...string) (from int64, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	b := s.wbuf[:0]
	for _, t := range text {
		b = append(b, t...)
	}
	from = s.written
	n, err := s.input.Write(b)
	s.written += int64(n)
	if cap(b) <= maxKeptWrite {
		s.wbuf = b
	}
	return from, err
}

// noteInputRead notes, as the shell is reaped, how much of its input it
// read: what was written less what its pipe still holds (FIONREAD). On a
// socket (ksh93) that is not known.
func (s *Session) noteInputRead() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.readTo = -1
	if s.sh.Family == shells.Ksh || s.stdin == nil {
		return
	}
	rc, err := s.stdin.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		// TIOCINQ is FIONREAD, which a pipe answers at either end.
		if n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			s.readTo = s.written - int64(n)
		}
	})
}

// unread reports whether the shell exited without reading a byte of what
// was written to its input from from on.
func (s *Session) unread(from int64) bool {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.readTo >= 0 && s.readTo <= from
}

// maxKeptWrite bounds the buffer a session keeps for its writes to the
// shell: a command's frame fits, a long text carried on its line does not.
const maxKeptWrite = 4 << 10

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
	// if it has not stopped Options.StopGrace later. Zero means none; a
	// negative one is refused with ErrInvalidArgument, as package exec and
	// the daemon's API refuse it.
	ExecutionTimeout time.Duration
	// KeepLogs is the command's log policy.
	KeepLogs logstore.KeepLogs
	// HoldLogs starts the command's log held (logstore.Options.Held): the
	// caller calls Log().Release once it has read what it waited for.
	HoldLogs bool
}

// Submit queues a command and returns at once. The command runs after every
// command submitted before it. After the session has ended, Submit returns
// an error wrapping ErrSessionEnded.
func (s *Session) Submit(opts CommandOptions) (*Command, error) {
	c, err := s.prepare(opts)
	if err != nil {
		return nil, err
	}
	if err := s.h.Queue.Push(c); err != nil {
		return nil, s.h.ErrEnded()
	}
	s.record(c)
	return c, nil
}

// prepare checks opts and makes their command.
func (s *Session) prepare(opts CommandOptions) (*Command, error) {
	switch opts.Stdin {
	case "", process.StdinClosed, process.StdinOpen:
	default:
		return nil, fmt.Errorf("%w: stdin %s: want closed or open", process.ErrInvalidArgument, api.Quote(string(opts.Stdin)))
	}
	if opts.ExecutionTimeout < 0 {
		return nil, fmt.Errorf("%w: negative executionTimeout", process.ErrInvalidArgument)
	}
	keep, err := logstore.ParseKeepLogs(string(opts.KeepLogs))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", process.ErrInvalidArgument, err)
	}
	opts.KeepLogs = keep
	if s.h.Ended() {
		return nil, s.h.ErrEnded()
	}
	return s.newCommand(opts), nil
}

// record adds a submitted command to the session's list, unless it has
// ended already (see forget).
func (s *Session) record(c *Command) {
	s.mu.Lock()
	if c.state() != process.Terminal {
		s.commands = append(s.commands, c)
	}
	s.mu.Unlock()
}

// forget takes a command that has ended off the session's list.
func (s *Session) forget(c *Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.commands {
		if x == c {
			s.commands = slices.Delete(s.commands, i, i+1)
			return
		}
	}
}

// Run submits a command and waits for it to end or ctx to be done. A
// command that fails is not an error: its Result says how it ended. A ctx
// that has ended already submits nothing: Run returns its error and no
// command. Once submitted, the command runs on when ctx ends.
//
// When no command runs or waits, the command runs on the caller's
// goroutine, which would only wait for it otherwise (see Begin).
func (s *Session) Run(ctx context.Context, opts CommandOptions) (*Command, process.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, process.Result{}, err
	}
	c, err := s.Begin(opts)
	if err != nil {
		return nil, process.Result{}, err
	}
	c.TakeTurn(ctx)
	select {
	case <-c.done:
		return c, c.result, nil
	case <-ctx.Done():
		return c, process.Result{}, ctx.Err()
	}
}

// Begin submits a command as Submit does; the caller then calls the
// command's TakeTurn, on the goroutine that would wait for the command.
// When no command runs or waits in the session, the command holds the
// queue's turn from Begin on and TakeTurn runs it there, until it ends or
// ctx is done: from the frame sent to the shell to the bytes that end it,
// nothing hops between goroutines; once ctx is done, a goroutine of its own
// waits for the rest of it. Otherwise the command was queued and TakeTurn
// returns at once.
//
// While the command holds the turn, the commands submitted after it wait
// for it: the caller must call TakeTurn or end the command — with Kill,
// Stop or Cancel, which fail a command that has not run and give its turn
// back (TakeTurn then returns at once) — and should do so soon. Closing the
// session, or its end, fails a command whose turn was never taken, as it
// fails queued ones. Between Begin and TakeTurn the caller may record the
// command (the daemon registers it so that it can be listed, signalled or
// deleted); a command ended meanwhile never reaches the shell.
func (s *Session) Begin(opts CommandOptions) (*Command, error) {
	c, err := s.prepare(opts)
	if err != nil {
		return nil, err
	}
	if !s.h.Queue.Hold(c) {
		if err := s.h.Queue.Push(c); err != nil {
			return nil, s.h.ErrEnded()
		}
		s.record(c)
		return c, nil
	}
	c.holdsTurn = true
	s.record(c)
	return c, nil
}

// Commands returns the session's commands that have not ended, in
// submission order. The session keeps nothing of a command that has ended:
// whoever submitted it holds it as long as it wants.
func (s *Session) Commands() []*Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Command(nil), s.commands...)
}

// recordEnd records how a command left the shell, the one place that
// writes it: its exit status, which the next command's frame restores as $?,
// and, when its end markers told them (e non-nil), the shell's working
// directory and option letters. It returns the working directory now, which
// is empty, with tooLong true, when its path is longer than the engine
// reports (sentinel.MaxCwd): as the last end markers told, for a command
// that ended without them.
func (s *Session) recordEnd(status int, e *sentinel.End) (cwd string, tooLong bool) {
	if e != nil {
		if tooLong = e.CwdTooLong; !tooLong {
			cwd, tooLong = s.checkCwd(e.Cwd)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastStatus = status
	if e != nil {
		if cwd != s.cwd {
			// Else the string the last command's record holds stays:
			// each stream's scanner keeps a string of its own, and a
			// record that kept a copy where it started and another where
			// it ended held both.
			s.cwd = cwd
		}
		s.flags = e.Flags
		s.cwdTooLong = tooLong
	}
	return s.cwd, s.cwdTooLong
}

// checkCwd returns the working directory a command's end line reported
// ($PWD) when the shell is there, as pwd prints it (by the path cd took,
// symbolic links and all); otherwise the shell's own, from /proc: a command
// can set PWD, or unset it, without changing directory (PWD=/etc), or
// rename the directory it is in. A directory removed since is kept as $PWD
// names it, or by the path it had when $PWD names none.
//
// Most often one call, made raw (rawcall) as those below: the link
// /proc/PID/cwd reads as $PWD, so the directory $PWD names is the shell's
// now (the kernel's getcwd gives the same path). A $PWD through a symbolic
// link reads otherwise, and costs two stats after that call when the last
// command reported it too: the shell's directory and the one $PWD names,
// each the one last seen. Through package syscall, the first call after the process
// was idle wakes the runtime's monitor thread: 15 µs more of the engine's
// CPU a command, and a context switch. tooLong says that the shell's
// directory, named by walking up from it, has a path longer than
// sentinel.MaxCwd: cwd is then empty.
func (s *Session) checkCwd(reported string) (cwd string, tooLong bool) {
	s.mu.Lock()
	last, id, path, proc := s.cwd, s.cwdID, s.cwdPath, s.procCwd
	s.mu.Unlock()
	if proc != (rawcall.Path{}) && strings.HasPrefix(reported, "/") &&
		!strings.HasSuffix(reported, " (deleted)") && proc.LinksTo(reported) {
		// (A removed directory reads as its path and " (deleted)": a
		// $PWD ending so is looked at below.)
		return reported, false
	}
	if reported == last && reported != "" && path != (rawcall.Path{}) {
		if there, ok := proc.ID(); ok && there == id {
			if at, ok := path.ID(); ok && at == id {
				return reported, false
			}
		}
	}
	pid := strconv.Itoa(s.cmd.Process.Pid)
	if proc == (rawcall.Path{}) {
		proc, _ = rawcall.NewPath("/proc/" + pid + "/cwd")
		s.mu.Lock()
		s.procCwd = proc
		s.mu.Unlock()
	}
	there, ok := proc.ID()
	if !ok {
		return reported, false // the shell is gone
	}
	cwd, tooLong = s.lookCwd(pid, reported, there)
	if p, err := rawcall.NewPath(cwd); err == nil && !tooLong {
		s.mu.Lock()
		s.cwdID, s.cwdPath = there, p
		s.mu.Unlock()
	}
	return cwd, tooLong
}

// lookCwd is checkCwd's look at the shell, whose directory is there.
func (s *Session) lookCwd(pid, reported string, there rawcall.ID) (cwd string, tooLong bool) {
	if strings.HasPrefix(reported, "/") {
		if p, err := rawcall.NewPath(reported); err == nil {
			if at, ok := p.ID(); ok && at == there {
				return reported, false
			}
		}
	}
	real, removed, err := procfs.CwdOf(pid)
	if errors.Is(err, syscall.ENAMETOOLONG) {
		// Past PATH_MAX: neither path could be looked at whole.
		switch cwd, err := longCwd(pid, reported); {
		case err == nil:
			return cwd, false
		case errors.Is(err, errCwdTooLong):
			return "", true
		}
	}
	if err != nil || removed && strings.HasPrefix(reported, "/") {
		// A removed directory is kept as $PWD names it, or, when $PWD
		// names none (a shell started there: dash, mksh, busybox leave it
		// empty, zsh "."), as the kernel does.
		return reported, false
	}
	return real, false
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
func (s *Session) Log() *logstore.Log { return s.h.Log() }

// Done is closed once the session has ended.
func (s *Session) Done() <-chan struct{} { return s.h.Done() }

// Info describes the session as the process of its shell.
func (s *Session) Info() process.Info { return s.h.Info() }

func (s *Session) describe(i *process.Info) {
	i.Shell, i.ResolvedShell, i.Login = s.sh.Name, s.sh.Path, s.opts.Login
	i.Cwd = s.Cwd()
}

// Kill is the session's kill (see resident.Host.Kill): INT interrupts the
// running command, a signal that ends no process reaches the shell and
// its processes, any other ends the session.
func (s *Session) Kill(sig syscall.Signal, after time.Duration, to syscall.Signal) error {
	return s.h.Kill(sig, after, to)
}

func (s *Session) interrupt() error {
	if c := s.running(); c != nil {
		return c.Kill(syscall.SIGINT, 0, 0)
	}
	return nil
}

// WriteStdin fails: a session's own stdin belongs to the engine.
func (s *Session) WriteStdin(p []byte) error { return s.h.WriteStdin(p) }

// CloseStdin fails: a session's own stdin belongs to the engine.
func (s *Session) CloseStdin() error { return s.h.CloseStdin() }

// Resize fails: sessions have no terminal.
func (s *Session) Resize(size process.TerminalSize) error { return s.h.Resize(size) }

// Stop ends the session like Close.
func (s *Session) Stop(context.Context) error { return s.Close() }

// Close ends the shell and every process started under it — descendants,
// those that called setsid and those orphaned since — and waits for the
// session's goroutines. Commands still queued fail with ErrSessionEnded.
// Close is idempotent and safe for concurrent use: every call returns
// once the session has ended.
func (s *Session) Close() error {
	s.teardown()
	// What outlived a kill that ended the session before goes now, rather
	// than at its escalation.
	s.h.KillLeft()
	return nil
}

// teardown ends the session and lets go of its files, once.
func (s *Session) teardown() {
	// Once: two calls at once closed the command and frame files both, and
	// the second close could hit a descriptor the process had opened anew
	// under the same number meanwhile. A call made while another tears down
	// waits for it.
	s.closeOnce.Do(func() {
		s.h.Close()
		s.wg.Wait()
		s.script.Close() // the queue is closed: nothing writes them any more
		s.frame.Close()
		s.status.Close()
		s.dir.Remove()
	})
}

// shellExited ends the session whose shell has exited, once the command it
// ran, if any, has seen the exit and given back the queue's turn; that
// command ends after the session (see Command.endAfterSession).
func (s *Session) shellExited() {
	s.kickAwaiting() // it waits for its streams, not for the exit
	var why func() string
	if s.running() == nil && s.h.CameUp() {
		why = s.exitedBetween
	}
	s.h.EndedByItself(why)
	// Ended so, the session lets go of what only Close let go of: its
	// command files and their directory, a descriptor and a directory
	// under the stream directory each, which its record would otherwise
	// hold until it was deleted. It waits for the session's goroutines,
	// this one among them: on a goroutine of its own. What outlived a
	// kill that ended the session gets its escalation when due (see
	// resident.Host.KillLeft).
	go s.teardown()
}

// exitedBetween says why the session ended when its shell exited while no
// command ran, which no command's result says: how it ended, and what it
// said last on its own output since it came up — an idle bash with TMOUT
// set logs out, saying "timed out waiting for input: auto-logout" — or ""
// when the OOM killer ended it, which the result says already.
func (s *Session) exitedBetween() string {
	st := s.h.ExitState()
	// One that never came up is refused by New, which says why.
	if st == nil || !s.h.CameUp() || s.h.OOMKilledIt() {
		return ""
	}
	how := "the shell exited between commands"
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		how = "the shell was killed between commands"
	}
	how += " (" + st.String() + ")"
	if said := s.diag.LastLine(s.upTo, lastWords); said != "" {
		how += ": " + said
	}
	return how
}

// lastWords bounds what a session's end quotes of what its shell said last.
const lastWords = 256

// kickAwaiting wakes the command that reads its streams where it is waited
// for, if one does (see Command.kick).
func (s *Session) kickAwaiting() {
	s.mu.Lock()
	c := s.awaiting
	s.mu.Unlock()
	if c != nil {
		c.kick()
	}
}

// reaped reports whether the shell has exited and been reaped.
func (s *Session) reaped() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
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

// releaseAll closes, at the session's end, the clean streams and the shell's
// input.
func (s *Session) releaseAll() {
	s.dropUnsettled()
	s.closePool()
	s.stdin.Close()
	s.unwatchIdle()
}

// replacedBy returns the program the shell's process runs when it is no
// longer the shell started (a login profile's exec zsh), else "". Such a
// program is sent frames made for another shell, and the session would be
// reported as the shell asked for: bash taking dash's frames works, mksh's
// do not, and zsh exits on bash's init script.
func (s *Session) replacedBy() string {
	link := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/exe"
	now, err := os.Stat(link)
	if err != nil {
		return ""
	}
	started, err := os.Stat(s.sh.Path)
	if err != nil || os.SameFile(now, started) {
		return ""
	}
	exe, err := os.Readlink(link)
	if err != nil {
		return "another program"
	}
	return exe
}
