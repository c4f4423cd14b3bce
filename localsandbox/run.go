package localsandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Shell is the program that runs every command, with "-c" and the command.
const Shell = "/bin/bash"

// RunOptions say what Run and Spawn run.
type RunOptions struct {
	// Command is the command line, run by Shell with -c. Empty is an
	// error.
	Command string
	// WorkingDirectory is where the command runs. Empty means the
	// session's directory; a relative path is resolved against it as the
	// file helpers resolve one, by the kernel: "link/.." is the directory
	// above where link leads (cd -P, not bash's plain cd). It must exist.
	WorkingDirectory string
	// Env is added to the environment of the command, on top of this
	// process's environment and the session's WithEnv. Nil adds nothing.
	// Its names and values are checked as WithEnv's.
	Env map[string]string
	// OpenStdin keeps the command's stdin open for Spawn, to be written
	// with the Process's WriteStdin; its WaitingForInput then says when
	// the command waits for it. Run ignores it: its command's stdin is
	// closed.
	OpenStdin bool
	// OutputLimit bounds each of Run's Stdout and Stderr (bytes): a longer
	// output keeps its first and its last bytes, about half the limit
	// each, as the daemon's run answers do, and RunResult says how much of
	// its middle was left out. Zero means DefaultOutputLimit; negative is
	// an error. Spawn ignores it: a Process's readers give every byte
	// retained.
	OutputLimit int
}

// DefaultOutputLimit is what Run keeps of each of a command's stdout and
// stderr when RunOptions.OutputLimit is zero: 1 MiB, as in a run answer of
// the daemon. Run holds about that much of each while the command runs,
// however much it writes.
const DefaultOutputLimit = 1 << 20

// RunResult is how a command run by Run ended and what it wrote.
type RunResult struct {
	// ExitCode is the command's exit status, or 128 plus the signal number
	// when a signal ended it (143 for SIGTERM), as a shell shows in $?.
	ExitCode int
	// Stdout and Stderr hold what the command wrote, bytes unchanged, up to
	// RunOptions.OutputLimit bytes each (DefaultOutputLimit when it is
	// zero). Of a longer output they hold its head and its tail, about
	// half the limit each, the cut moved to a line end when one is within
	// 256 bytes of it, else to a character boundary.
	Stdout, Stderr string
	// StdoutOmitted and StderrOmitted are the bytes left out between the
	// head and the tail of Stdout and Stderr to keep them within the
	// OutputLimit; zero when they hold the whole output.
	StdoutOmitted, StderrOmitted int64
	// Truncated is true when output was dropped because the command wrote
	// faster than it could be collected, beyond the retention of its log;
	// Stdout and Stderr then lack their dropped parts, which the omitted
	// counts do not include.
	Truncated bool
}

// Run runs opts.Command with Shell -c, stdin closed, and waits for it. A
// command that fails is a result with its exit code, not an error: a missing
// program is exit code 127 with bash's message in Stderr. Run returns an
// error when the command could not be started (a missing working directory
// is an error that names it and wraps fs.ErrNotExist), with ErrStopped once
// the session is stopped, and with ctx.Err() when ctx ends first: then the
// command and all its descendants are sent SIGKILL, and Run returns once the
// command has exited. A ctx that has ended already starts nothing.
//
// Run returns once the command has exited and its output has been read to
// its end: a job the command left running that holds its stdout or stderr
// open is read for up to 2 s more (process.DrainDelay), what it writes then
// kept in the result, and is left running. A ctx that ends in that time,
// after the command exited, changes nothing: Run returns the result.
func (s *Session) Run(ctx context.Context, opts RunOptions) (RunResult, error) {
	opts.OpenStdin = false
	limit := opts.OutputLimit
	switch {
	case limit < 0:
		return RunResult{}, fmt.Errorf("RunOptions.OutputLimit %d: want a number of bytes, 0 or more (0: DefaultOutputLimit)", limit)
	case limit == 0:
		limit = DefaultOutputLimit
	}
	p, err := s.start(ctx, opts)
	if err != nil {
		return RunResult{}, err
	}
	defer p.release()

	// The follower copies each frame as it comes, into bounded buffers,
	// and lets the log reuse its room: it must keep up with the command,
	// or retention drops what it has not reached.
	stdout, stderr := headTail{limit: limit}, headTail{limit: limit}
	res := RunResult{}
	// Follow ends at the end of the log, which the process closes when it
	// has exited and its output is drained; ctx is handled by the kill
	// that start registered.
	p.log.FollowLent(context.Background(), 0, func(ev logstore.Event) bool {
		switch {
		case ev.Frame != nil && ev.Frame.Channel == logstore.Stdout:
			stdout.write(ev.Frame.Data)
		case ev.Frame != nil && ev.Frame.Channel == logstore.Stderr:
			stderr.write(ev.Frame.Data)
		case ev.Warning != nil:
			res.Truncated = true
		}
		return true
	})
	code, err := p.Wait(context.Background())
	if err != nil {
		return RunResult{}, err
	}
	res.ExitCode = code
	res.Stdout, res.StdoutOmitted = stdout.result()
	res.Stderr, res.StderrOmitted = stderr.result()
	return res, nil
}

