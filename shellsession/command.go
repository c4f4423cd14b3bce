package shellsession

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/google/uuid"
)

// Command is one command submitted to a session. It implements
// process.Process.
type Command struct {
	s         *Session
	id        string
	opts      CommandOptions
	log       *logstore.Log
	createdAt time.Time
	done      chan struct{} // closed once result is set
	result    process.Result
	stdin     resident.Stdin
	text      string // the head of opts.Cmd the record keeps (see process.KeepText)
	textBytes int    // the length of opts.Cmd

	// mu guards the fields below. It is never held while taking s.mu or
	// writing to the shell; s.mu may be held while taking it (see running).
	mu            sync.Mutex
	phase         phase // where it is; moved only by advanceLocked
	startedAt     time.Time
	exitedAt      time.Time
	cwd           string         // the directory it started in
	lastPID       int            // the last pid handed out before it started (see processes)
	endPID        int            // the last pid handed out when it ended (see Tree)
	frame         sentinel.Frame // set when announced
	runningAt     time.Time      // when it reached phaseRunning
	noReuse       bool           // its streams must not serve a later command (see reusable)
	pendingINT    bool           // an interrupt waits for phaseRunning
	interrupted   bool           // kill INT reached it
	timedOut      bool
	ends          int // stream end markers seen
	end           sentinel.End
	endsDone      chan struct{}      // closed when it reaches phaseEnding by its markers or giveUp
	stdinOpened   chan struct{}      // closed when the stdin feeder's open has returned
	keepers       []*resident.Keeper // our write ends that hold the streams open until their markers
	keepersClosed bool
	readers       int           // stream readers that have not returned
	readersDone   chan struct{} // closed when both stream readers have returned
	timers        []*time.Timer

	sent []syscall.Signal // signals other than INT that kill sent to its processes

	meter resident.Meter // what it costs, from begin on; guarded by mu
}

func (s *Session) newCommand(opts CommandOptions) *Command {
	if opts.Stdin == "" {
		opts.Stdin = process.StdinClosed
	}
	keep := opts.KeepLogs
	if keep == "" {
		keep = logstore.KeepUntilCleanup
	}
	c := &Command{
		s: s, id: uuid.NewString(), opts: opts,
		log:         logstore.New(logstore.Options{Retention: s.opts.Retention, Keep: keep}),
		createdAt:   time.Now(),
		done:        make(chan struct{}),
		endsDone:    make(chan struct{}),
		stdinOpened: make(chan struct{}),
		readersDone: make(chan struct{}),
		readers:     2,
	}
	c.text, c.textBytes = process.KeepText(opts.Cmd)
	c.stdin.Init(opts.Stdin == process.StdinOpen, false)
	return c
}

// ID returns the command's id.
func (c *Command) ID() string { return c.id }

// Session returns the session the command belongs to.
func (c *Command) Session() *Session { return c.s }

// Log returns the command's output.
func (c *Command) Log() *logstore.Log { return c.log }

// Done is closed once the command is terminal.
func (c *Command) Done() <-chan struct{} { return c.done }

// Result returns how the command ended; valid once Done is closed.
func (c *Command) Result() process.Result { return c.result }

func (c *Command) state() process.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase.state()
}

// Info describes the command.
func (c *Command) Info() process.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := process.Info{
		ID: c.id, Name: c.opts.Name, Kind: process.KindSession, State: c.phase.state(),
		SessionID: c.s.id, ShellCommand: c.text, ShellCommandBytes: c.textBytes, Shell: c.s.sh.Name,
		ResolvedShell: c.s.sh.Path, Cwd: c.cwd, Stdin: c.opts.Stdin,
		ExecutionTimeout: c.opts.ExecutionTimeout, KeepLogs: c.log.Keep(),
		CreatedAt: c.createdAt, StartedAt: c.startedAt, ExitedAt: c.exitedAt,
	}
	if c.phase == phaseEnded {
		r := c.result
		i.Result = &r
		i.StdinDroppedBytes = c.stdin.Dropped()
	}
	return i
}

// Cancel fails a command that never ran (its session ended first).
func (c *Command) Cancel(err error) {
	c.finish(process.Result{Reason: process.Failed, Error: err.Error()})
}

