package shellsession

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"golang.org/x/sys/unix"
)

// Kill sends sig to the command. SIGINT interrupts it as Ctrl-C would at a
// prompt — the foreground processes and the shell itself, which aborts a
// builtin loop or a function — and the session lives on. Any other signal
// reaches the command's processes, never the shell. When escalateAfter is
// positive, escalateTo follows if the command is still running then.
func (c *Command) Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error {
	switch c.state() {
	case process.Terminal:
		return nil
	case process.Starting:
		if killingQueued != nil {
			killingQueued(c)
		}
		if c.endQueued(process.Result{Reason: process.Signaled, Signal: process.SignalName(sig), Error: "killed before it started"}) {
			return nil
		}
		// Taken up meanwhile: the shell runs it, and it is signalled so.
	}
	c.signal(sig)
	if escalateAfter > 0 {
		if escalateTo == 0 {
			escalateTo = syscall.SIGKILL
		}
		c.addTimer(time.AfterFunc(escalateAfter, func() { c.signal(escalateTo) }))
	}
	return nil
}

// killingQueued, when a test sets it, is called with each command that Kill
// finds queued, before it ends it.
var killingQueued func(*Command)

func (c *Command) signal(sig syscall.Signal) {
	if sig == syscall.SIGINT {
		c.interrupt(false)
		return
	}
	c.mu.Lock()
	c.sent = append(c.sent, sig)
	c.mu.Unlock()
	// KILL cannot be caught nor ignored: a copy of the shell dies of it
	// as the program it would become would.
	if program, copying := c.processKinds(); program || c.shellExecd() || sig == syscall.SIGKILL && copying {
		c.send(sig)
		return
	}
	c.sendOnceProgram(sig)
}

// send sends sig to the command's processes as they are now, and to the
// shell's pid when the command exec'd a program there.
func (c *Command) send(sig syscall.Signal) {
	// Tree, not processes: should the command end meanwhile, those of
	// later commands are not its.
	for _, pid := range c.Tree() {
		proctree.Send(pid, sig)
	}
	if c.shellExecd() {
		proctree.Send(c.s.cmd.Process.Pid, sig)
	}
}

// shellExecd reports whether the command exec'd a program where the shell
// was: the program runs as the shell's pid, no descendant of it (TERM to
// exec sleep 30 reached nothing). Not once the shell is reaped (its command
// ends after the session's end, see endAfterSession): its pid may be
// another program's.
func (c *Command) shellExecd() bool {
	return c.state() == process.Running && !c.s.reaped() && c.s.execd("/proc/"+strconv.Itoa(c.s.cmd.Process.Pid))
}

// sendOnceProgram sends sig, a signal other than INT, once the command has
// a program: it has none yet. Sent now, it would reach nothing — a command
// just taken up, which the shell has yet to fork, ran to its end — or only
// a copy of the shell between fork and exec, which has the shell's
// dispositions: an interactive shell ignores TERM, and the program the copy
// becomes never sees it. So it waits, and sends it once, to the processes
// the command has then, when a program of it is seen; or when a copy of
// the shell has stayed one for execWithin (a subshell may stay a copy for
// as long as it runs). It looks every few milliseconds at first, every
// programLookEvery at most once the command has run builtins for
// lookFastFor: a program it runs that ends between two looks (a loop of
// /bin/echo) is not seen, and a later one gets the signal. One that runs
// only builtins never gets it, the signal never reaching the shell. It
// ends when the command does. Signals sent while one waits wait with it,
// and go after it in their order.
func (c *Command) sendOnceProgram(sig syscall.Signal) {
	c.mu.Lock()
	c.waiting = append(c.waiting, sig)
	waits := len(c.waiting) > 1
	c.mu.Unlock()
	if waits {
		return
	}
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		var copyAt time.Time // when a copy was first seen
		start := time.Now()
		every := time.Millisecond
		for {
			select {
			case <-c.done:
				return
			case <-time.After(every):
			}
			program, copying := c.processKinds()
			if program || c.shellExecd() {
				break
			}
			if copying {
				if copyAt.IsZero() {
					copyAt = time.Now()
				}
				if time.Since(copyAt) >= execWithin {
					break
				}
				every = min(2*every, 10*time.Millisecond)
				continue
			}
			copyAt = time.Time{}
			// Each look lists /proc: a shell slow to fork, or one in
			// builtins, is looked at less often once it has been long.
			if time.Since(start) < lookFastFor {
				every = min(2*every, 10*time.Millisecond)
			} else {
				every = min(2*every, programLookEvery)
			}
		}
		c.mu.Lock()
		sigs := c.waiting
		c.waiting = nil
		c.mu.Unlock()
		select {
		case <-c.done:
			return
		default:
		}
		for _, sig := range sigs {
			c.send(sig)
		}
	}()
}