// lineSlack is how far a cut between the head and the tail of an output
// moves to fall at a line end, as in the daemon's run answers.
const lineSlack = 256

// headTail keeps the first and the last bytes of an output, limit in all:
// the head, half of it, and the tail, the rest, and counts what it leaves
// out between.
type headTail struct {
	limit   int
	head    []byte
	tail    []byte // the last bytes, up to twice the tail's room: see write
	omitted int64
}

func (o *headTail) tailRoom() int { return o.limit - o.limit/2 }

func (o *headTail) write(p []byte) {
	n := min(len(p), o.limit/2-len(o.head))
	o.head = append(grow(o.head, n, o.limit/2), p[:n]...)
	p = p[n:]
	room := o.tailRoom()
	if len(p) >= room {
		o.omitted += int64(len(o.tail) + len(p) - room)
		o.tail = append(grow(o.tail[:0], room, 2*room), p[len(p)-room:]...)
		return
	}
	// The tail grows to twice its room before its oldest bytes are moved
	// out, so that each byte is moved at most once.
	if len(o.tail)+len(p) > 2*room {
		drop := len(o.tail) + len(p) - room
		o.omitted += int64(drop)
		o.tail = o.tail[:copy(o.tail, o.tail[drop:])]
	}
	o.tail = append(grow(o.tail, len(p), 2*room), p...)
}

// grow returns b with room for n more bytes, in a buffer that holds at
// most most: twice as large each time, where append grows a large slice by
// a quarter, copying it each time.
func grow(b []byte, n, most int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	grown := make([]byte, len(b), min(most, max(2*cap(b), len(b)+n)))
	copy(grown, b)
	return grown
}

// result returns the output kept, made in one copy, and the bytes left
// out of its middle.
func (o *headTail) result() (string, int64) {
	head, tail := o.head, o.tail
	if over := len(tail) - o.tailRoom(); over > 0 {
		o.omitted += int64(over)
		tail = tail[over:]
	}
	if o.omitted > 0 {
		h, t := cutHead(head), cutTail(tail)
		o.omitted += int64(len(head) - h + t)
		head, tail = head[:h], tail[t:]
	}
	var b strings.Builder
	b.Grow(len(head) + len(tail))
	b.Write(head)
	b.Write(tail)
	return b.String(), o.omitted
}

// cutHead returns how much of a head to keep before omitted bytes: up to
// just after its last newline within lineSlack bytes of its end, else up to
// the end of its last whole character.
func cutHead(h []byte) int {
	from := max(0, len(h)-lineSlack)
	if i := bytes.LastIndexByte(h[from:], '\n'); i >= 0 {
		return from + i + 1
	}
	for i := len(h) - 1; i >= 0 && i >= len(h)-utf8.UTFMax; i-- {
		if utf8.RuneStart(h[i]) {
			if !utf8.FullRune(h[i:]) {
				return i
			}
			break
		}
	}
	return len(h)
}

// cutTail returns where to start a tail after omitted bytes: just after its
// first newline within lineSlack bytes, unless that is its last byte, else
// at the start of its first character.
func cutTail(t []byte) int {
	if i := bytes.IndexByte(t[:min(len(t), lineSlack)], '\n'); i >= 0 && i+1 < len(t) {
		return i + 1
	}
	for i := 0; i < len(t) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(t[i]) {
			return i
		}
	}
	return 0
}

