package resident

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/queue"
)

// Config describes a Host: what the embedding package knows and the host
// asks of it.
type Config struct {
	// ID is the session's id, which also tags the interpreter's processes.
	ID string
	// Name is a label for listings.
	Name string
	// Noun names the session's kind in errors: "session", "context".
	Noun string
	// Ended is what submissions after the end and queued items fail with,
	// wrapped with the noun and the id.
	Ended error
	// Ports are loopback ports leased for the session, reported in Info.
	Ports []int
	// StopGrace is how long the interpreter has after a signal that ends
	// the session before KILL.
	StopGrace time.Duration
	// Interrupt sends SIGINT to the command running now, if any.
	Interrupt func() error
	// Describe adds to the session's Info what only the embedder knows. It
	// is called without the host's lock held.
	Describe func(*process.Info)
	// Reaped is called once the interpreter has exited and been reaped,
	// before Exited (the channel) is closed: what it notes of the
	// interpreter's end is there for whoever learns of the end from that.
	Reaped func()
	// Exited is called once the interpreter has exited and been reaped.
	Exited func()
	// Release closes what the embedder keeps open until the end, after the
	// drained streams are closed.
	Release func()
	// Containment gives the session a cgroup of its own (nil: none), with
	// Limits.
	Containment *containment.Root
	Limits      containment.Limits
}

// Host is the long-lived interpreter behind a session and its serial queue.
// Its methods make it the session's process.Process; the embedding type
// forwards them.
type Host struct {
	cfg       Config
	log       *logstore.Log // stays empty: the interpreter's own output is the engine's
	createdAt time.Time
	cmd       *exec.Cmd
	cg        containment.Manager // the session's cgroup, once started
	stats     containment.Stats   // what the cgroup had used when it was ended
	diag      *Diag
	ownW      *os.File // the engine's writer of the interpreter's own output, until it is reaped (see OwnPath)
	ownPath   string
	wg        sync.WaitGroup // the goroutines that drain and wait for the interpreter
	exited    chan struct{}  // closed once the interpreter has exited and been reaped
	reapedAt  time.Time      // just after the interpreter was reaped; set before exited closes
	done      chan struct{}  // closed once the session is terminal

	// Queue is the session's serial queue of commands.
	Queue queue.Queue

	mu          sync.Mutex // guards the fields below
	state       process.State
	result      *process.Result
	exitedAt    time.Time
	closing     bool
	endedIt     bool              // End was called before the interpreter exited (see EndedIt)
	byItself    bool              // closing because the interpreter exited by itself (see EndedByItself)
	escalating  atomic.Bool       // an escalation for what the interpreter left is due (see escalateLater)
	why         string            // why End ended the session, when its result says
	drains      map[*os.File]bool // streams still read after their command ended
	oomSeen     int64             // the cgroup's OOM kills a command's end has accounted for
	oomKilledIt bool              // the OOM killer ended the interpreter (see noteReaped)
	cpu         time.Duration     // the session's CPU time as a command's end last read it
	cpuAt       time.Time         // when
	peak        int64             // the highest memory peak a command's end read
}

// New returns the host of a session whose interpreter is not started yet.
func New(cfg Config) *Host {
	return &Host{
		cfg:       cfg,
		log:       logstore.New(logstore.Options{Keep: logstore.KeepNone}),
		createdAt: time.Now(),
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		state:     process.Starting,
		drains:    make(map[*os.File]bool),
	}
}