// lookFastFor is how long a signal waiting for the command's first
// program (see sendOnceProgram) looks for it every 10 ms at most.
const lookFastFor = 2 * time.Second

// programLookEvery bounds how often such a signal looks for the program
// after lookFastFor.
const programLookEvery = 250 * time.Millisecond

// timeout interrupts the command at its execution timeout and ends the
// session if the command has not stopped its session's StopGrace later.
func (c *Command) timeout() {
	c.interrupt(true)
	c.addTimer(time.AfterFunc(c.s.opts.StopGrace, func() {
		select {
		case <-c.done:
		default:
			go c.s.h.End(&process.Result{Reason: process.Signaled, Signal: "KILL", Error: "a command did not stop after its execution timeout"}, syscall.SIGKILL)
		}
	}))
}

// interrupt sends SIGINT once the shell runs the command: sent earlier, it
// would reach a shell at its prompt, which shrugs it off and then runs the
// command all the same.
func (c *Command) interrupt(timedOut bool) {
	c.mu.Lock()
	if c.phase == phaseEnded {
		c.mu.Unlock()
		return
	}
	if timedOut {
		c.timedOut = true
	} else {
		c.interrupted = true
	}
	if c.runningAt.IsZero() { // not seen running yet
		c.pendingINT = true
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.sendINT()
}

// sendINT signals the shell's process group, as a terminal does on Ctrl-C,
// then sends the end line again while the end has not come: a shell that
// buffers its input drops what it read ahead when interrupted.
//
// In the moment between announcing a command and running it, bash lets an
// interrupt pass and then runs the command all the same. So an interrupt
// that comes that early waits until the command runs a program of its own or
// has run a little while since the announcement, whichever is first; this is
// the interrupt's path, not a command's, and the wait is short and bounded.
// A shell that announces nothing (see announces) counts as running from the
// moment its command was sent; an interrupt for it first waits until the
// shell is seen to have entered the command (see entered), for at most
// enterWithin, and then settles from that moment — unless the command has
// run for a good while already and the shell is in it. So does one for a
// command of a shell that announces, whose start was never seen (its
// interrupt goes with its end line's nudge: see nudgeUnstarted).
//
// Nor does an interrupt go while a process of the command is still a copy
// of the shell, unless one runs a program already: a child between fork and
// exec has the shell's handler, which takes the SIGINT in the shell's stead,
// and the program it becomes never sees it (under load, one interrupt in a
// few thousand was lost so, the command running to its end). It waits for
// the copy to become a program or end, for at most execWithin: a subshell
// may stay a copy for as long as it runs.
//
// Before the command has a process, once settled, the interrupt goes when
// the shell is asleep or has used busyFor of CPU since, for at most
// asleepWithin: a shell that is slow to fork the command's first program (a
// starved machine) takes SIGINT while it forks, and bash, dash, zsh and
// mksh then wait for the program to its end; a shell that runs builtins
// uses CPU all the while, and one that forks hardly any.
//
// And while the command runs a program, the interrupt goes when the shell
// is asleep — waiting for the program — for at most asleepWithin: a shell
// that has just forked it is still setting up its wait, and bash 5.2, if
// SIGINT lands just as it installs the handler of that wait, re-raises the
// signal to itself from that handler for ever, at full CPU, reaping nothing
// (under load, one interrupt in about 20,000 was lost so).
func (c *Command) sendINT() {
	c.mu.Lock()
	since, unseen := time.Since(c.runningAt), c.runningAt.IsZero()
	c.mu.Unlock()
	look := !announces(c.s.sh) || unseen
	shell := c.s.cmd.Process.Pid
	if !look && since >= settleAfterStart || look && since >= settledLongAgo && c.entered() {
		program, copying := c.processKinds()
		asleep := proctree.Sleeping(shell)
		if program && asleep || !program && !copying && (asleep || since >= settledLongAgo) {
			c.signalINT()
			return
		}
	}
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		now := time.Now()
		settled, gaveUp := now.Add(settleAfterStart-since), now.Add(enterWithin)
		var programAt time.Time // when a program of the command was first seen
		cpuFrom := time.Duration(-1)
		every := 2 * time.Millisecond
	wait:
		for entered := !look; ; {
			now = time.Now()
			if !entered {
				entered = c.entered() || !now.Before(gaveUp)
				if entered {
					settled, every = now.Add(settleAfterStart), 2*time.Millisecond
				} else {
					// Each look lists /proc: a shell that is slow to
					// enter is looked at less and less often.
					every = min(2*every, 50*time.Millisecond)
				}
			}
			if entered {
				if programAt.IsZero() {
					switch program, copying := c.processKinds(); {
					case program:
						programAt = now
					case copying:
						if !now.Before(settled.Add(execWithin)) {
							break wait
						}
					case !now.Before(settled):
						// The shell runs builtins, or is slow to fork the
						// command's first program: it sleeps, or has
						// worked a while, or the interrupt goes anyway.
						cpu, _ := proctree.CPUTime(shell)
						if cpuFrom < 0 {
							cpuFrom = cpu
						}
						if proctree.Sleeping(shell) || cpu-cpuFrom >= busyFor || !now.Before(settled.Add(asleepWithin)) {
							break wait
						}
						// Each look lists /proc, on a machine short of CPU.
						every = min(2*every, 20*time.Millisecond)
					}
				}
				// Once a program has run, only the shell is looked at.
				if !programAt.IsZero() && (proctree.Sleeping(shell) || !now.Before(programAt.Add(asleepWithin))) {
					break
				}
			}
			select {
			case <-c.done:
				return
			case <-time.After(every):
			}
		}
		c.signalINT()
	}()
}

