package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

// signalTree sends sig to the process while it has not been reaped, its
// process group, its descendants, and every process tagged with its id and
// their groups: orphans that left its tree, and a group whose leader has
// exited. A reaped process's pid may be another program's by now, and so
// may its group's once that has emptied: once it is reaped its group is
// signalled by that number only while it is still its own (see
// proctree.LeftInGroup), never an unrelated process given the number.
func (p *Process) signalTree(sig syscall.Signal) error {
	pid, reaped := p.reaped()
	return proctree.SignalProcess(pid, p.id, sig, reaped)
}

// reaped returns the process's pid and, once it has been reaped, when
// (the moment its end was recorded, just after); zero before.
func (p *Process) reaped() (pid int, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		at = p.info.ExitedAt
	}
	return p.info.PID, at
}

// Kill sends sig to the process and all its current descendants, including
// those that called setsid and orphans that carry its tag. When
// escalateAfter is positive, it sends escalateTo (zero means KILL) then to
// the process if it is still running and to what it left running. Killing
// a terminal process sends sig to what it left behind: what is still in its
// process group and what carries its tag; its result does not change.
func (p *Process) Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error {
	if escalateTo == 0 {
		escalateTo = syscall.SIGKILL
	}
	p.mu.Lock()
	if escalateAfter > 0 {
		p.escalateLater(escalateAfter, escalateTo)
	}
	if p.exited {
		p.mu.Unlock()
		return p.signalTree(sig)
	}
	if ending[sig] {
		p.sent = sig
	}
	p.mu.Unlock()
	if sig == syscall.SIGINT {
		return p.interrupt()
	}
	return p.signalTree(sig)
}

// interrupt sends SIGINT to the tree once its root is not between forking
// a child and waiting for it — asleep, or without a child — for at most
// interruptWithin; Kill returns at once. A shell takes SIGINT in that moment
// with the handler of the wait it is setting up, and bash 5.2 then re-raises
// it to itself from that handler for ever, at full CPU, its child a zombie
// nobody reaps: of 24,390 one-shots of `sleep 30; echo x` interrupted at a
// random moment beside other work, 4 hung so.
func (p *Process) interrupt() error {
	p.mu.Lock()
	pid := p.info.PID
	p.mu.Unlock()
	ready := func() bool { return proctree.Sleeping(pid) || !proctree.HasChildren(pid) }
	if pid <= 0 || ready() {
		return p.signalTree(syscall.SIGINT)
	}
	go func() {
	wait:
		for deadline := time.Now().Add(interruptWithin); !ready() && time.Now().Before(deadline); {
			select {
			case <-p.done:
				break wait // what it left behind gets it now
			case <-time.After(2 * time.Millisecond):
			}
		}
		_ = p.signalTree(syscall.SIGINT)
	}()
	return nil
}

// interruptWithin bounds how long an interrupt waits for the process to be
// ready for it (see interrupt): a program that computes while its children
// run may never sleep.
const interruptWithin = time.Second

// escalate sends sig to the process if it is still running, and to what
// it left running: a process that the first signal ended (a shell that
// died of TERM) can leave children that ignored it (setsid, a trap of
// TERM), and the escalation is what was asked to end them. What is left
// is signalled as Kill of an ended process signals it (see signalTree).
func (p *Process) escalate(sig syscall.Signal) {
	p.mu.Lock()
	if ending[sig] && !p.exited {
		p.sent = sig
	}
	p.mu.Unlock()
	_ = p.signalTree(sig) // nobody to report to: the result shows what happened

	// What left the tree and its tag goes too; a process that failed to
	// start has no cgroup.
	if sig == syscall.SIGKILL && p.cg != nil {
		_ = p.cg.Kill()
	}
}

// timeout is the execution timeout's timer: TERM now, KILL its stop grace later.
func (p *Process) timeout() {
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return
	}
	p.timedOut = true
	p.sent = syscall.SIGTERM
	p.escalateLater(p.stopGrace, syscall.SIGKILL)
	p.mu.Unlock()
	_ = p.signalTree(syscall.SIGTERM)
}

