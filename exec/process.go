package exec

import (
	"errors"
	"fmt"
	"maps"
	"os"
	osexec "os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Process is a one-shot process started by [Start]. It implements
// [process.Process]; its methods are safe for concurrent use.
type Process struct {
	id  string
	log *logstore.Log
	cmd *osexec.Cmd
	cg  containment.Manager // the process's cgroup
	// limits are those that bound the cgroup: the ones given, with the
	// containment's defaults for the fields they leave zero.
	limits containment.Limits
	pty    *os.File // the PTY's master side; nil for an exec process
	tty    *os.File // the PTY's other side, held open until the process exits (see startPTY)
	gate   gate     // holds the PTY's output back for its attached readers
	in     *os.File // write end of an open stdin pipe; nil otherwise
	feed   *feeder  // writes queued input to in or pty; nil without open input
	done   chan struct{}
	ended  chan struct{} // closed once the process is terminal (see Exited)

	pidfd int // the process's, on pipes where pidfds work (see follow); else -1
	// keepers are the write ends of the output pipes, the child's, kept
	// open by follow until the pidfd says the process exited (see follow).
	keepers [2]*os.File

	closeIn sync.Once // closes in: at end-of-file or the process's end

	stopGrace  time.Duration // Options.StopGrace, defaulted
	drainDelay time.Duration // Options.DrainDelay, defaulted

	mu          sync.Mutex // guards the fields below
	info        process.Info
	sent        syscall.Signal // the last ending signal sent by Kill, Stop or the timeout
	timedOut    bool
	exited      bool
	stdinClosed bool
	failure     error         // why a Failed process never ran
	timers      []*time.Timer // the execution timeout; stopped at exit
	// escalations are the timers of Kill's escalateAfter and of the
	// execution timeout's KILL: not stopped at exit, since they reach what
	// the process left running (see escalate); stopped by Stop.
	escalations map[syscall.Signal]*escalation
}

// Start starts a process as opts say and returns it running — or already
// terminal with reason Failed when its program cannot be executed. The error
// is for options that are wrong before anything runs (wrapping
// process.ErrInvalidArgument, or process.ErrUnsupported and ErrNeedsRoot for
// a User the daemon may not switch to) and for a lack of resources (pipes, a PTY).
//
// Programs start with SIGINT, SIGQUIT, SIGHUP and SIGPIPE at their default
// disposition even when this process was started with them ignored (under
// nohup, or in the background of a script; see proctree.Start).
func Start(opts Options) (*Process, error) {
	id := opts.ID
	if id == "" {
		id = process.NewID()
	}
	opts = opts.withDefaults()
	kind := opts.Kind
	pl, err := prepare(id, opts)
	if err != nil {
		return nil, err
	}
	keep, _ := logstore.ParseKeepLogs(string(opts.KeepLogs))
	stdin := opts.Stdin
	p := &Process{
		id:         id,
		pidfd:      -1,
		log:        logstore.New(logstore.Options{Retention: opts.Retention, Keep: keep, Held: opts.HoldLogs}),
		done:       make(chan struct{}),
		ended:      make(chan struct{}),
		stopGrace:  process.OrDefault(opts.StopGrace, process.StopGrace),
		drainDelay: process.OrDefault(opts.DrainDelay, process.DrainDelay),
		info: process.Info{
			ID: id, Name: opts.Name, Kind: kind, State: process.Running,
			Argv: opts.Argv, Cwd: pl.dir, User: opts.User,
			Stdin: stdin, ExecutionTimeout: opts.ExecutionTimeout, Terminal: opts.Terminal,
			KeepLogs: keep, CreatedAt: time.Now(),
		},
	}
	p.gate.bound = int64(p.log.Retention() / 2)
	p.gate.stall = process.OrDefault(opts.AttachStall, process.StopGrace)
	p.info.ShellCommand, p.info.ShellCommandBytes = process.KeepText(opts.Cmd)
	if opts.Argv != nil {
		p.info.Argv, p.info.ArgvCount = process.KeepArgv(opts.Argv)
	}
	if pl.shellItself {
		p.info.Argv = pl.argv
	} else if opts.Argv == nil {
		p.info.Shell = pl.shell.Name
		p.info.ResolvedShell = pl.shell.Path
		p.info.Login = opts.Login
	}
	if pl.fail != nil {
		p.fail(pl.fail)
		return p, nil
	}
	if err := opts.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", process.ErrInvalidArgument, err)
	}
	if p.cg, err = opts.Containment.New(id, opts.Limits); err != nil {
		return nil, err
	}
	p.limits = opts.Limits.Or(opts.Containment.Defaults())
	p.cmd = &osexec.Cmd{
		Path: pl.path, Args: pl.argv, Dir: startDir(pl), Env: pl.env,
		SysProcAttr: &syscall.SysProcAttr{Credential: pl.cred},
	}
	var outs []output
	if kind == process.KindPTY {
		outs, err = p.startPTY(*opts.Terminal)
	} else {
		outs, err = p.startPipes(stdin == process.StdinOpen)
	}
	if err != nil {
		_ = p.cg.Destroy()
	}
	var serr startError
	if errors.As(err, &serr) {
		p.fail(unenterable(serr.err, pl))
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.info.PID = p.cmd.Process.Pid
	p.info.StartedAt = time.Now()
	// The environment and arguments are the process's now. Kept, they
	// held up to the kernel's ~2 MB a process for as long as the process
	// ran, in no budget of the daemon's (the record keeps the argv's head).
	p.cmd.Env, p.cmd.Args = nil, nil
	if opts.ExecutionTimeout > 0 {
		p.timers = append(p.timers, time.AfterFunc(opts.ExecutionTimeout, p.timeout))
	}
	p.mu.Unlock()
	if p.pidfd >= 0 {
		ep, err := followSet(outs, p.pidfd)
		if err == nil {
			go p.follow(ep, outs)
			return p, nil
		}
		closeRaw(p.pidfd) // wait waits without it
		p.pidfd = -1
		p.closeKeepers() // the copies read to end-of-file
	}
	copied := make(chan struct{}, len(outs))
	readers := make([]*os.File, len(outs))
	for i, o := range outs {
		if o.r == nil {
			o.r = os.NewFile(uintptr(o.fd), "|0")
		}
		readers[i] = o.r
		go p.copyOut(o.r, o.ch, copied)
	}
	go p.wait(readers, copied)
	return p, nil
}

// withDefaults fills in the zero values Start gives a meaning to. A PTY
// process's stdin is open, its TERM xterm-256color unless Env sets one, and
// its size 80×24 unless given (copied: the caller keeps its value).
func (o Options) withDefaults() Options {
	if o.Kind == "" {
		o.Kind = process.KindExec
	}
	if o.Stdin == "" {
		o.Stdin = process.StdinClosed
	}
	if o.Kind != process.KindPTY {
		return o
	}
	o.Stdin = process.StdinOpen
	if _, ok := o.Env["TERM"]; !ok {
		env := make(map[string]string, len(o.Env)+1)
		maps.Copy(env, o.Env)
		env["TERM"] = "xterm-256color"
		o.Env = env
	}
	size := process.TerminalSize{Cols: 80, Rows: 24}
	if o.Terminal != nil {
		size = *o.Terminal
	}
	o.Terminal = &size
	return o
}

// output is the read end of one of the process's outputs: a file in Go's
// poller (a PTY's master), or a pipe's raw non-blocking descriptor.
type output struct {
	r  *os.File
	fd int
	ch logstore.Channel
}

// startError is an error of the program's start itself (exec failed, the
// user switch was refused): the process is Failed rather than Start failing.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }

// startFailed is err, a failure to start the process, as Start reports it:
// a startError (the process Failed: its program, its user) unless the
// system lacked a resource to start any process (open files, processes,
// memory), which is Start's own error: the program is not at fault, and
// another try may work.
func startFailed(err error) error {
	for _, short := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.ENOMEM} {
		if errors.Is(err, short) {
			return err
		}
	}
	return startError{err}
}