// settledLongAgo is how long a command of a shell that announces nothing
// must have been sent for an interrupt to go at once when the shell is in
// it: it has settled unless the shell stalled that long before it (see
// sendINT).
const settledLongAgo = time.Second

// execWithin bounds how long an interrupt that has settled waits for a copy
// of the shell among the command's processes to become a program (see
// sendINT).
const execWithin = time.Second

// busyFor is how much CPU a shell with no process in its command uses,
// once its interrupt has settled, for the interrupt to go at once: it runs
// builtins, not its way to a fork (see sendINT).
const busyFor = 5 * time.Millisecond

// asleepWithin bounds how long an interrupt waits for the shell to fall
// asleep while its command runs a program, or to fall asleep or work
// before it has one (see sendINT): a shell that runs a builtin loop beside a
// program it started in the background never sleeps, and one stopped
// (SIGSTOP, a debugger) does neither.
const asleepWithin = time.Second

// enterWithin bounds how long an interrupt waits for a shell that announces
// nothing to enter its command (see sendINT): past it, the shell is stuck
// elsewhere, and the interrupt goes as it would at a terminal.
const enterWithin = 5 * time.Second

// entered reports whether the shell is seen to run the command: it holds
// the command's streams open — the frame's redirections are in place, which
// happens only as the command starts (and again for its end line, when it
// has run) — or the command has a process of its own.
func (c *Command) entered() bool {
	c.mu.Lock()
	paths := c.streamPaths
	c.mu.Unlock()
	if paths[0] == "" {
		return false
	}
	var streams []os.FileInfo
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			streams = append(streams, fi)
		}
	}
	dir := "/proc/" + strconv.Itoa(c.s.cmd.Process.Pid) + "/fd/"
	fds, _ := os.ReadDir(dir)
	for _, fd := range fds {
		fi, err := os.Stat(dir + fd.Name()) // what the descriptor is open on
		if err == nil && slices.ContainsFunc(streams, func(s os.FileInfo) bool { return os.SameFile(s, fi) }) {
			return true
		}
	}
	return len(c.processes()) > 0
}

// processKinds reports whether the command has a process that is not (or no
// longer) a copy of the shell — a program — and whether it has one that is
// still a copy: a child between fork and exec, which still has the shell's
// handlers and lets SIGINT pass as the shell would, or a subshell.
func (c *Command) processKinds() (program, copying bool) {
	shell, _ := os.ReadFile("/proc/" + strconv.Itoa(c.s.cmd.Process.Pid) + "/comm")
	for _, pid := range c.processes() {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		switch {
		case err != nil: // gone
		case bytes.Equal(comm, shell):
			copying = true
		default:
			return true, copying
		}
	}
	return false, copying
}

// settleAfterStart bounds how long an interrupt waits for a command that has
// just started (see sendINT).
const settleAfterStart = 100 * time.Millisecond