// Stop ends the process for deletion: TERM to it, its descendants and the
// processes tagged with its id, and KILL to whatever of them is left
// Options.StopGrace later, again until none is left. It returns once the process is
// terminal and the leftovers are gone, or with ctx's error when ctx is done
// first, or with an error when leftovers outlive KILL for another
// stop grace. Stopping a terminal process ends only its leftovers
// (background children that outlived it).
func (p *Process) Stop(ctx context.Context) (err error) {
	defer func() { err = errors.Join(err, p.endCgroup()) }()
	defer func() {
		if err == nil { // nothing of it is left for them to reach
			p.stopEscalations()
		}
	}()
	// A process that has ended and left nothing behind needs no signal:
	// scans for what carries its tag, rather than a tree walk as well.
	select {
	case <-p.done:
		if !p.leftovers() {
			return nil
		}
	default:
	}
	deadline := time.Now().Add(p.stopGrace)
	p.mu.Lock()
	if !p.exited {
		p.sent = syscall.SIGTERM
	}
	p.mu.Unlock()
	termed := make(map[int]bool)
	for _, pid := range proctree.Tagged(p.id) {
		termed[pid] = true
	}
	_ = p.signalTree(syscall.SIGTERM)
	grace := time.NewTimer(p.stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-grace.C:
		p.escalate(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.clear(ctx, deadline, termed)
}

// escalateLater escalates to sig after d (see escalate). p.mu is held. At
// most one escalation to each signal is pending, the one due first: a
// client that kills an ended process again and again, each kill with an
// escalation an hour off, made one timer each, kept until the record went.
func (p *Process) escalateLater(d time.Duration, sig syscall.Signal) {
	due := time.Now().Add(d)
	if e, ok := p.escalations[sig]; ok {
		if !due.Before(e.due) {
			return
		}
		e.timer.Stop()
	}
	e := &escalation{due: due}
	e.timer = time.AfterFunc(d, func() {
		p.escalate(sig) // takes p.mu: e.timer is set by then
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.escalations[sig] == e {
			delete(p.escalations, sig)
		}
	})
	if p.escalations == nil {
		p.escalations = make(map[syscall.Signal]*escalation)
	}
	p.escalations[sig] = e
}

// escalation is a signal to come (see escalateLater).
type escalation struct {
	due   time.Time
	timer *time.Timer
}

// stopEscalations stops the escalations still to come.
func (p *Process) stopEscalations() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.escalations {
		e.timer.Stop()
	}
	p.escalations = nil
}

// leftovers reports whether processes tagged with p's id, or in its process
// group, are alive. A scan of /proc can miss processes that fork and exit
// while it reads, so it takes two scans finding nothing to say none is left.
func (p *Process) leftovers() bool {
	return len(p.left()) > 0 || len(p.left()) > 0
}

// left returns the live processes tagged with p's id or in its process
// group (a member that cleared its environment carries no tag) while that
// is still its own: p has ended, and the number of its group is another's
// once the group has emptied (see proctree.LeftInGroup).
func (p *Process) left() []int {
	left := proctree.Tagged(p.id)
	pgid, reaped := p.reaped()
	if pgid <= 0 || reaped.IsZero() {
		return left
	}
	for _, pid := range proctree.LeftInGroup(pgid, p.id, reaped) {
		if !slices.Contains(left, pid) {
			left = append(left, pid)
		}
	}
	return left
}

// clear waits for the leftovers of an ended process to go, and from
// deadline on sends them KILL, again until none is left. Before that, it
// sends TERM to each leftover not in termed (which it adds them to): a
// shell that catches TERM finishes a fork before it exits, and the child
// escapes the group's TERM. Each process gets TERM once, since a second
// one makes some programs cut their own cleanup short. Stop is rare and off
// the hot path, so a short poll beats machinery.
func (p *Process) clear(ctx context.Context, deadline time.Time, termed map[int]bool) error {
	giveUp := deadline.Add(p.stopGrace)
	for {
		left := p.left()
		if len(left) == 0 {
			left = p.left() // a scan can miss what forks and exits as it reads
		}
		if len(left) == 0 {
			return nil
		}
		now := time.Now()
		switch {
		case now.After(giveUp):
			return fmt.Errorf("process %s: %d processes outlive KILL", p.id, len(left))
		case now.After(deadline):
			_ = p.signalTree(syscall.SIGKILL)
		default:
			for _, pid := range left {
				if !termed[pid] {
					termed[pid] = true
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WriteStdin queues b for the process's stdin: its pipe, or its terminal
// for a PTY process. It never waits for the process to read: a write that
// does not fit in the queue (process.StdinQueueLimit bytes not yet read)
// fails at once with a *process.StdinFullError, its first Accepted bytes
// queued. ErrStdinNotOpen when stdin is closed or the process has ended.
// What is still queued when the process ends is dropped, and counted in
// Info's StdinDroppedBytes.
func (p *Process) WriteStdin(b []byte) error {
	if err := p.stdinOpen(); err != nil {
		return err
	}
	return p.feed.write(b)
}

// WriteStdinWait queues all of b for the process's stdin, as WriteStdin
// does, but waits while the queue is full for the process to read, as a
// write to a pipe or a terminal does. It returns how many of b's first
// bytes were queued: all of them, or fewer with ErrStdinNotOpen when stdin
// was closed or the process ended first, or with ctx's error when ctx
// ended first. Concurrent calls may interleave their bytes.
func (p *Process) WriteStdinWait(ctx context.Context, b []byte) (int, error) {
	written := 0
	for {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		err := p.WriteStdin(b[written:])
		var full *process.StdinFullError
		if !errors.As(err, &full) {
			if err != nil {
				return written, err
			}
			return len(b), nil
		}
		written += full.Accepted
		select {
		case <-p.feed.waitProgress():
		case <-p.done:
		case <-ctx.Done():
			return written, ctx.Err()
		}
	}
}

// StdinQueued returns the bytes written to the process's stdin that it has
// not taken yet: none once it can take no more (it ended, or closed its
// stdin), when what is left is dropped.
func (p *Process) StdinQueued() int {
	if p.feed == nil {
		return 0
	}
	return p.feed.queued()
}

// CloseStdin closes the process's stdin once what was written before is
// taken, so that its reads get end-of-file once they have read it. For a
// PTY process it writes the terminal's end-of-file character (Ctrl-D unless
// stty eof set another), which a program reading lines gets as end-of-file:
// twice where the input before it left a line unfinished in canonical mode,
// as at a terminal, since the first only hands the partial line over.
// ErrStdinNotOpen when stdin is closed already (its end-of-file was sent,
// or the program closed it, found by a write that failed) or the process
// has ended.
func (p *Process) CloseStdin() error {
	if p.pty != nil {
		if err := p.stdinOpen(); err != nil {
			return err
		}
		return p.feed.writeEOF()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.in == nil || p.stdinClosed || p.exited || p.feed.ended() {
		return process.ErrStdinNotOpen
	}
	p.stdinClosed = true
	p.feed.closeWrite()
	return nil
}

// stdinOpen says whether WriteStdin may write.
func (p *Process) stdinOpen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.exited:
		return fmt.Errorf("%w: the process has ended", process.ErrStdinNotOpen)
	case p.feed == nil || (p.pty == nil && p.stdinClosed):
		return process.ErrStdinNotOpen
	}
	return nil
}
