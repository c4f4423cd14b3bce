package codecontext

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/process"
	"golang.org/x/sys/unix"
)

// Kill sends sig to the cell. SIGINT interrupts it as Ctrl-C would at the
// language's REPL — KeyboardInterrupt in Python; in JavaScript a busy
// synchronous loop, a pending await or code busy after an await is
// abandoned — and the context lives on. Any other signal reaches the child
// processes the cell started and their descendants, never the interpreter
// nor what earlier cells left running, nor what that starts meanwhile. A
// child that a thread or a timer of an earlier cell forks while the cell
// runs is the interpreter's, as the cell's are, and gets it too (see own).
// When escalateAfter is positive, escalateTo follows if the cell is still
// running then.
func (cell *Cell) Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error {
	switch cell.state() {
	case process.Terminal:
		return nil
	case process.Starting:
		if killingQueued != nil {
			killingQueued(cell)
		}
		// Only while queued: a cell taken up meanwhile, even a moment ago,
		// goes to the interpreter, and is signalled so.
		if cell.finishIf(process.Starting, process.Result{Reason: process.Signaled, Signal: process.SignalName(sig), Error: "killed before it started"}) {
			return nil
		}
	}
	cell.signal(sig)
	if escalateAfter > 0 {
		if escalateTo == 0 {
			escalateTo = syscall.SIGKILL
		}
		cell.addTimer(time.AfterFunc(escalateAfter, func() { cell.signal(escalateTo) }))
	}
	return nil
}

func (cell *Cell) signal(sig syscall.Signal) {
	if sig == syscall.SIGINT {
		cell.interrupt(false)
		return
	}
	for _, pid := range cell.processes() {
		proctree.Send(pid, sig)
	}
}

// processes returns the cell's processes now: the interpreter's children
// that are the cell's own (see own), and their descendants.
func (cell *Cell) processes() []int {
	work, _ := proctree.StartedUnder(cell.c.cmd.Process.Pid, cell.own)
	return work
}

// own keeps of children, the interpreter's, those that started with or
// after the cell: its child processes, not those an earlier cell left
// running in the background. What those start meanwhile descends from
// them, and is not the cell's either; but a child that a thread or a timer
// of an earlier cell forks now is the interpreter's own child, and passes
// for the cell's. See [proctree.StartedSince].
func (cell *Cell) own(children []int) []int {
	cell.mu.Lock()
	started, last := cell.startedAt, cell.lastPID
	cell.mu.Unlock()
	if started.IsZero() {
		return nil // it never started: nothing of it runs
	}
	return proctree.StartedSince(children, started, last)
}

// timeout ends a cell at its execution timeout, which counts from its
// submission: a cell still queued ends timed_out without running; a running
// one is interrupted.
func (cell *Cell) timeout() {
	if cell.finishIf(process.Starting, process.Result{Reason: process.TimedOut,
		Error: "its execution timeout passed while it waited in the queue"}) {
		return
	}
	cell.interrupt(true)
}

// interrupt sends SIGINT once the driver runs the cell: sent earlier, it
// would reach the driver between cells, which ignores it. An interpreter
// stopped before it read the cell is continued unstopAfter later, unless
// the cell has started by then. The first interrupt also arms the
// escalation: a cell still running StopGrace later is out of the
// interrupt's reach, and its interpreter is killed.
func (cell *Cell) interrupt(timedOut bool) {
	cell.mu.Lock()
	if cell.st == process.Terminal {
		cell.mu.Unlock()
		return
	}
	if timedOut {
		cell.timedOut = true
	} else {
		cell.interrupted = true
	}
	arm := !cell.escalation
	cell.escalation = true
	if arm {
		grace := cell.c.opts.StopGrace
		why := fmt.Sprintf("the cell did not stop within %v of its interrupt", grace)
		if timedOut {
			why = fmt.Sprintf("the cell did not stop within %v of the interrupt at its execution timeout", grace)
		}
		cell.timers = append(cell.timers, time.AfterFunc(grace, func() { cell.escalate(why) }))
	}
	if !cell.isStarted {
		told := cell.pendingINT
		cell.pendingINT = true
		cell.mu.Unlock()
		// A JavaScript driver may hold a cell it was sent back while the
		// worker threads an earlier cell started come online (5 s at most):
		// told now, it ends that wait, and the cell interrupted unrun. Once
		// is enough: a driver busy elsewhere is not sent a line for every
		// interrupt asked meanwhile.
		if !told && cell.c.opts.Language == JavaScript {
			cell.c.interruptEarly(cell.seq)
		}
		// An interpreter stopped from outside between cells (kill -STOP)
		// never reads the cell, nor says it started: it is continued to
		// take it, and the interrupt then. Not at once: one that a cell
		// stopped (os.kill(os.getpid(), SIGSTOP)) said the cell started
		// before it stopped, a word the engine may not have read yet;
		// continued before the interrupt was sent, it ran the cell's next
		// statements first, which Ctrl-C at a terminal never lets happen.
		// Once the word is read, the interrupt goes first (sendINT).
		cell.addTimer(time.AfterFunc(unstopAfter, func() {
			cell.mu.Lock()
			waits := !cell.isStarted && cell.st != process.Terminal
			cell.mu.Unlock()
			if waits {
				proctree.Unstop(cell.c.cmd.Process.Pid, syscall.SIGINT)
			}
		}))
		return
	}
	cell.mu.Unlock()
	cell.sendINT(0)
}