// signalINT interrupts the shell, and the command's jobs, unless the
// command has ended. The look that it has not and the signal are one step
// under the session's intMu, which the next command's frame waits for: the
// queue sends that frame only once this command has ended, so the
// interrupt reaches the shell before any byte of it. Sent after, it aborted
// the next command — failed, or interrupted, its output lost — when the
// command ended by itself just as it was interrupted.
func (c *Command) signalINT() {
	c.s.intMu.Lock()
	defer c.s.intMu.Unlock()
	select {
	case <-c.done:
		return
	case <-c.s.exited:
		// Reaped, the shell's group may be another's; its command ends
		// once the session has (see endAfterSession).
		return
	default:
	}
	if signallingINT != nil {
		signallingINT(c)
	}
	shell := c.s.cmd.Process.Pid
	syscall.Kill(-shell, syscall.SIGINT)
	c.s.intSinceFrame = true
	c.mu.Lock()
	if c.intSent != nil {
		close(c.intSent)
		c.intSent = nil
	}
	c.mu.Unlock()
	proctree.Unstop(shell, syscall.SIGINT) // a command that stopped its own shell (kill -STOP $$)
	for _, pid := range c.processes() {
		if leadsJob(pid, shell) {
			syscall.Kill(-pid, syscall.SIGINT)
		}
		proctree.Unstop(pid, syscall.SIGINT)
	}
	c.nudge(20 * time.Millisecond)
}

// takeINTWithin bounds how long a frame waits for the shell to take an
// interrupt signalled to it (see awaitINTTaken): one that blocks SIGINT, or
// runs a trap of it that takes long, gets the frame after it.
const takeINTWithin = 100 * time.Millisecond

// scheduleWithin bounds how long a frame waits for a shell that has yet to
// run at all since it was signalled: SIGINT pending and not blocked, the
// shell neither stopped nor traced. Such a shell takes the signal as soon as
// it runs, which a busy machine may put off for longer than takeINTWithin.
const scheduleWithin = 10 * time.Second

// awaitINTTaken waits until the shell has taken the SIGINT signalled to it
// — none is pending for it — and is back at its prompt, for at most
// takeINTWithin, or scheduleWithin while the shell has not run. A signal is
// pending from the kill until the shell is next scheduled; a shell blocked
// in the read of its input that is woken by a frame written meanwhile
// returns the frame from its read, then takes the signal, and dash and
// busybox sh drop the frame (see dropsReadAfterINT).
func (s *Session) awaitINTTaken() {
	pid := s.cmd.Process.Pid
	wait := 50 * time.Microsecond
	start := time.Now()
	for {
		waiting := intWaiting(pid)
		if waiting == intTaken && s.atPrompt() {
			return
		}
		bound := takeINTWithin
		if waiting == intDeliverable {
			bound = scheduleWithin
		}
		if time.Since(start) >= bound {
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// What becomes of a SIGINT sent to a process (see intWaiting).
const (
	intTaken       = iota // none is pending
	intDeliverable        // pending, taken once the process runs
	intHeld               // pending, blocked or the process stopped
)

// intWaiting reports whether a SIGINT waits to be taken by process pid —
// sent to it (SigPnd, its main thread's) or to its group (ShdPnd) — and if
// so whether it is taken once the process runs, or held: blocked (SigBlk),
// or the process stopped or traced.
func intWaiting(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return intTaken
	}
	const bit = 1 << (syscall.SIGINT - 1)
	pending, held := false, false
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch name {
		case "State":
			held = held || strings.HasPrefix(value, "T") || strings.HasPrefix(value, "t")
		case "SigPnd", "ShdPnd", "SigBlk":
			v, err := strconv.ParseUint(value, 16, 64)
			if err != nil || v&bit == 0 {
				continue
			}
			if name == "SigBlk" {
				held = true
			} else {
				pending = true
			}
		}
	}
	switch {
	case !pending:
		return intTaken
	case held:
		return intHeld
	}
	return intDeliverable
}

// signallingINT, when a test sets it, is called with each command whose
// interrupt is about to be signalled, once it was seen not to have ended.
var signallingINT func(*Command)

// leadsJob reports whether pid leads a process group in the shell's
// session: a job, once a command turned job control on (set -m), which
// gives each job a group of its own, out of the shell's that an interrupt
// signals. At a terminal Ctrl-C reaches the foreground job's group; with
// no terminal there is no foreground group to tell from the others, so a
// job the command started in the background gets the interrupt too. A
// process that left the session (setsid) is out of Ctrl-C's reach, as at a
// terminal.
func leadsJob(pid, shell int) bool {
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		return false
	}
	sid, err := unix.Getsid(pid)
	return err == nil && sid == shell // the shell leads its session
}