// Spawn starts opts.Command as Run does and returns at once. When ctx ends
// before the command exits, the command and all its descendants are sent
// SIGKILL and the process's Wait returns ctx.Err(). Errors are Run's.
func (s *Session) Spawn(ctx context.Context, opts RunOptions) (*Process, error) {
	p, err := s.start(ctx, opts)
	if err != nil {
		return nil, err
	}
	go func() { // ends when the process does
		<-p.p.Done()
		p.release()
	}()
	return p, nil
}

// start starts opts.Command and tracks it in the session until release.
func (s *Session) start(ctx context.Context, opts RunOptions) (*Process, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if err := s.made(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Stopped first: a harness removes the directory once it has stopped
	// the session, and a late Run must say the session is stopped, not
	// that its working directory is missing.
	if s.isStopped() {
		return nil, ErrStopped
	}
	if opts.Command == "" {
		// What exec would say of it names its own options, not this one.
		return nil, errors.New("RunOptions.Command is empty: give the command line to run")
	}
	dir, err := s.workDir(opts.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, err
	}
	env := s.environ(opts.Env)

	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		return nil, ErrStopped
	}
	begin := s.begin
	if begin == nil {
		begin = startProcess
	}
	pp, err := begin(opts.Command, dir, env, opts.OpenStdin)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", Shell, err)
	}
	p := &Process{p: pp, log: pp.Log(), session: s, stdinOpen: context.Background(), closeStdin: func() {}}
	if opts.OpenStdin {
		p.input = inputwatch.Start(pp)
		p.stdinOpen, p.closeStdin = context.WithCancel(context.Background())
	}
	p.stopCancel = context.AfterFunc(ctx, func() {
		if p.exited() || !proctree.Alive(pp.Info().PID) {
			// It exited by itself; its result stands. Done waits for the
			// output's drain too, which a background job holding stdout
			// makes last: a ctx that ended in it turned an exit into
			// ctx's error, and killed the job. So did a ctx that ended
			// between the exit and the engine's reaping it, the command
			// a zombie: Wait returns once the engine has seen the exit.
			return
		}
		p.mu.Lock()
		if p.answered {
			// It exited since, and a Wait has said how: every Wait
			// says the same.
			p.mu.Unlock()
			return
		}
		p.cancelErr = ctx.Err()
		p.mu.Unlock()
		p.p.Kill(syscall.SIGKILL, 0, 0)
	})
	s.procsMu.Lock()
	s.procs[p] = struct{}{}
	s.procsMu.Unlock()
	return p, nil
}

// workDir returns the directory a command runs in, checked to exist.
func (s *Session) workDir(wd string) (string, error) {
	dir := s.dir
	if wd != "" {
		// Not cleaned, as for the file helpers, though bash's own cd
		// would fold "link/.." away by name: then WorkingDirectory d with
		// cat f opens what cat d/f and ReadFile("d/f") do, and package
		// exec, which gets dir as Cwd, runs the command where the kernel
		// takes dir, as it does any cwd.
		dir = s.resolve(wd)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("working directory %s does not exist: %w", dir, fs.ErrNotExist)
	case err != nil:
		return "", fmt.Errorf("working directory %s: %w", dir, err)
	case !fi.IsDir():
		return "", fmt.Errorf("working directory %s is not a directory", dir)
	}
	return dir, nil
}

// environ returns what a command's environment adds to this process's: the
// session's variables, then extra, then SandboxEnv, which extra cannot
// override.
func (s *Session) environ(extra map[string]string) map[string]string {
	env := make(map[string]string, len(s.env)+len(extra)+1)
	maps.Copy(env, s.env)
	maps.Copy(env, extra)
	env[SandboxEnv] = s.id
	return env
}

// Process is a command started by Spawn. A Process that Spawn did not
// return (the zero value, or the nil pointer of a failed Spawn) has no
// command: its methods return an error saying so, its PID is 0 and its
// WaitingForInput false, and Kill does nothing, so that it may be deferred
// before Spawn's error is looked at.
type Process struct {
	p          started
	log        *logstore.Log
	session    *Session
	stopCancel func() bool         // unregisters the kill on ctx's end
	input      *inputwatch.Watcher // nil unless its stdin is open

	mu        sync.Mutex // guards cancelErr and answered
	cancelErr error      // ctx.Err() of Spawn, once ctx ended and killed it
	answered  bool       // a Wait returned the exit: cancelErr is set no more

	writeMu sync.Mutex // held by WriteStdin, so that one write's bytes stay together

	// stdinOpen is done once CloseStdin closed the command's stdin, so that
	// a WriteStdin waiting for the command to read fails then: what it has
	// not queued can never be written.
	stdinOpen  context.Context
	closeStdin context.CancelFunc

	releaseOnce sync.Once
}