// unstopAfter is how long an interrupt of a cell not yet started waits
// before it continues a stopped interpreter (see interrupt): far longer
// than the engine takes to read the driver's word that the cell started,
// which is already sent when a cell stopped the interpreter; an
// interpreter stopped between cells is continued that much later.
const unstopAfter = time.Second

// escalate ends the context of a cell still running after its interrupt's
// grace: the interpreter is killed, the cell and the context are lost with
// why, and queued cells fail with it.
func (cell *Cell) escalate(why string) {
	cell.mu.Lock()
	if cell.st == process.Terminal {
		cell.mu.Unlock()
		return
	}
	cell.lostWhy = why + "; its context's interpreter was killed"
	why = cell.lostWhy
	cell.mu.Unlock()
	go cell.c.h.End(&process.Result{Reason: process.Lost, Error: why}, syscall.SIGKILL)
}

// sendINT signals the interpreter's process group, as a terminal does on
// Ctrl-C, so that a program the cell waits for stops too. The cell's number
// goes first to the context's interrupt file: a driver whose handler gets
// the signal late, when another cell runs, finds it is not for that one.
// A driver whose cell removed or replaced the directory that file is in
// cannot read it, and takes the signal for its running cell.
// Holding sigMu while the cell is checked and signalled keeps the next cell
// from being sent in between.
//
// Node can miss an interrupt that comes after the driver said the cell runs
// but before the cell's script is entered (the signal then goes to a handler
// that runs only once the script returns), so for JavaScript it is sent
// again, less and less often, while the cell's script runs: until the
// driver says the script returned a promise it awaits or was interrupted,
// or the cell ends. Not sooner than 200 ms, so that a script that was
// interrupted has time to say so.
func (cell *Cell) sendINT(n int) {
	c := cell.c
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	cell.mu.Lock()
	stop := cell.st == process.Terminal || cell.ends > 0
	again := c.opts.Language == JavaScript && !cell.awaiting
	cell.mu.Unlock()
	if stop {
		return
	}
	// Sent even when the cell cannot be named: a cell that removed the
	// directory, or put another at its name, took the file from the
	// driver, which then takes the signal for the running cell.
	c.nameInterrupted(cell.seq)
	var before []proctree.Ident // the cell's processes the interrupt can reach (see resendAfter)
	if n == 0 {
		before = proctree.IdentsOf(cell.processes()...)
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
	// A cell that stopped its interpreter, or a program it runs, holds
	// the interrupt pending until continued.
	proctree.Unstop(c.cmd.Process.Pid, syscall.SIGINT)
	for _, pid := range cell.processes() {
		proctree.Unstop(pid, syscall.SIGINT)
	}
	c.intr.tell(cell.seq)
	if n == 0 {
		cell.addTimer(time.AfterFunc(resendAfter, func() { cell.resendINT(before, resendAfter) }))
	}
	if again {
		after := min(200*time.Millisecond<<n, time.Second)
		cell.addTimer(time.AfterFunc(after, func() { cell.sendINT(min(n+1, 5)) }))
	}
}

// nameInterrupted names cell seq in the file "int", which the driver reads
// as it takes SIGINT, so that a reader sees the old text or the new, never
// a part. The text is written, in place and at a fixed width, into a spare
// file that holds the last but one, which is then exchanged with "int"
// (renameat2 RENAME_EXCHANGE): no write needs new room on the file system,
// which a cell may have filled. The first time, or when a cell removed
// them, both files are made anew (see writeAtomic), and so is the
// directory when a cell removed it: never written through, what is at its
// name is another's when it is not as the engine made it (see
// resident.Dir.Remake), and the directory is then made under a new name,
// where the driver finds "int" from the next cell on.
func (c *Context) nameInterrupted(seq int) error {
	text := fmt.Sprintf("%20d", seq)
	dir, _, err := c.dir.Remake()
	if err != nil {
		return err
	}
	path, spare := filepath.Join(dir, "int"), filepath.Join(dir, "int.tmp")
	if exchangeIn(spare, path, text) == nil {
		return nil
	}
	if err := writeAtomic(path, text); err != nil {
		return err
	}
	rawcall.CreateFile(spare, []byte(text), 0o600) // the next one's room, if there is some
	return nil
}

// exchangeIn writes text over the file at spare, which holds as many bytes,
// and exchanges it with the file at path.
func exchangeIn(spare, path, text string) error {
	f, err := rawcall.OpenFile(spare, syscall.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	size, _ := f.InPlace()
	if size != int64(len(text)) {
		f.Close()
		return syscall.EINVAL
	}
	err = f.WriteAt([]byte(text), 0)
	f.Close()
	if err != nil {
		return err
	}
	return unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
}

// writeAtomic replaces the file at path with text, so that a reader sees
// the old text or the new, never a part. The text goes to a new file, never
// through a link a cell put in its place.
func writeAtomic(path, text string) error {
	tmp := path + ".tmp"
	if err := rawcall.CreateFile(tmp, []byte(text), 0o600); err != nil {
		return &os.PathError{Op: "write", Path: tmp, Err: err}
	}
	return os.Rename(tmp, path)
}

// Stop refuses to delete a running cell: it cannot be ended without its
// interpreter (interrupt it, or delete its context). A queued cell is
// dropped; an ended one has nothing to stop.
func (cell *Cell) Stop(context.Context) error {
	if cell.finishIf(process.Starting, process.Result{Reason: process.Signaled, Signal: "TERM", Error: "deleted before it started"}) {
		return nil
	}
	switch cell.state() {
	case process.Running:
		return fmt.Errorf("%w: a running code cell cannot be deleted: interrupt it, or delete its context", process.ErrUnsupported)
	}
	return nil
}

// killingQueued, when a test sets it, is called with each cell that Kill
// finds queued, before it ends it.
var killingQueued func(*Cell)

// Resize fails: cells have no terminal.
func (cell *Cell) Resize(process.TerminalSize) error { return process.ErrNotPTY }

// A program of the cell can miss its interrupt: a shell's child between its
// fork and its exec takes the signal with the shell's handler, which the
// exec then drops. So under load the sleep of dash -c 'sleep 60' now and
// then ran on: it never saw the interrupt, dash waited for it, and a
// JavaScript cell's execSync never returned until the interpreter was
// killed 5 s later, its context lost. So resendAfter after an interrupt,
// each of the cell's processes in the interpreter's process group, which
// the interrupt was sent to, still alive though it would have died of it —
// SIGINT at its default action, neither caught nor ignored — evidently
// never got it, and is sent it again, as one presses Ctrl-C again at a
// terminal: then after twice as long, and so on, while the cell runs (dash
// given it before it forks its program forks it all the same, which a busy
// machine may do later). A program that catches it (to clean up, say) gets
// it once, and none that the cell's own code starts after the interrupt (a
// clean-up run from an except or catch, os.system's shell and what it
// runs) gets it: only what runs under the interpreter's children that were
// there when it was sent. One of those that a program of the cell starts
// after it with SIGINT at its default action (a shell trap's clean-up
// command) gets it too.
const resendAfter = 200 * time.Millisecond

// resendINT sends SIGINT to each of the cell's processes that would die of
// it and runs under one of the interpreter's children among before, while
// the cell runs, and again after twice as long as it waited, within the
// interrupt's grace.
func (cell *Cell) resendINT(before []proctree.Ident, waited time.Duration) {
	c := cell.c
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	cell.mu.Lock()
	stop := cell.st == process.Terminal || cell.ends > 0
	cell.mu.Unlock()
	if stop {
		return
	}
	interpreter := c.cmd.Process.Pid // its group is the interrupt's: a terminal's foreground group
	for _, pid := range cell.processes() {
		_, pgid, ok := proctree.Parentage(pid)
		if !ok || pgid != interpreter || !proctree.DefaultAction(pid, syscall.SIGINT) {
			continue
		}
		if top, ok := childOf(interpreter, pid); !ok || !slices.Contains(before, proctree.IdentOf(top)) {
			continue // started by the cell's code after the interrupt, or under what it started then
		}
		syscall.Kill(pid, syscall.SIGINT)
	}
	if next := 2 * waited; next < c.opts.StopGrace {
		cell.addTimer(time.AfterFunc(next-waited, func() { cell.resendINT(before, next) }))
	}
}

// childOf returns the child of the interpreter that pid is, or descends
// from; false when pid is not under it (reparented, or gone).
func childOf(interpreter, pid int) (int, bool) {
	for range 64 { // deeper than any tree a cell runs its programs in
		ppid, _, ok := proctree.Parentage(pid)
		switch {
		case !ok || ppid <= 1:
			return 0, false
		case ppid == interpreter:
			return pid, true
		}
		pid = ppid
	}
	return 0, false
}