// startPipes starts p.cmd with stdout and stderr on pipes, and stdin on a
// pipe when open (otherwise /dev/null), as the leader of a new session
// without a controlling terminal, and returns the read ends of stdout and
// stderr. In the daemon's session, a program that opens /dev/tty (git asking
// for a password) would write to the operator's terminal, or be stopped by
// SIGTTIN for good. A session leader leads its process group too. Where
// pidfds work, the process gets one (p.pidfd, see follow).
func (p *Process) startPipes(openStdin bool) ([]output, error) {
	outR, outW, err := outputPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := outputPipe()
	if err != nil {
		closeRaw(outR)
		closeAll(outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	var inR, inW *os.File
	if openStdin {
		if inR, inW, err = os.Pipe(); err != nil {
			closeRaw(outR, errR)
			closeAll(outW, errW)
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
		p.cmd.Stdin = inR
	} else if null := devNull(); null != nil {
		p.cmd.Stdin = null
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	p.cmd.SysProcAttr.Setsid = true
	pidfd := -1
	if pidfdsWork() {
		p.cmd.SysProcAttr.PidFD = &pidfd
	}
	err = p.cg.Start(p.cmd, proctree.Start)
	closeAll(inR) // the child has its own copy
	if err == nil && pidfd >= 0 {
		p.keepers = [2]*os.File{outW, errW} // for follow
	} else {
		closeAll(outW, errW)
	}
	if err != nil {
		closeRaw(outR, errR)
		closeAll(inW)
		return nil, startFailed(err)
	}
	p.pidfd = pidfd
	p.in = inW
	if inW != nil {
		p.feed = newFeeder(inW, p.closeStdinPipe)
	}
	return []output{{fd: outR, ch: logstore.Stdout}, {fd: errR, ch: logstore.Stderr}}, nil
}

// outputPipe returns a pipe for a child's output: its read end, this
// process's, a raw non-blocking descriptor (follow reads it, or it is made
// a file in the Go poller), and its write end, the child's, a plain
// blocking descriptor. os.Pipe offers both ends to the poller, so the
// child's end, which this process closes as soon as the child has its
// copy, was made non-blocking, added to the poller, made blocking again for
// the child and removed from the poller: five calls more a pipe, most of them
// through the scheduler.
func outputPipe() (r int, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, nil, os.NewSyscallError("pipe2", err)
	}
	// The child's end blocking again, raw: the call returns at once.
	if _, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(p[1]), unix.F_SETFL, 0); e != 0 {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, nil, os.NewSyscallError("fcntl", e)
	}
	return p[0], os.NewFile(uintptr(p[1]), "|1"), nil
}

// closeRaw closes raw descriptors.
func closeRaw(fds ...int) {
	for _, fd := range fds {
		_ = rawcall.Close(fd)
	}
}

// devNull is /dev/null opened once, the stdin of every process started
// with stdin closed, never closed. os/exec would open it anew for each
// start, an open made through the Go scheduler that also offers the file
// to its poller. Nil when it cannot be opened, and os/exec opens it.
var devNull = sync.OnceValue(func() *os.File {
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), os.DevNull)
})

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// fail makes p a terminal process that never ran, because of err.
func (p *Process) fail(err error) {
	p.mu.Lock()
	p.exited = true
	p.info.State = process.Terminal
	p.info.Result = &process.Result{Reason: process.Failed, Error: err.Error()}
	p.failure = err
	p.info.ExitedAt = time.Now()
	p.cmd = nil // its environment may be large (E2BIG): the record keeps none of it, as exit's
	close(p.ended)
	p.mu.Unlock()
	p.log.Close()
	close(p.done)
}