// Start starts cmd as the interpreter in a session of its own, its stdout
// and stderr drained by the host's Diag, and watches for its exit.
func (h *Host) Start(cmd *exec.Cmd) error {
	if err := h.cfg.Limits.Validate(); err != nil {
		return fmt.Errorf("%w: %w", process.ErrInvalidArgument, err)
	}
	cg, err := h.cfg.Containment.New(h.cfg.ID, h.cfg.Limits)
	if err != nil {
		return err
	}
	dr, dw, err := os.Pipe()
	if err != nil {
		_ = cg.Destroy()
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	cmd.Stdout, cmd.Stderr = dw, dw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cg.Start(cmd, proctree.Start)
	if err != nil {
		dw.Close()
		dr.Close()
		_ = cg.Destroy()
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	// The environment is the interpreter's now: kept, it would hold up
	// to the kernel's ~2 MB a session for the session's life.
	cmd.Env = nil
	h.cg = cg
	h.cmd = cmd
	h.diag = &Diag{f: dr, ended: make(chan struct{})}
	// The engine keeps its writer of the pipe while the interpreter lives,
	// so that the interpreter can close its own stdout and stderr and still
	// reach the engine by OwnPath; it lets go once the interpreter has been
	// reaped, and the pipe ends when the interpreter's children that kept it
	// let go too, as it did when the interpreter's were the only writers.
	h.ownW = dw
	if rc, err := dw.SyscallConn(); err == nil { // Fd would make it blocking
		rc.Control(func(fd uintptr) { h.ownPath = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd) })
	}
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		h.diag.run()
	}()
	go func() {
		defer h.wg.Done()
		proctree.Wait(cmd)
		h.ownW.Close()
		h.reapedAt = time.Now()
		h.noteReaped()
		if h.cfg.Reaped != nil {
			h.cfg.Reaped()
		}
		close(h.exited)
		if h.cfg.Exited != nil {
			h.cfg.Exited()
		}
	}()
	return nil
}

// Done is closed once the session has ended.
func (h *Host) Done() <-chan struct{} { return h.done }

// Exited is closed once the interpreter has exited and been reaped.
func (h *Host) Exited() <-chan struct{} { return h.exited }

// OOMKilled reports whether the OOM killer has ended a process of the
// session's cgroup.
func (h *Host) OOMKilled() bool { return h.cg.OOMKills() > 0 }

// OOMKilledIt reports whether the OOM killer ended the interpreter: known
// once it has been reaped (Exited is closed).
func (h *Host) OOMKilledIt() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.oomKilledIt
}

// Diag returns the reader of the interpreter's own output.
func (h *Host) Diag() *Diag { return h.diag }

// OwnPath returns a path by which the interpreter, while it lives, can open
// its own output again, the pipe Diag reads, once it has closed its stdout
// and stderr: the engine's writer of it, in the engine's /proc. Opening it
// needs the right to read the engine's /proc entry, which a process of the
// engine's user has unless the engine runs undumpable; "" before Start.
func (h *Host) OwnPath() string { return h.ownPath }

// Log returns the session's own log, which stays empty.
func (h *Host) Log() *logstore.Log { return h.log }

// ErrEnded returns the error of a submission after the end, and of the
// items queued at the end: the config's Ended error, with why the engine
// ended the session when it said.
func (h *Host) ErrEnded() error {
	h.mu.Lock()
	why := h.why
	h.mu.Unlock()
	if why != "" {
		return fmt.Errorf("%s %s: %w: %s", h.cfg.Noun, h.cfg.ID, h.cfg.Ended, why)
	}
	return fmt.Errorf("%s %s: %w", h.cfg.Noun, h.cfg.ID, h.cfg.Ended)
}

// Ready marks a session that has come up running.
func (h *Host) Ready() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == process.Starting {
		h.state = process.Running
	}
}

// CameUp reports whether Ready marked the session running: what the
// embedder set before it calls Ready is there for whoever it reports true to.
func (h *Host) CameUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state != process.Starting
}

// ExitState is the interpreter's exit status, once it has been reaped
// (Exited is closed); nil before.
func (h *Host) ExitState() *os.ProcessState {
	select {
	case <-h.exited:
		return h.cmd.ProcessState
	default:
		return nil
	}
}

// StartEnded says how an interpreter that did not come up ended —
// "exited as it started (exit status 3)", or "" while it runs on — once it
// has been reaped and its output has ended (what it said: Diag's Tail), for
// at most a second or until ctx is done: it may have closed its input and
// run on, or left a child holding its output.
func (h *Host) StartEnded(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	select {
	case <-h.exited:
	case <-ctx.Done():
	}
	select {
	case <-h.diag.Ended():
	case <-ctx.Done():
	}
	select {
	case <-h.exited: // reaped: its state is set
		return "exited as it started (" + h.cmd.ProcessState.String() + ")"
	default:
		return ""
	}
}

// NotReady says, for the error that refuses its start, that an
// interpreter was not ready within d (see process.ReadyWithin); the
// embedder adds what may be why, and kills its tree.
func NotReady(d time.Duration) string { return fmt.Sprintf("did not become ready within %v", d) }