// Run runs the command in its session's shell; the session's queue calls it.
func (c *Command) Run() {
	s := c.s
	if c.state() == process.Terminal { // deleted while queued
		return
	}
	select {
	case <-s.exited:
		c.Cancel(fmt.Errorf("session %s: %w", s.id, ErrSessionEnded))
		return
	default:
	}
	s.mu.Lock()
	cwd, prev, traced, run := s.cwd, s.lastStatus, tracesCommand(s.sh, s.flags), runner(s.sh, s.flags)
	s.mu.Unlock()

	// The whole text is needed only here: the record keeps its head.
	cmd := c.opts.Cmd
	c.opts.Cmd = ""
	chk := check(context.Background(), s.sh, s.parser, cmd)
	if chk.err != "" || chk.empty {
		status := 0
		if c.begin(cwd, sentinel.Frame{}) != nil {
			return // ended (deleted) as it was taken up
		}
		if chk.err != "" {
			status = 2
			c.log.Write(logstore.Stderr, []byte(chk.err+"\n"))
		}
		r := process.ExitedWith(status)
		r.Cwd = s.recordEnd(status, nil)
		c.finish(r)
		return
	}

	st, err := s.takeStreams(c.opts.Stdin == process.StdinOpen)
	text := scriptText(s.sh, cmd, traced)
	if err == nil && run != sentinel.RunText {
		err = s.writeScript(text)
	}
	if err != nil {
		s.release(st)
		c.finish(process.Result{Reason: process.Failed, Error: fmt.Sprintf("prepare streams: %v", err)})
		return
	}
	paths := sentinel.Paths{
		Stdin: st.stdin, Stdout: st.out.Path, Stderr: st.err.Path, Script: s.scriptPath(),
		Announce: announces(s.sh), Calls: frameCalls(s.sh), Run: run,
	}
	if run == sentinel.RunText {
		paths.Text = text
	}
	if traced {
		paths.Before = untrace
	}
	f, err := s.newFrame(prev, paths)
	if err != nil {
		s.release(st)
		c.finish(process.Result{Reason: process.Failed, Error: fmt.Sprintf("prepare streams: %v", err)})
		return
	}
	if c.begin(cwd, f) != nil { // ended (deleted) as it was taken up
		s.release(st)
		return
	}
	s.wg.Add(1)
	go c.readStreams(st.out, st.err)
	if st.stdin != "" {
		s.wg.Add(1)
		go c.feedStdin(st.stdin)
	}
	if t := c.opts.ExecutionTimeout; t > 0 {
		c.addTimer(time.AfterFunc(t, c.timeout))
	}
	text = f.Text
	if keepsReadAhead(s.sh) {
		// The shell keeps what it read ahead when a command aborts, so the
		// end line can go with the command and save a round trip.
		text += f.End
	} else {
		// The end line follows once the shell runs the command (see
		// started); should that never be seen, it follows anyway.
		c.nudgeUnstarted(time.Second)
	}
	if announces(s.sh) {
		s.diag.Watch(f.Start, false, func([]byte) { c.started() })
	} else {
		c.markRunning()
	}
	s.diag.Watch(f.Failed, true, c.streamsFailed)
	if err := s.write(text); err != nil {
		<-s.exited // a failed write means the shell is gone
	}
	c.watchIdle(time.Second)
	defer s.fillPool()

	select {
	case <-c.endsDone: // streamEnded finished the command
	case <-s.exited:
		c.shellExited(st)
	}
}

// streamsFailed ends a command whose end line could not write its markers:
// the shell could not open the command's streams, most likely because a
// command lowered its limit on open files. The command did not run (or its
// end could not be told); its streams are given up.
func (c *Command) streamsFailed(trailer []byte) {
	status, err := strconv.Atoi(string(trailer))
	if err != nil {
		status = 1
	}
	c.giveUp(process.Result{Reason: process.Failed, ExitCode: &status,
		Error: "the shell could not open the command's output streams (too many open files? see ulimit -n)"})
}

// giveUp ends the command with r when its end markers will not come, unless
// they came after all. Its streams are given up, never reused; the shell's $?
// for the next command is r's exit code, if it has one.
func (c *Command) giveUp(r process.Result) {
	c.mu.Lock()
	if c.advanceLocked(phaseEnding) != nil { // ended already
		c.mu.Unlock()
		return
	}
	c.noReuse = true
	c.mu.Unlock()
	if r.ExitCode != nil {
		r.Cwd = c.s.recordEnd(*r.ExitCode, nil)
	}
	c.closeKeepers()
	c.finish(r)
	close(c.endsDone)
}