// copyBuffers hold the buffers copyOut reads into. A buffer of its own
// that did not escape would sit on the goroutine's stack, and each copy
// would start by growing its stack to 64 KiB, taken from the heap and given
// back to it when the copy ends.
var copyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyOut copies r into the log on ch until r ends or is cut off by the
// drain deadline, then says so on copied.
func (p *Process) copyOut(r *os.File, ch logstore.Channel, copied chan<- struct{}) {
	defer func() { copied <- struct{}{} }()
	b := copyBuffers.Get().(*[32 << 10]byte)
	defer copyBuffers.Put(b)
	buf := b[:]
	for {
		if ch == logstore.PTY {
			p.gate.wait()
		}
		n, err := r.Read(buf)
		if n > 0 {
			p.log.Write(ch, buf[:n])
			p.gate.wrote(n)
		}
		if err != nil { // EOF, EIO from a PTY whose other side is closed, or the deadline
			if ch == logstore.PTY && (errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrDeadlineExceeded)) {
				p.readLate(r, buf)
			}
			return
		}
	}
}

// lateReadLimit bounds what readLate reads: far more than a terminal's
// kernel buffers hold, so that all a program wrote before it exited is
// read, while something it left running that holds the terminal and keeps
// writing cannot keep the drain going.
const lateReadLimit = 1 << 20