// Closing reports whether the session is ending or has ended.
func (h *Host) Closing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing
}

// EndedIt reports whether End was called while the interpreter ran: its
// exit, whatever status it gives (bash exits 143 on TERM), is the
// engine's doing, not a command's.
func (h *Host) EndedIt() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endedIt
}

// Ended reports whether a command submitted now could not run: the session
// is ending, has ended, or its interpreter has exited.
func (h *Host) Ended() bool {
	select {
	case <-h.exited:
		return true
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing || h.state == process.Terminal
}

// Info describes the session as the process of its interpreter.
func (h *Host) Info() process.Info {
	h.mu.Lock()
	i := process.Info{
		ID: h.cfg.ID, Name: h.cfg.Name, Kind: process.KindSession, State: h.state,
		System: true, SessionID: h.cfg.ID, Stdin: process.StdinClosed,
		KeepLogs: h.log.Keep(), CreatedAt: h.createdAt, StartedAt: h.createdAt,
		ExitedAt: h.exitedAt, Ports: h.cfg.Ports,
	}
	if h.cmd != nil && h.cmd.Process != nil {
		i.PID = h.cmd.Process.Pid
	}
	if h.result != nil {
		r := *h.result
		i.Result = &r
	} else if !h.closing || h.byItself {
		select {
		case <-h.exited:
			// Reaped, its end not yet recorded (EndedByItself is on
			// its way): the session is terminal from then on. The
			// command it died under ends once the end is recorded.
			i.State, i.Result, i.ExitedAt = process.Terminal, h.statusResult(nil), h.reapedAt
		default:
		}
	}
	h.mu.Unlock()
	if h.cfg.Describe != nil {
		h.cfg.Describe(&i)
	}
	return i
}

// Kill with SIGINT interrupts the running command. A signal that ends no
// process by default (see endsNone) goes to the interpreter and every
// process under it, which it pauses (STOP), resumes (CONT) or leaves be,
// as it would an exec process's tree: the session goes on. Any other
// signal ends the session: its interpreter and every process under it,
// with escalateTo (KILL when zero) escalateAfter later (StopGrace when
// zero) if the interpreter is still there, and KILL StopGrace after that.
// It returns once the session has ended.
func (h *Host) Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error {
	switch {
	case sig == syscall.SIGINT:
		return h.cfg.Interrupt()
	case endsNone(sig):
		if !h.Ended() {
			h.killTree(sig)
		}
		return nil
	}
	h.end(&process.Result{Reason: process.Signaled, Signal: process.SignalName(sig)}, sig, escalateAfter, escalateTo)
	return nil
}

// endsNone reports whether sig's default action ends no process: it
// stops one, continues one, or is ignored.
func endsNone(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		return true
	}
	return false
}

// WriteStdin fails: the interpreter's own stdin belongs to the engine.
func (h *Host) WriteStdin([]byte) error { return process.ErrStdinNotOpen }

// CloseStdin fails: the interpreter's own stdin belongs to the engine.
func (h *Host) CloseStdin() error { return process.ErrStdinNotOpen }

// Resize fails: sessions have no terminal.
func (h *Host) Resize(process.TerminalSize) error { return process.ErrNotPTY }

// Stop ends the session like Close.
func (h *Host) Stop(context.Context) error { return h.Close() }

// Close ends the interpreter and every process started under it —
// descendants, those that called setsid and those orphaned since — and
// waits for the session's goroutines. Queued commands fail with the
// config's Ended error. It is idempotent.
//
// The reader of the interpreter's own output gets diagLinger once all is
// ended to see that output end, and stops then: what outlived KILL (see
// endCgroup) may hold the pipe for as long as it lives, and nobody waits
// on it.
func (h *Host) Close() error {
	if h.cmd == nil { // the interpreter never started
		h.Queue.Close(h.ErrEnded())
		h.finish(&process.Result{Reason: process.Failed, Error: "the interpreter did not start"})
		return nil
	}
	h.End(&process.Result{Reason: process.Signaled, Signal: "KILL"}, syscall.SIGKILL)
	h.diag.stopAfter(diagLinger)
	h.wg.Wait()
	return nil
}