func (c *Command) nudge(after time.Duration) {
	c.addTimer(time.AfterFunc(after, func() {
		select {
		case <-c.done:
			return
		default:
		}
		if c.s.deadlocked() {
			go c.s.h.End(&process.Result{Reason: process.Lost, Error: deadlockError}, syscall.SIGKILL)
			return
		}
		c.mu.Lock()
		end := c.frame.End
		c.noReuse = true
		c.mu.Unlock()
		c.s.write(end)
		if after < 2*time.Second {
			c.nudge(2 * after)
		}
	}))
}

// deadlockError says why a session whose shell deadlocked on an interrupt
// ended.
const deadlockError = "the shell deadlocked on the interrupt (busybox can, interrupted inside its allocator); the session ended"

// deadlocked reports whether the shell, a single-threaded program, sleeps on
// a futex: no other thread can ever wake it, so it never will. busybox sh
// does this now and then when SIGINT lands while its handler cannot safely
// jump out (it leaves a libc lock held).
func (s *Session) deadlocked() bool {
	pid := strconv.Itoa(s.cmd.Process.Pid)
	sc, err := os.ReadFile("/proc/" + pid + "/syscall")
	if err != nil {
		return false
	}
	nr, _, _ := strings.Cut(string(sc), " ")
	if nr != strconv.Itoa(unix.SYS_FUTEX) {
		return false
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	return err == nil && strings.Contains(string(status), "\nThreads:\t1\n")
}

// processes returns the command's processes: the shell's children that
// started with or after the command (see own), and their descendants. Not
// background jobs of earlier commands, nor what those jobs start while the
// command runs: those descend from a child the shell forked before.
func (c *Command) processes() []int {
	work, _ := proctree.StartedUnder(c.s.cmd.Process.Pid, c.own)
	return work
}

// own keeps of children, the shell's, those the command started: those
// that started with or after it. See [proctree.StartedSince] for how they
// are told apart.
func (c *Command) own(children []int) []int {
	c.mu.Lock()
	started, last := c.startedAt, c.lastPID
	c.mu.Unlock()
	if started.IsZero() {
		return nil // still queued: nothing of it runs yet
	}
	return proctree.StartedSince(children, started, last)
}

// Stop ends the command for deletion as kill does: SIGTERM to its
// processes, so that a program's handler runs, then after the session's
// StopGrace an interrupt, for what runs in the shell itself (a builtin
// loop, a loop of programs), and SIGKILL. A command still running StopGrace after that (a builtin loop that traps
// SIGINT) cannot be stopped without its session: the error wraps
// process.ErrUnsupported.
func (c *Command) Stop(ctx context.Context) error {
	switch c.state() {
	case process.Terminal:
		// Nothing of it to stop, as for Kill: its processes are matched
		// by when they started, and signalled now that would reach later
		// commands' (a DELETE of an ended command's record sent TERM to
		// the command running then, and to its jobs).
		return nil
	case process.Starting:
		if c.endQueued(process.Result{Reason: process.Signaled, Signal: "TERM", Error: "deleted before it started"}) {
			return nil
		}
	}
	c.signal(syscall.SIGTERM)
	for _, escalate := range []bool{true, false} {
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.s.opts.StopGrace):
		}
		if escalate {
			// The interrupt first, and KILL once it went (it may wait for
			// the shell: see sendINT), for at most StopGrace: a program
			// the interrupt ends dies of SIGINT, which ends a loop that
			// runs it, where bash goes on with a loop whose program died
			// of anything else. KILL then ends what the interrupt did not.
			c.mu.Lock()
			if c.intSent == nil {
				c.intSent = make(chan struct{})
			}
			sent := c.intSent
			c.mu.Unlock()
			c.interrupt(false)
			select {
			case <-sent:
			case <-c.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(c.s.opts.StopGrace):
			}
			c.signal(syscall.SIGKILL)
		}
	}
	return fmt.Errorf("%w: the command did not stop within %v; delete its session", process.ErrUnsupported, c.s.opts.StopGrace)
}

// Resize fails: session commands have no terminal.
func (c *Command) Resize(process.TerminalSize) error { return process.ErrNotPTY }