// readLate reads what a PTY's master still holds once its copy ended.
// After EIO: Linux can report the terminal's other side closed while the
// last bytes the process wrote before it exited are still on their way into
// the master's buffer (a lost last line, seen under load); a read after the
// EIO returns them. After the drain deadline: an attached reader that was
// behind held the copy back while the program wrote its last bytes into
// the terminal's buffer and exited; the deadline came as the hold ended,
// before any read. It reads until a read returns nothing, never waiting,
// through Control: a read through the poller would fail on the deadline
// without reading.
func (p *Process) readLate(r *os.File, buf []byte) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		for read := 0; read < lateReadLimit; {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return
			}
			p.log.Write(logstore.PTY, buf[:n])
			p.gate.wrote(n)
			read += n
		}
	})
}

// wait is the goroutine that owns a started process: it waits for the exit,
// sets the result, drains output for at most its drain delay, then closes the log
// and done.
func (p *Process) wait(readers []*os.File, copied <-chan struct{}) {
	err := proctree.Wait(p.cmd)
	// Its terminal hangs up (EIO) once what it left running closes it too.
	closeAll(p.tty)
	p.exit(err)
	// Copies that ended with the process (all of them, mostly) need no
	// drain timer: a timer earlier than every other wakes the Go runtime's
	// poller to be set and again to be stopped.
	n := len(readers)
	for ; n > 0 && len(copied) > 0; n-- {
		<-copied
	}
	if n > 0 {
		if drainArmed != nil {
			drainArmed()
		}
		drain := time.NewTimer(p.drainDelay)
		for n > 0 {
			select {
			case <-copied:
				n--
			case <-drain.C:
				p.gate.release() // attached readers no longer hold the output back
				for _, r := range readers {
					// Every reader is in the poller (pipes, and the PTY
					// made so in startPTY), so the deadline ends a
					// pending read. What a PTY still holds (written
					// while a reader held the copy back) is read then
					// (see readLate).
					_ = r.SetReadDeadline(time.Now())
				}
			}
		}
		drain.Stop()
	}
	closeAll(readers...)
	p.finish()
}