// KillLeft kills at once what is left of the tree of a session that has
// ended: what outlived the signal that ended it, its escalation not due
// yet (see escalate), for a delete, which ends every process started
// under the session. It does nothing before the end.
func (h *Host) KillLeft() {
	if h.cmd == nil || !h.escalating.Load() {
		return
	}
	select {
	case <-h.done:
		h.killTree(syscall.SIGKILL)
	default:
	}
}

// End fails queued commands, kills the interpreter's tree with sig (KILL
// after StopGrace unless sig is KILL: for what the interpreter left running
// too, by a timer, once it has exited; see escalate), waits for the
// interpreter's exit, then marks the session terminal with r unless the
// interpreter had already ended by itself. A second call waits for the
// first.
func (h *Host) End(r *process.Result, sig syscall.Signal) { h.end(r, sig, 0, 0) }

// end is End, escalating to escalateTo (KILL when zero) escalateAfter
// later (StopGrace when zero), and to KILL StopGrace after that.
func (h *Host) end(r *process.Result, sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		<-h.done
		return
	}
	h.closing = true
	select {
	case <-h.exited:
	default:
		h.endedIt = true
	}
	if r != nil {
		h.why = r.Error
	}
	h.mu.Unlock()
	// No queued command runs once the end began: a shell that ignores sig
	// (an interactive one, QUIT) ran the queue on until the escalation,
	// each command reported as any other.
	h.Queue.Shut(h.ErrEnded())
	h.killTree(sig)
	if sig != syscall.SIGKILL {
		h.escalate(cmp.Or(escalateAfter, h.cfg.StopGrace), escalateTo)
	}
	<-h.exited
	h.endCgroup()
	h.Queue.Close(h.ErrEnded())
	h.finish(r)
	h.release()
}

// escalate follows the signal that began the end with escalateTo (unless
// zero or KILL) after, and KILL StopGrace after that, to the tree: it waits
// while the interpreter runs on, and leaves the rest to timers once it
// has exited, for what it left running — a job that ignored the signal (a
// trap of TERM, nohup's of HUP) outlives a shell that died of it, and
// without a cgroup, whose end kills it, it ran on for good.
func (h *Host) escalate(after time.Duration, escalateTo syscall.Signal) {
	steps := []syscall.Signal{syscall.SIGKILL}
	if escalateTo != 0 && escalateTo != syscall.SIGKILL {
		steps = []syscall.Signal{escalateTo, syscall.SIGKILL}
	}
	for i, sig := range steps {
		begun := time.Now()
		if h.exitsWithin(after) {
			h.escalateLater(after-time.Since(begun), steps[i:])
			return
		}
		h.killTree(sig)
		after = h.cfg.StopGrace
	}
}

// escalateLater sends the first of steps to what is left of the tree
// after d, and each of the others StopGrace after the one before. The
// interpreter has exited (see killTree).
func (h *Host) escalateLater(d time.Duration, steps []syscall.Signal) {
	h.escalating.Store(true)
	time.AfterFunc(max(d, 0), func() {
		h.killTree(steps[0])
		if len(steps) > 1 {
			h.escalateLater(h.cfg.StopGrace, steps[1:])
		} else {
			h.escalating.Store(false)
		}
	})
}

// exitsWithin reports whether the interpreter exits within d.
func (h *Host) exitsWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.exited:
		return true
	case <-t.C:
		return false
	}
}

// EndedByItself ends the session whose interpreter exited by itself —
// killed from outside, or ended by a command (exit, exec, sys.exit):
// what it left behind is killed, queued commands fail and the session is
// terminal with what its exit status says. It does nothing while End runs.
//
// why, when not nil, says why the interpreter ended, where nothing else
// would: it exited while no command ran. It is called once what the
// interpreter left is killed and its own output has ended (or diagLinger
// has passed), what it said last there at hand (see Diag.LastLine); what
// it returns, unless "", is the session's result's Error and what later
// submissions are told.
func (h *Host) EndedByItself(why func() string) {
	h.mu.Lock()
	closing := h.closing
	h.closing = true
	h.byItself = !closing
	h.mu.Unlock()
	if closing {
		return // End runs: it marks the session terminal
	}
	h.killTree(syscall.SIGKILL)
	h.endCgroup()
	var r *process.Result
	if why != nil {
		h.diag.stopAfter(diagLinger) // as Close would: the reader ends by then
		<-h.diag.Ended()
		if w := why(); w != "" {
			h.mu.Lock()
			rr := *h.statusResult(nil)
			rr.Error = w
			h.why = w
			h.mu.Unlock()
			r = &rr
		}
	}
	h.Queue.Close(h.ErrEnded())
	h.finish(r)
	h.release()
}