// begin moves the queued command to phaseAnnounced with frame f; it fails
// when the command has ended (deleted) since Run took it up.
func (c *Command) begin(cwd string, f sentinel.Frame) error {
	last := -1
	if f.Nonce != "" { // it runs in the shell: its processes will be told apart
		last = proctree.LastPID()
	}
	meter := c.s.h.Meter()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.advanceLocked(phaseAnnounced); err != nil {
		return err
	}
	c.lastPID = last
	c.meter = meter
	c.startedAt = time.Now()
	c.cwd = cwd
	c.frame = f
	return nil
}

// resultFor turns how the shell saw the command end into its result: a
// timeout shows as timed_out; a death status after kill sent signal N as
// signaled N, as for a process the engine signalled; an interrupt the engine
// sent as INT. A command that caught a signal and exited with a status of its
// own reports that status.
func (c *Command) resultFor(r process.Result) process.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch sig := c.killedBy(r); {
	case c.timedOut:
		r.Reason = process.TimedOut
	case sig != 0:
		r.Reason, r.Signal = process.Signaled, process.SignalName(sig)
	case c.interrupted:
		r.Reason, r.Signal = process.Signaled, "INT"
	}
	return r
}

// killedBy returns the signal kill sent whose death status r has, or 0.
// The death status of signal N is 128+N; ksh93's is 256+N, which its `.`
// (the command's frame) passes on as N.
func (c *Command) killedBy(r process.Result) syscall.Signal {
	if r.Reason != process.Exited || r.ExitCode == nil {
		return 0
	}
	status := *r.ExitCode
	for _, sig := range c.sent {
		if n := int(sig); status == 128+n || c.s.sh.Family == shells.Ksh && status == n {
			return sig
		}
	}
	return 0
}

// shellExited ends a command whose shell exited under it: with the shell's
// exit status when it exited (exit 3, exec, set -e), lost when it was killed.
func (c *Command) shellExited(st *streams) {
	if st.stdin != "" {
		c.unblockStdin(st.stdin)
	}
	c.closeKeepers()
	select {
	case <-c.readersDone:
	case <-time.After(c.s.opts.DrainDelay): // background jobs may hold the streams open
	}
	r := process.Result{Reason: process.Lost, Error: "the session's shell died"}
	if ws, ok := c.s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			// exit 3, exec, set -e: the command ended the shell and
			// reports what it did.
			r = c.resultFor(process.ExitedWith(ws.ExitStatus()))
		case ws.Signaled():
			r.Error = "the session's shell was killed by SIG" + process.SignalName(ws.Signal())
		}
	}
	c.mu.Lock()
	if r.Reason == process.Lost && c.timedOut {
		// Ended by the engine after the command outlived its timeout.
		r = process.Result{Reason: process.TimedOut}
	}
	c.mu.Unlock()
	c.finish(r)
}

// atEOF reports whether f, a non-blocking read end, is at end-of-file now,
// without waiting. Bytes it reads are discarded: after an end marker they
// belong to no command.
func atEOF(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var buf [512]byte
	eof := false
	rc.Read(func(fd uintptr) bool {
		n, err := syscall.Read(int(fd), buf[:])
		eof = n == 0 && err == nil
		return true // one attempt, never wait
	})
	return eof
}

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func (c *Command) readerReturned() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readers--; c.readers == 0 {
		close(c.readersDone)
	}
}

func (c *Command) addKeeper(f *resident.Keeper) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keepersClosed {
		f.Close()
		return
	}
	c.keepers = append(c.keepers, f)
}

func (c *Command) closeKeeper(f *resident.Keeper) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range c.keepers {
		if k == f {
			c.keepers = append(c.keepers[:i], c.keepers[i+1:]...)
			f.Close()
			return
		}
	}
}

// closeKeepers lets the readers see end-of-file once the shell is gone.
func (c *Command) closeKeepers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepersClosed = true
	for _, k := range c.keepers {
		k.Close()
	}
	c.keepers = nil
}