// finish does what follows the end of a process and of the reading of its
// output: its input is stopped, the log and done are closed, and the cgroup
// goes if empty.
func (p *Process) finish() {
	// Nothing it started outlived it: the cgroup goes (Stop finds it gone
	// or going, and Destroy runs once). After done, so that whoever waits
	// for the process does not wait for an rmdir in each hierarchy too.
	empty := !p.cg.Populated()
	if p.feed != nil {
		// Its pipe or terminal is closed: a write it is in returns.
		dropped := p.feed.stop()
		p.mu.Lock()
		p.info.StdinDroppedBytes = dropped
		p.mu.Unlock()
	}
	p.log.Close()
	close(p.done)
	if empty {
		if removingCgroup != nil {
			removingCgroup()
		}
		p.settleUsage()
		_ = p.cg.Destroy()
	} else {
		leaveCgroup(p)
	}
}

// removingCgroup, when a test sets it, is called as an ended process's
// empty cgroup is about to be removed.
var removingCgroup func()

// followWoke, when a test sets it, is called each time follow wakes for
// events of p's, with whether its exit was among them.
var followWoke func(p *Process, exited bool)

// drainArmed, when a test sets it, is called each time a drain is armed (a
// timer in wait, a deadline in follow).
var drainArmed func()

// closeKeepers closes the write ends of the output pipes that p kept, and
// reports whether it had kept any. Only follow's goroutine calls it once
// follow runs.
func (p *Process) closeKeepers() bool {
	kept := false
	for i, f := range p.keepers {
		if f != nil {
			f.Close()
			p.keepers[i] = nil
			kept = true
		}
	}
	return kept
}

// closeStdinPipe closes the write end of the stdin pipe, once.
func (p *Process) closeStdinPipe() {
	p.closeIn.Do(func() { p.in.Close() })
}

// exit records how the process ended.
func (p *Process) exit(waitErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
	for _, t := range p.timers {
		t.Stop()
	}
	p.timers = nil
	var res process.Result
	if ps := p.cmd.ProcessState; ps != nil {
		res = result(ps.Sys().(syscall.WaitStatus), p.sent, p.timedOut)
	} else {
		res = process.Result{Reason: process.Lost, Error: waitErr.Error()}
	}
	s := p.cg.Stats()
	if ps := p.cmd.ProcessState; s.CPU == 0 && ps != nil {
		// No cgroup (or it has not counted yet): what the process and the
		// children it waited for used, from its rusage.
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	res = account(res, s, p.sent)
	// The record of an ended process is kept, maybe for long: the command's
	// environment, files and handles are not.
	p.cmd = nil
	p.info.State = process.Terminal
	p.info.Result = &res
	p.info.ExitedAt = time.Now()
	if p.in != nil {
		p.stdinClosed = true
		p.feed.halt()
		p.closeStdinPipe()
	}
	close(p.ended)
}

// ending are the signals that, sent by the engine, make the process's end
// its doing: a process that handles TERM and exits 0 is still reported
// signaled TERM. Other signals (USR1, USR2) are only seen in the wait status.
var ending = map[syscall.Signal]bool{
	syscall.SIGTERM: true, syscall.SIGKILL: true, syscall.SIGINT: true,
	syscall.SIGHUP: true, syscall.SIGQUIT: true,
}

// result turns a wait status into a Result. A process killed by a signal has
// ExitCode 128+n, as a shell's $? shows it.
func result(ws syscall.WaitStatus, sent syscall.Signal, timedOut bool) process.Result {
	var r process.Result
	switch {
	case ws.Exited():
		r = process.ExitedWith(ws.ExitStatus())
	case ws.Signaled():
		code := 128 + int(ws.Signal())
		r = process.Result{Reason: process.Signaled, ExitCode: &code, Signal: process.SignalName(ws.Signal())}
	}
	if r.Reason == process.Exited && ending[sent] {
		r.Reason, r.Signal, r.Handled = process.Signaled, process.SignalName(sent), true
	}
	if timedOut {
		r.Reason = process.TimedOut
	}
	return r
}

// account adds to r what the process's cgroup says it cost, and whether
// the OOM killer ended it: it died of KILL (or, run by a shell that did not
// exec it, the shell says 128+9) once the cgroup had an OOM kill, and the
// engine had not sent it KILL itself (sent): a process killed through the
// API after a child of its was OOM-killed was reported OOM-killed.
func account(r process.Result, s containment.Stats, sent syscall.Signal) process.Result {
	r.Usage = &process.Usage{CPU: s.CPU, MemoryPeak: s.MemoryPeak}
	killed := r.Reason == process.Signaled && r.Signal == "KILL" ||
		r.Reason == process.Exited && r.ExitCode != nil && *r.ExitCode == 128+9
	if s.OOMKills > 0 && killed && sent != syscall.SIGKILL {
		r.OOMKilled = true
		r.Reason, r.Signal = process.Signaled, "KILL"
	}
	return r
}

// ID returns the process's id.
func (p *Process) ID() string { return p.id }

// Log returns the process's output.
func (p *Process) Log() *logstore.Log { return p.log }

// Done is closed once the process is terminal and its output drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited is closed once the process is terminal, its result set: it has
// exited, or it never ran. Its output may still be read then, for up to its
// drain delay, from what it left running that holds its stdout or stderr
// (see Done).
func (p *Process) Exited() <-chan struct{} { return p.ended }

// Failure returns why a Failed process never ran (nil for any other): the
// error its Result's Error says, which errors.Is matches against
// fs.ErrNotExist and os/exec's ErrNotFound for a program that is missing,
// fs.ErrPermission for one that may not be run (a directory, a file without
// an execute bit), and the errno of execve (syscall.ENOEXEC: a file of no
// format the kernel runs).
func (p *Process) Failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}