// endCgroup ends every process left in the session's cgroup — those that
// left the tree and cleared the tag too — and removes it. Processes that
// outlive KILL (stuck in the kernel) are left to the daemon's end, which
// removes its whole cgroup tree; nobody waits on a session's end to hear
// of them.
func (h *Host) endCgroup() {
	stats := h.cg.Stats()
	h.mu.Lock() // Info reads them (statusResult) while the end is recorded
	h.stats = stats
	h.mu.Unlock()
	_ = h.cg.Destroy()
}

// usage is what the session used over its life: its cgroup's CPU time, or,
// where that counts less (no cgroup: the CPU time a command's end last
// read), the interpreter's and its reaped children's CPU time from its
// rusage; and the highest memory peak of its commands and of its end (the
// kernel's peak is reset as each command starts, where it can be). h.mu is
// held.
func (h *Host) usage() *process.Usage {
	return &process.Usage{CPU: max(h.stats.CPU, h.reapedCPU()), MemoryPeak: max(h.stats.MemoryPeak, h.peak)}
}

// reapedCPU is the CPU time of the reaped interpreter and of the children
// it reaped, from its rusage; zero before it is reaped.
func (h *Host) reapedCPU() time.Duration {
	if h.cmd != nil && h.cmd.ProcessState != nil {
		if ru, ok := h.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return 0
}

// killTree signals the interpreter, its descendants and the processes
// tagged with the session's id that left its tree. Once the interpreter
// is reaped its pid, and its group's once that has emptied, may be another
// program's: only its group is signalled then, while it is still its own
// (see proctree.SignalProcess).
func (h *Host) killTree(sig syscall.Signal) {
	var reaped time.Time
	select {
	case <-h.exited:
		reaped = h.reapedAt
	default:
	}
	_ = proctree.SignalProcess(h.cmd.Process.Pid, h.cfg.ID, sig, reaped)
}

// finish marks the session terminal with r, or with what the interpreter's
// exit status says when r is nil or it ended by itself first.
func (h *Host) finish(r *process.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == process.Terminal {
		return
	}
	r = h.statusResult(r)
	if h.cmd != nil && h.cmd.ProcessState != nil {
		// Ended after it started (not a session that never did): a copy,
		// since r may be the caller's.
		rr := *r
		rr.Usage = h.usage()
		r = &rr
	}
	h.state = process.Terminal
	h.result = r
	h.exitedAt = time.Now()
	h.log.Close()
	close(h.done)
}

// statusResult is the result the interpreter's exit status gives where it
// has one and says more than r (r from End while the session closes keeps
// its signal; an exit, or the OOM killer, wins), else r, else lost. h.mu is
// held.
func (h *Host) statusResult(r *process.Result) *process.Result {
	if h.cmd != nil && h.cmd.ProcessState != nil {
		if st, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && (r == nil || !h.closing) {
			switch {
			case st.Exited():
				r = &process.Result{Reason: process.Exited, ExitCode: ptr(st.ExitStatus())}
			case st.Signaled() && st.Signal() == syscall.SIGKILL && h.oomKilledIt:
				r = &process.Result{Reason: process.Lost, OOMKilled: true,
					Error: "the OOM killer ended the " + h.interpreter() + " at the memory limit"}
			case st.Signaled() && r == nil:
				r = &process.Result{Reason: process.Signaled, Signal: process.SignalName(st.Signal())}
			}
		}
	}
	if r == nil {
		r = &process.Result{Reason: process.Lost}
	}
	return r
}

// interpreter is what the session's interpreter is called in messages:
// a shell session's is its shell.
func (h *Host) interpreter() string {
	if h.cfg.Noun == "session" {
		return "shell"
	}
	return "interpreter"
}

func ptr[T any](v T) *T { return &v }