// streamEnded records that a stream reached its end marker (end non-nil) or
// ended without one.
func (c *Command) streamEnded(end *sentinel.End) {
	c.mu.Lock()
	if c.phase >= phaseEnding {
		c.mu.Unlock()
		return
	}
	c.ends++
	if end.Cwd != "" {
		c.end = *end
	}
	done := c.ends == 2 && c.advanceLocked(phaseEnding) == nil
	e := c.end
	if c.interrupted {
		e.Status = interruptedStatus(c.s.sh, c.frame.Run, e.Status)
	}
	c.mu.Unlock()
	if done {
		// Finish here rather than in Run: whoever waits for the command
		// wakes without a hop through the queue's goroutine.
		r := c.resultFor(process.ExitedWith(e.Status))
		r.Cwd = c.s.recordEnd(e.Status, &e)
		c.finish(r)
		close(c.endsDone)
	}
}

// started records that the shell runs the command (its start marker came on
// the shell's stdout): the end line can follow, and an interrupt that waited
// for it is delivered.
func (c *Command) started() {
	c.mu.Lock()
	first := c.markRunningLocked()
	pending := c.pendingINT
	c.pendingINT = false
	end := c.frame.End
	c.mu.Unlock()
	if first {
		if !keepsReadAhead(c.s.sh) {
			c.s.write(end)
		}
		if pending {
			c.sendINT()
		}
	}
}

// reusable reports whether the command's streams may serve a later command
// once clean: not when an end line was sent again — the shell may run it
// later, and if the first was cut short before its guard, it writes this
// command's markers into whatever command uses the stream then — nor when
// the command's end was given up.
func (c *Command) reusable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.noReuse
}

// markRunning records that the command runs, for shells that announce
// nothing.
func (c *Command) markRunning() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.markRunningLocked()
}

// markRunningLocked moves an announced command to phaseRunning and reports
// whether it did. A start marker that comes after the end (the end line was
// sent again, see nudgeUnstarted) or twice moves nothing.
func (c *Command) markRunningLocked() bool {
	if c.phase != phaseAnnounced {
		return false
	}
	c.advanceLocked(phaseRunning) // legal from phaseAnnounced
	c.runningAt = time.Now()
	return true
}

// announces reports whether sh is told to announce that it runs a command,
// which an interrupt waits for: one sent earlier would reach a shell still
// waiting for input, which would shrug it off and then run the command. mksh
// is not told (see keepsReadAhead); an interrupt for it waits only as long as
// any does after a command starts (see sendINT).
func announces(sh shells.Shell) bool { return sh.Family != shells.Mksh }

// keepsReadAhead reports whether sh keeps the input it read ahead when a
// command aborts (bash), or may drop it (dash, busybox, zsh, ksh93). mksh
// keeps it too; it also crashes (heap corruption) when a start marker is
// written before a sourced file that defines an alias, so it gets none.
func keepsReadAhead(sh shells.Shell) bool {
	return sh.Family == shells.Bash || sh.Family == shells.Mksh
}

// nudgeUnstarted sends the end line if the command has not been seen to
// start after a while, and again after twice as long, and so on.
func (c *Command) nudgeUnstarted(after time.Duration) {
	c.addTimer(time.AfterFunc(after, func() {
		c.mu.Lock()
		started, end := c.phase != phaseAnnounced, c.frame.End
		c.mu.Unlock()
		if started {
			return
		}
		c.mu.Lock()
		c.noReuse = true
		c.mu.Unlock()
		c.s.write(end)
		c.nudgeUnstarted(2 * after)
	}))
}

func (c *Command) addTimer(t *time.Timer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase == phaseEnded {
		t.Stop()
		return
	}
	c.timers = append(c.timers, t)
}

// finish makes the command terminal with r, once.
func (c *Command) finish(r process.Result) {
	c.mu.Lock()
	if c.advanceLocked(phaseEnded) != nil { // ended already
		c.mu.Unlock()
		return
	}
	c.result = c.meter.Account(r)
	c.exitedAt = time.Now()
	c.endPID = proctree.LastPID()
	if c.startedAt.IsZero() {
		c.startedAt = c.exitedAt
	}
	for _, t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	f := c.frame
	c.mu.Unlock()
	if f.Failed != nil {
		c.s.diag.Unwatch(f.Failed)
		c.s.diag.Unwatch(f.Start)
	}
	c.stdin.Close()
	c.log.Close()
	close(c.done)
}