// Limits returns the limits that bound the process's cgroup: those given,
// with the containment's defaults for the fields they left zero. Zero for a
// process that never had a cgroup.
func (p *Process) Limits() containment.Limits { return p.limits }

// Info returns a snapshot of the process's description and state.
func (p *Process) Info() process.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pty != nil && !p.exited {
		p.readSizeLocked()
	}
	i := p.info
	if i.Stdin == process.StdinOpen && p.pty == nil && !p.exited && (p.stdinClosed || p.feed == nil || p.feed.ended()) {
		// Its end-of-file was sent, or the program closed it: a write
		// now is refused, and the record says so while the process
		// runs (an ended one's says how it was started).
		i.Stdin = process.StdinClosed
	}
	return i
}

// endCgroup ends what is left in the process's cgroup — children that left
// its tree and cleared its tag — and removes the cgroup. Stop calls it last,
// after the tree had its TERM and grace.
func (p *Process) endCgroup() error {
	if p.cg == nil { // the process failed before it had one
		return nil
	}
	forgetCgroup(p)
	p.settleUsage()
	return p.cg.Destroy()
}

// settleUsage reads what the cgroup cost once more, as it is removed, into
// the record of the ended process: exit read it when the process itself
// ended, and what it left running in the cgroup (a background child) went
// on counting there. The Result answered at the exit keeps the figure of
// then: the record gets a Result of its own. Without a cgroup (no CPU
// counted) the figure of the exit stays, and it never goes down. Only the
// usage changes: OOMKilled says how the process itself ended, so a child
// the OOM killer ended after the exit leaves it as the exit read it.
func (p *Process) settleUsage() {
	s := containment.Stats{CPU: p.cg.CPU(), MemoryPeak: p.cg.MemoryPeak()}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.info.Result
	if r == nil || r.Usage == nil || (s.CPU <= r.Usage.CPU && s.MemoryPeak <= r.Usage.MemoryPeak) {
		return
	}
	res := *r
	res.Usage = &process.Usage{CPU: max(r.Usage.CPU, s.CPU), MemoryPeak: max(r.Usage.MemoryPeak, s.MemoryPeak)}
	p.info.Result = &res
}

// startDir is the directory a process is started in: "" (this process's
// own) when that is the daemon's, removed.
func startDir(pl plan) string {
	if pl.inheritDir {
		return ""
	}
	return pl.dir
}