// release stops watching the spawn context and untracks the process. It is
// called once the process has exited.
func (p *Process) release() {
	p.releaseOnce.Do(func() {
		p.stopCancel()
		p.session.procsMu.Lock()
		delete(p.session.procs, p)
		p.session.procsMu.Unlock()
	})
}

// errNotSpawned is returned by the methods of a Process that Spawn did not
// return.
var errNotSpawned = errors.New("process not started by Spawn: it has no command")

// spawned returns errNotSpawned for a Process that Spawn did not return.
func (p *Process) spawned() error {
	if p == nil || p.p == nil {
		return errNotSpawned
	}
	return nil
}

// PID returns the process id of the shell running the command.
func (p *Process) PID() int {
	if p.spawned() != nil {
		return 0
	}
	return p.p.Info().PID
}

// Stdout returns a reader of the command's standard output, from the first
// byte still retained: each call returns a new reader. Reading follows the
// output as it is written and returns io.EOF once the command has exited and
// everything was read. Output is kept in a bounded log, so a reader that
// falls further behind than its retention loses the oldest bytes: Read then
// returns ErrOutputDropped once, and goes on with what is retained.
func (p *Process) Stdout() io.Reader { return p.output(logstore.Stdout) }

// Stderr is Stdout for the command's standard error.
func (p *Process) Stderr() io.Reader { return p.output(logstore.Stderr) }

func (p *Process) output(ch logstore.Channel) io.Reader {
	if err := p.spawned(); err != nil {
		return failedReader{err}
	}
	return newOutputReader(p.log, ch)
}

// failedReader is the output of a Process that Spawn did not return.
type failedReader struct{ err error }

func (r failedReader) Read([]byte) (int, error) { return 0, r.err }

// Wait waits until the command has exited and returns its exit code, as in
// RunResult.ExitCode. It returns ctx.Err() when ctx ends first, leaving the
// command running, and the Spawn context's error when that context ended
// the command. Once the command has exited, Wait returns its exit code at
// once, whatever ctx, and does not wait for its output: a job the command
// left running that holds its stdout or stderr open still writes to the
// readers of Stdout and Stderr for up to 2 s more (process.DrainDelay),
// and is left running; those readers return io.EOF only then.
func (p *Process) Wait(ctx context.Context) (int, error) {
	if ctx == nil {
		return -1, errNilContext
	}
	if err := p.spawned(); err != nil {
		return -1, err
	}
	select {
	case <-p.p.Exited():
	default: // an exit already seen is the answer, whatever ctx
		select {
		case <-p.p.Exited():
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	p.mu.Lock()
	cancelErr := p.cancelErr
	p.answered = true
	p.mu.Unlock()
	res := *p.p.Info().Result
	if cancelErr != nil && !res.Handled {
		return -1, cancelErr
	}
	// Handled: it exited with its own status as the kill came, which
	// cannot be handled; the exit was its own.
	return exitCode(res)
}

// Kill sends SIGTERM to the command and its current descendants; the
// command then exits with 143 unless it handles the signal. Killing a
// command that has exited does nothing.
func (p *Process) Kill() error {
	if p.spawned() != nil || p.exited() { // not Done, which waits for the output's drain too
		return nil
	}
	return p.p.Kill(syscall.SIGTERM, 0, 0)
}

// exited reports whether the command has exited, whether or not its output
// is drained yet (see Done).
func (p *Process) exited() bool { return p.p.Info().State == process.Terminal }

// exitCode turns a process result into a shell's exit status.
func exitCode(r process.Result) (int, error) {
	switch {
	case r.ExitCode != nil: // exec sets 128+n for a signal
		return *r.ExitCode, nil
	case r.Error != "":
		return -1, fmt.Errorf("command %s: %s", r.Reason, r.Error)
	}
	return -1, fmt.Errorf("command %s", r.Reason)
}
