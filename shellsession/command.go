package shellsession

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
)

// Command is one command submitted to a session. It implements
// process.Process.
type Command struct {
	s         *Session
	id        string
	opts      CommandOptions
	log       logstore.Log // its output, living in the command (see logstore.Log.Init)
	createdAt time.Time
	done      chan struct{} // closed once result is set
	result    process.Result
	// inputFrom is how many bytes the shell's input had been sent before
	// the command's frame, once inputSent (see neverRead).
	inputFrom int64
	inputSent bool
	// prepErr is why the engine could not prepare the command's streams,
	// set before done is closed: the session's first command, failed so,
	// refuses the session with it (too many open files is the daemon's
	// limit, not what the session was asked to start).
	prepErr   error
	stdin     resident.Stdin
	text      string      // the head of opts.Cmd the record keeps (see process.KeepText)
	textBytes int         // the length of opts.Cmd
	holdsTurn bool        // Begin gave it the queue's turn: TakeTurn runs it; set before it is recorded
	ranHere   atomic.Bool // TakeTurn was called
	streams   streams     // the streams it runs with (see start), held here rather than allocated apart
	loop      readLoop    // what reads them (see startReading), likewise
	// stepping is set while the goroutine that reads the streams has
	// something to read, from its wake until it has taken what it read
	// (see readLoop.step).
	stepping atomic.Bool

	// mu guards the fields below. It is never held while taking s.mu or
	// writing to the shell; s.mu may be held while taking it (see running).
	mu            sync.Mutex
	phase         phase // where it is; moved only by advanceLocked
	startedAt     time.Time
	exitedAt      time.Time
	cwd           string         // the directory it started in
	lastPID       int            // the last pid handed out before it started (see processes)
	endPID        int            // the last pid handed out when it ended, as far as Tree needs it (see endedBefore)
	frame         sentinel.Frame // set when announced
	streamPaths   [2]string      // its stdout and stderr FIFOs, set when announced
	idleAt        time.Time      // when the session next looks whether it is over unreported (see watchIdle)
	idleEvery     time.Duration  // how long the session waits between those looks
	idleOut       *os.File       // the read end of its stdout, where its end marker comes (see outputInFlight)
	runningAt     time.Time      // when it reached phaseRunning
	noReuse       bool           // its streams must not serve a later command (see reusable)
	pendingINT    bool           // an interrupt waits for phaseRunning
	interrupted   bool           // kill INT reached it
	intSent       chan struct{}  // closed once an interrupt was signalled (see signalINT); made by Stop
	timedOut      bool
	ends          int // streams ended: stdout at its marker, then stderr
	end           sentinel.End
	stdinOpened   chan struct{}      // with stdin open, closed when the stdin feeder's open has returned
	keepers       []*resident.Keeper // our write ends that hold the streams open until their markers
	keeperBuf     [2]*resident.Keeper
	keepersClosed bool
	ep            *epoller        // the epoll set await waits on, while it does (see kick)
	givenUp       *process.Result // giveUp's result, left for the goroutine that waits in ep
	timers        []*time.Timer
	timerBuf      [2]*time.Timer // timers' first room: most commands have one or two

	sent []syscall.Signal // signals other than INT that kill sent to its processes
	// waiting are signals other than INT that wait for its first program,
	// in the order sent (see sendOnceProgram).
	waiting []syscall.Signal

	meter    resident.Meter // what it costs, from begin on; guarded by mu
	usage    process.Usage  // the room for its result's usage (see Meter.Account)
	exitCode int            // the room for its result's exit code, when its markers end it (see streamEnded)
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
		s: s, id: process.NewID(), opts: opts,
		createdAt: time.Now(),
		done:      make(chan struct{}),
	}
	if opts.Stdin == process.StdinOpen {
		c.stdinOpened = make(chan struct{})
	}
	c.log.Init(logstore.Options{Retention: s.opts.Retention, Keep: keep, Held: opts.HoldLogs})
	c.timers, c.keepers = c.timerBuf[:0], c.keeperBuf[:0]
	c.text, c.textBytes = process.KeepText(opts.Cmd)
	c.stdin.Init(opts.Stdin == process.StdinOpen, false)
	return c
}

// ID returns the command's id.
func (c *Command) ID() string { return c.id }

// Session returns the session the command belongs to.
func (c *Command) Session() *Session { return c.s }

// Log returns the command's output.
func (c *Command) Log() *logstore.Log { return &c.log }

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

// Cancel fails with err a command that never ran: still queued, or given
// its turn by Begin and not run (its session ended first, or its caller
// gave up on it). A command the shell has taken up is left alone: Cancel
// does nothing to it, and it ends as the shell runs it, with its true
// result (end it with Kill or Stop).
func (c *Command) Cancel(err error) {
	// Only a queued one: ending one the shell runs reported it failed at
	// once while the shell ran it on, its output lost and its cd taken.
	c.endQueued(process.Result{Reason: process.Failed, Error: err.Error()})
}

// Run runs the command in its session's shell; the session's queue calls it.
func (c *Command) Run() {
	if rd, st := c.start(); rd != nil {
		c.await(nil, rd, st)
		c.s.fillPool()
	}
}

// TakeTurn runs a command that Begin returned holding the queue's turn, on
// the caller's goroutine, until it ends or ctx is done (see Begin). It
// returns at once for a command Begin queued, for one that ended before
// (its turn was given back), and on every call after the first.
func (c *Command) TakeTurn(ctx context.Context) {
	if c.holdsTurn && c.ranHere.CompareAndSwap(false, true) && c.s.h.Queue.Take(c) {
		c.runHere(ctx)
	}
}

// runHere runs the command on the goroutine of Session.Run, which holds the
// queue's turn (see queue.Queue.Claim), and ends the turn: when the command
// has ended, or, once ctx is done, from a goroutine that waits for the rest
// of it.
func (c *Command) runHere(ctx context.Context) {
	s := c.s
	rd, st := c.start()
	if rd == nil {
		s.h.Queue.Release()
		return
	}
	if c.await(ctx, rd, st) {
		s.fillPool()
		s.h.Queue.Release()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.await(nil, rd, st)
		s.fillPool()
		s.h.Queue.Release()
	}()
}

// start takes the command up and sends it to the shell. It returns how to
// read its streams, or nil when it ended without the shell: deleted while
// queued, the session gone, nothing to run, a syntax error, no streams.
func (c *Command) start() (*readLoop, *streams) {
	s := c.s
	if c.state() == process.Terminal { // deleted while queued
		return nil, nil
	}
	select {
	case <-s.exited:
		c.Cancel(fmt.Errorf("session %s: %w", s.id, ErrSessionEnded))
		return nil, nil
	default:
	}
	s.mu.Lock()
	cwd, prev, flags := s.cwd, s.lastStatus, s.flags
	s.mu.Unlock()
	traced := tracesCommand(s.sh, flags)

	// The whole text is needed only here: the record keeps its head.
	cmd := c.opts.Cmd
	c.opts.Cmd = ""
	var chk checkResult // plain words need no parse: they are a command
	if !plainCommand(cmd) {
		chk = check(context.Background(), s.sh, s.parser, cmd)
	}
	if chk.err != "" || chk.empty {
		status := 0
		if c.begin(cwd, sentinel.Frame{}) != nil {
			return nil, nil // ended (deleted) as it was taken up
		}
		if chk.err != "" {
			status = 2
			c.log.Write(logstore.Stderr, []byte(chk.err+"\n"))
		}
		r := process.ExitedWith(status)
		var tooLong bool
		if r.Cwd, tooLong = s.recordEnd(status, nil); tooLong {
			r.Error = sentinel.CwdTooLong
		}
		c.finish(r)
		return nil, nil
	}

	s.settleUnsettled() // their streams may serve this command
	st, err := s.takeStreams(&c.streams, c.opts.Stdin == process.StdinOpen)
	if err != nil {
		c.prepFailed(err)
		return nil, nil
	}
	text := scriptText(cmd, traced, prev)
	run := runner(s.sh, flags, chk.parsedLater)
	paths := sentinel.Paths{
		Stdin: st.stdin, Stdout: st.out.Path, Stderr: st.err.Path, Script: s.scriptName,
		Announce: announces(s.sh), Calls: frameCalls(s.sh), Run: run,
		EndInText: keepsReadAhead(s.sh), GuardInScript: guardsInScript(s.sh, flags, run),
	}
	if run == sentinel.RunText {
		paths.Text = text
	}
	if traced {
		paths.Before = untrace
	} else if reportsJobs(s.sh) {
		paths.Before = reportJobs
	}
	f, err := s.newFrame(prev, paths)
	if err == nil && run != sentinel.RunText {
		err = s.writeScript(f, paths.GuardInScript, text)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			// The file system is full (a command filled it) and the text
			// outgrows the command file: the frame carries it, as dash's
			// does, so that the command still runs.
			paths.Run, paths.Text = sentinel.RunText, text
			f, err = s.newFrame(prev, paths)
		}
	}
	if err != nil {
		s.release(st)
		c.prepFailed(err)
		return nil, nil
	}
	if c.begin(cwd, f) != nil { // ended (deleted) as it was taken up
		s.release(st)
		return nil, nil
	}
	c.mu.Lock()
	c.streamPaths = [2]string{st.out.Path, st.err.Path}
	c.mu.Unlock()
	if takenUp != nil {
		takenUp(c)
	}
	rd, err := c.startReading(st.out, st.err)
	if err != nil {
		// Not sent: with its streams not read, its end would never be
		// seen, and the caller would wait for it until its timeout (the
		// session's first command, for the session's readiness limit).
		c.prepFailed(err)
		return nil, nil
	}
	if st.stdin != "" {
		s.wg.Add(1)
		go c.feedStdin(st.stdin)
	}
	if t := c.opts.ExecutionTimeout; t > 0 {
		c.addTimer(time.AfterFunc(t, c.timeout))
	}
	end := ""
	if keepsReadAhead(s.sh) {
		// The shell keeps what it read ahead when a command aborts, so the
		// end line can go with the command and save a round trip: in its
		// text when the frame is not sourced from files (bash), where it
		// spares the shell the guard's look (Paths.EndInText).
		if !f.EndInText {
			end = f.End
		}
	} else {
		// The end line follows once the shell runs the command (see
		// started); should that never be seen, it follows anyway.
		c.nudgeUnstarted(time.Second)
	}
	if announces(s.sh) {
		s.diag.Watch(f.Start, false, (*startWatch)(c))
	} else {
		c.markRunning()
	}
	s.diag.Watch(f.Failed, true, (*failedWatch)(c))
	// An interrupt of the command before, being signalled, reaches the
	// shell before the frame (see signalINT). One that came as that
	// command ended found the shell at its prompt: zsh and mksh drop the
	// first line they read next, so an empty line goes first for them;
	// dash and busybox sh may take it only once their read has returned
	// the frame, and drop it, so the frame waits until they have taken it.
	s.intMu.Lock()
	interrupted := s.intSinceFrame
	s.intSinceFrame = false
	s.intMu.Unlock()
	switch {
	case !interrupted:
	case dropsLineAfterINT(s.sh):
		s.write("\n")
	case dropsReadAfterINT(s.sh):
		s.awaitINTTaken()
	}
	from, err := s.write(f.Text, end)
	c.mu.Lock()
	c.inputFrom, c.inputSent = from, true
	c.mu.Unlock()
	if err != nil {
		<-s.exited // a failed write means the shell is gone
	}
	c.watchIdle(st.out.R)
	return rd, st
}

// prepFailed ends the command that could not be prepared, not sent.
func (c *Command) prepFailed(err error) {
	c.prepErr = err
	c.finish(process.Result{Reason: process.Failed, Error: "prepare streams: " + c.s.whyNoStreams(err)})
}

// whyNoStreams says why a command could not get its streams: when the
// daemon is out of descriptors, which limit, and what the session's own
// held streams (see heldStreams) take of it, and how to let them go.
// Background jobs that keep their output (sleep 60 &, server &) are a
// common cause, and a session at the limit cannot run even the kill that
// would end them.
func (s *Session) whyNoStreams(err error) string {
	why, ok := process.Exhausted(err)
	if !ok || !process.OutOfFiles(err) {
		return err.Error()
	}
	if n := s.heldCommands(); n > 0 {
		why += fmt.Sprintf("; %d earlier commands of this session left background jobs that still hold their output streams, "+
			"each stream a descriptor of the daemon's until its job ends: end those jobs (from outside the session), "+
			"or delete the session, which ends them; a job started with its output redirected (cmd >/dev/null 2>&1 &) holds none", n)
	}
	return why
}

// await reads the command's streams until it has ended — by its end marker,
// read here, or given up (see giveUp) — or its shell has exited, and reports
// true; the streams still held open then are read on elsewhere (see
// readLoop.handOff). With ctx, it returns false once ctx is done before that: then await
// (without ctx) takes up where it left off.
func (c *Command) await(ctx context.Context, rd *readLoop, st *streams) bool {
	var cancelled <-chan struct{}
	if ctx != nil {
		if cancelled = ctx.Done(); cancelled != nil {
			// The session's kick wakes this command: it is the one that
			// reads its streams here (see startReading) until await returns.
			stop := context.AfterFunc(ctx, c.s.kickFn)
			defer stop()
		}
	}
	for {
		if r, ok := c.takeGivenUp(); ok {
			rd.readHeld()
			c.endGivenUp(r)
		}
		select {
		case <-c.done: // streamEnded (or giveUp) finished the command
			if !rd.settleLater() {
				rd.settle()
				rd.handOff()
			}
			return true
		case <-c.s.exited:
			c.shellExited(st, rd)
			rd.handOff()
			return true
		case <-cancelled:
			return false
		default:
		}
		if rd.live == 0 {
			// The readers returned before the end (the session ends).
			// A giveUp from now on ends the command itself.
			rd.stopKicks()
			if r, ok := c.takeGivenUp(); ok {
				c.endGivenUp(r)
			}
			select {
			case <-c.done:
			case <-c.s.exited:
				c.shellExited(st, rd)
			case <-cancelled:
				return false
			}
			rd.handOff()
			return true
		}
		if beforeStep != nil {
			beforeStep(c)
		}
		if err := rd.step(); errors.Is(err, os.ErrDeadlineExceeded) {
			// Kicked: the checks above say why.
			rd.ep.f.SetReadDeadline(time.Time{})
		}
	}
}

// kick wakes the goroutine reading the command's streams (see await), so
// that it sees that the command has ended or its shell has exited.
func (c *Command) kick() {
	c.mu.Lock()
	ep := c.ep
	c.mu.Unlock()
	if ep != nil {
		ep.f.SetReadDeadline(time.Now())
	}
}

// plainCommand reports whether text is one simple command of plain words —
// letters, digits, blanks and _./=:,+@%- only, on one line, no word a
// shell might take as a reserved word or parse as its own syntax — which
// every shell parses, so that the syntax check may skip its parse: most of
// an agent's commands are like this (ls -la, git status, make test).
func plainCommand(text string) bool {
	if len(text) == 0 || len(text) > 1024 {
		return false
	}
	words := false
	for i := 0; i < len(text); {
		if text[i] == ' ' || text[i] == '\t' {
			i++
			continue
		}
		j := i
		for ; j < len(text) && text[j] != ' ' && text[j] != '\t'; j++ {
			if !plainByte[text[j]] {
				return false
			}
		}
		if specialWords[text[i:j]] {
			return false
		}
		words, i = true, j
	}
	return words
}

var plainByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+@%-") {
		t[c] = true
	}
	return t
}()

// specialWords are the words plainCommand leaves to the parser: reserved
// words of any of the shells, and the builtins whose arguments the parser
// reads as syntax of their own (let's arithmetic, declare's assignments).
var specialWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true,
	"function": true, "select": true, "time": true, "coproc": true, "repeat": true,
	"foreach": true, "end": true, "nocorrect": true, "noglob": true, "let": true,
	"declare": true, "typeset": true, "local": true, "export": true, "readonly": true,
	"nameref": true, "integer": true, "float": true,
}

// streamsRemoved says why the command's end could not be reported when a
// command removed its streams (rm -rf of the session's directory, say with
// all of /dev/shm), else returns "". The next command makes them anew.
func (c *Command) streamsRemoved() string {
	c.mu.Lock()
	path := c.streamPaths[0]
	c.mu.Unlock()
	if path == "" {
		return ""
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	return fmt.Sprintf("the session's directory (%s), from which the engine reads commands' output, was removed or moved while the command ran (rm -rf? mv?): its end could not be reported there; the next command makes the directory anew", c.s.dir.Path())
}

// startWatch and failedWatch are a command as the watcher of its start
// marker (see started) and of its failure marker (see streamsFailed).
type (
	startWatch  Command
	failedWatch Command
)

func (w *startWatch) Seen([]byte)          { (*Command)(w).started() }
func (w *failedWatch) Seen(trailer []byte) { (*Command)(w).streamsFailed(trailer) }

// streamsFailed ends a command whose end line could not write its markers:
// the shell could not open the command's streams, most likely because a
// command lowered its limit on open files, or, on bash, the frame's guard
// did not hold the command's nonce (sentinel.Paths.EndInText): the command
// changed $__conch, or an earlier one made it read-only or an integer, so
// that the frame could not set it and the command did not run; or the
// frame's "." could not run the command file that sets it (see
// guardsInScript); or a command turned restricted mode on (ksh93's set -o
// restricted), which forbids the frame's redirections for good. (bash's
// set -r forbids them too, and the redirection by path that writes this
// marker where the shell's stderr is closed, see closeOwn: its commands
// end at the idle look.) Or the command file did not parse as bash read
// it, in a locale where the syntax check's reading (UTF-8) is not bash's,
// so that the guard never ran (see TestBig5LocaleText). Its streams are
// given up.
func (c *Command) streamsFailed(trailer []byte) {
	status, ok := sentinel.ParseStatus(trailer)
	if !ok {
		status = 1
	}
	c.giveUp(process.Result{Reason: process.Failed, ExitCode: &status,
		Error: "the shell could not report the command's end: it could not open the command's output streams (too many open files? see ulimit -n; restricted mode? set -r), or $__conch was changed (a command assigned it, or made it read-only), or it could not run the command (a command disabled a builtin the engine calls: enable -n, disable), or bash could not parse the text as it reads it in a locale whose characters can end in an ASCII byte (BIG5, GBK, GB18030, Shift_JIS: the syntax check reads UTF-8); see the README's shell matrix"})
}

// giveUp ends the command with r when its end markers will not come, unless
// they came after all; when its streams were removed, r's error says so
// rather than guess why. Its streams are given up, never reused; the
// shell's $? for the next command is r's exit code, if it has one.
func (c *Command) giveUp(r process.Result) {
	c.mu.Lock()
	if c.advanceLocked(phaseEnding) != nil { // ended already
		c.mu.Unlock()
		return
	}
	c.noReuse = true
	c.mu.Unlock()
	if gone := c.streamsRemoved(); gone != "" {
		r.Error = gone
	}
	if r.ExitCode != nil {
		var tooLong bool
		if r.Cwd, tooLong = c.s.recordEnd(*r.ExitCode, nil); tooLong && r.Error == "" {
			r.Error = sentinel.CwdTooLong
		}
	}
	c.closeKeepers()
	c.mu.Lock()
	if c.ep != nil {
		// The goroutine that reads the streams waits in c.ep: it takes
		// what they hold, the output the command wrote before its end
		// went unreported (a failure marker comes apart from it, on the
		// shell's stderr), and then ends the command (see takeGivenUp).
		c.givenUp = &r
		c.mu.Unlock()
		c.kick()
		return
	}
	c.mu.Unlock()
	c.endGivenUp(r)
}

// takeGivenUp returns the result giveUp left for the goroutine reading the
// command's streams, if it left one; the caller reads what the streams hold
// and then ends the command with it (endGivenUp).
func (c *Command) takeGivenUp() (process.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.givenUp
	if r == nil {
		return process.Result{}, false
	}
	c.givenUp = nil
	return *r, true
}

// endGivenUp ends with r a command whose end giveUp took over.
func (c *Command) endGivenUp(r process.Result) {
	c.finish(r)
	c.kick()
}

// pidNotRead is an ended command's endPID until a later command starts or
// Tree asks for it (see Session.endedBefore).
const pidNotRead = -2

// endedBefore gives the command that ended last, if its endPID is not read
// yet, last: the last pid handed out before the next command starts, read
// for that command. Every pid the shell handed out before it is the ended
// command's or a background job's (Tree tells later commands' processes
// apart by it), and it spares a read of /proc at every command's end.
func (s *Session) endedBefore(last int) {
	s.mu.Lock()
	c := s.lastEnded.Value()
	s.lastEnded = weak.Pointer[Command]{}
	s.mu.Unlock()
	if c != nil {
		c.endedBy(last)
	}
}

// endedBy sets the ended command's endPID to last, unless it is set.
func (c *Command) endedBy(last int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endPID == pidNotRead {
		c.endPID = last
	}
}

// begin moves the queued command to phaseAnnounced with frame f; it fails
// when the command has ended (deleted) since Run took it up.
func (c *Command) begin(cwd string, f sentinel.Frame) error {
	last := -1
	if f.Nonce != "" { // it runs in the shell: its processes will be told apart
		last = proctree.LastPID()
		c.s.endedBefore(last)
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
// sent, by the interrupt's death status, as INT. A command that caught a
// signal and exited with a status of its own reports that status.
func (c *Command) resultFor(r process.Result) process.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch sig := c.killedBy(r); {
	case c.timedOut:
		r.Reason = process.TimedOut
	case sig != 0:
		r.Reason, r.Signal = process.Signaled, process.SignalName(sig)
	case c.interrupted && c.diedOfINT(r):
		r.Reason, r.Signal = process.Signaled, "INT"
	}
	return r
}

// diedOfINT reports whether r's status is an interrupt's: 128+SIGINT, or
// for ksh93 one of 256 and over (its statuses of a death by signal: 258,
// and 256 for a builtin loop it aborted, seen on a busy machine) or SIGINT
// (as its "." passes on a program's). Only bash passes on the status of a
// program that caught the interrupt; the other shells see the SIGINT
// themselves and end the command with 130.
func (c *Command) diedOfINT(r process.Result) bool {
	if r.Reason != process.Exited || r.ExitCode == nil {
		return true
	}
	n, status := int(syscall.SIGINT), *r.ExitCode
	return status == 128+n || c.s.sh.Family == shells.Ksh && (status >= 256 || status == n)
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
func (c *Command) shellExited(st *streams, rd *readLoop) {
	if st.stdin != "" {
		c.unblockStdin(st.stdin)
	}
	c.closeKeepers()
	if rd.live > 0 {
		// The rest of its output, until end-of-file or for DrainDelay:
		// background jobs may hold the streams open.
		until := time.Now().Add(c.s.opts.DrainDelay)
		rd.ep.f.SetReadDeadline(until)
		for rd.live > 0 {
			if err := rd.step(); errors.Is(err, os.ErrDeadlineExceeded) {
				if time.Now().Before(until) { // a kick
					rd.ep.f.SetReadDeadline(until)
					continue
				}
				break
			}
		}
	}
	r := process.Result{Reason: process.Lost, Error: "the session's shell died"}
	if ws, ok := c.s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited() && c.s.h.EndedIt():
			// The engine ended the session under the command (kill of
			// the session, its deletion): the shell's status is its end's.
			r.Error = fmt.Sprintf("the session was ended under it (its shell exited %d)", ws.ExitStatus())
		case ws.Exited() && c.neverRead():
			// The shell ended on its own before it read the command (a
			// command before closed its input): the status is not this
			// command's, which never ran.
			r.Error = fmt.Sprintf("the session's shell exited (status %d) before it read the command", ws.ExitStatus())
		case ws.Exited():
			// exit 3, exec, set -e: the command ended the shell and
			// reports what it did.
			r = c.resultFor(process.ExitedWith(ws.ExitStatus()))
		case ws.Signaled() && c.s.h.OOMKilledIt():
			r.Error = "the OOM killer ended the session's shell at the memory limit"
		case ws.Signaled() && c.s.h.EndedIt():
			// Deleted (conch session rm) or killed through the engine:
			// "killed by SIGKILL" alone read as a kill from outside.
			r.Error = "the session was ended under it (its shell was killed by SIG" + process.SignalName(ws.Signal()) + ")"
		case ws.Signaled() && c.sentIt(ws.Signal()):
			// A kill of the command, whose program ended of it: one the
			// command exec'd, which the shell had become (exec sleep 5).
			// Its end is the command's, as a program's is.
			r = process.Result{Reason: process.Signaled, Signal: process.SignalName(ws.Signal())}
		case ws.Signaled():
			r.Error = "the session's shell was killed by SIG" + process.SignalName(ws.Signal())
		}
	}
	if g, ok := c.takeGivenUp(); ok { // its end was given up as the shell exited
		r = g
	} else {
		c.mu.Lock()
		if r.Reason == process.Lost && c.timedOut {
			// Ended by the engine after the command outlived its timeout.
			r = process.Result{Reason: process.TimedOut}
		}
		c.mu.Unlock()
	}
	c.endAfterSession(r)
}

// endAfterSession ends the command whose shell exited under it with r once
// the session has ended: whoever sees the command's end sees the session
// terminal too, with its result, and the commands queued behind it failed.
// What the command used is measured now, while the session's cgroup, which
// the session's end removes, is there to read. The session's end (by
// itself, or an End already running: a kill of the session, its deletion)
// waits for the queue's turn, which the caller holds until it returns:
// the command ends on a goroutine of its own, which Close waits for.
func (c *Command) endAfterSession(r process.Result) {
	c.mu.Lock()
	r = c.meter.Account(r, &c.usage, slices.Contains(c.sent, syscall.SIGKILL))
	c.mu.Unlock()
	s := c.s
	s.wg.Add(1) // before the session's end, which Close's wait comes after
	go func() {
		defer s.wg.Done()
		<-s.h.Done()
		c.settle(false, r, false)
	}()
}

// sentIt reports whether a kill of the command sent it sig: INT through an
// interrupt (not its timeout's), any other with kill.
func (c *Command) sentIt(sig syscall.Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sig == syscall.SIGINT {
		return c.interrupted
	}
	return slices.Contains(c.sent, sig)
}

// neverRead reports whether the shell, now exited, read nothing of the
// command's frame: all of it was still in its input, or the write found
// the input closed.
func (c *Command) neverRead() bool {
	c.mu.Lock()
	from, sent := c.inputFrom, c.inputSent
	c.mu.Unlock()
	return sent && c.s.unread(from)
}

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

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
			c.keepers = slices.Delete(c.keepers, i, i+1)
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

// streamEnded records that a stream has ended for the command: stdout at its
// end marker (end says what it reported), stderr once that marker came (end
// is nil).
func (c *Command) streamEnded(end *sentinel.End) {
	c.mu.Lock()
	if c.phase >= phaseEnding {
		c.mu.Unlock()
		return
	}
	c.ends++
	if end != nil {
		c.end = *end
	}
	done := c.ends == 2 && c.advanceLocked(phaseEnding) == nil
	e := c.end
	if c.ends == 2 {
		// Its directory is the result's now, or none: the record keeps
		// none other (a $PWD that names another, up to sentinel.MaxCwd).
		c.end = sentinel.End{}
	}
	if c.interrupted || c.timedOut { // each interrupts the shell
		e.Status = interruptedStatus(c.s.sh, c.frame.Run, e.Status)
	}
	c.mu.Unlock()
	if done && e.Unreadable {
		// No status to report, nor to give the next command as $?: the
		// last one recorded stays.
		c.finish(process.Result{Reason: process.Failed, Error: unreadableEnd(e.StatusText)})
		return
	}
	if done {
		// Finish here rather than in Run: whoever waits for the command
		// wakes without a hop through the queue's goroutine.
		c.exitCode = e.Status // only the call that took it to phaseEnding writes it
		r := c.resultFor(process.Result{Reason: process.Exited, ExitCode: &c.exitCode})
		var tooLong bool
		if r.Cwd, tooLong = c.s.recordEnd(e.Status, &e); tooLong {
			r.Error = sentinel.CwdTooLong
		}
		c.finish(r)
	}
}

// unreadableEnd says why a command whose end marker came could not be
// reported: what stood where its status should (status) is not what the
// end line writes.
func unreadableEnd(status string) string {
	return fmt.Sprintf("the command's end marker came, but its exit status could not be read (%q where the end line writes _STATUS_): "+
		"a command changed the engine's variable __conch_s (typeset -L, -R, -Z or -i, a ksh93 discipline function), and every later command ends so until one unsets it; "+
		"or this command printed an end marker of its own with $__conch; see the README's session list", status)
}

// beforeStep, when a test sets it, is called before each wait of a
// command's reader for its streams.
var beforeStep func(*Command)

// takenUp, when a test sets it, is called with each command the moment it
// is taken up, before it is marked running.
var takenUp func(*Command)

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
// nothing, and delivers an interrupt that came while it was being taken up
// (see sendINT: it waits for the shell to enter the command).
func (c *Command) markRunning() {
	c.mu.Lock()
	first := c.markRunningLocked()
	pending := first && c.pendingINT
	if first {
		c.pendingINT = false
	}
	c.mu.Unlock()
	if pending {
		c.sendINT()
	}
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

// announces reports whether sh is told to announce that it runs a command:
// a shell that may drop what it read ahead gets the end line only then
// (see started). An interrupt waits for the announcement: one sent earlier
// would reach a shell still waiting for input, which would shrug it off and
// then run the command.
//
// The shells that keep what they read ahead get their end line with the
// command, and are not told: the engine would wake up for every command
// only to learn what an interrupt alone needs to know, and that wake-up
// cost more of the engine's time than the rest of the command (see
// BenchmarkRoundTripEngine). An interrupt for them looks for itself whether
// the shell has entered the command (see sendINT). mksh also crashes (heap
// corruption) when a start marker is written before a sourced file that
// defines an alias.
func announces(sh shells.Shell) bool { return !keepsReadAhead(sh) }

// keepsReadAhead reports whether sh keeps the input it read ahead when a
// command aborts (bash, mksh), or may drop it (dash, busybox, ksh93). zsh
// reads none ahead: on a pipe it reads its input one byte per read call,
// so the end line waits in the pipe whatever becomes of the command's line.
// Sent with the command, it spares zsh the start marker's hundred bytes,
// each a read call: 430 system calls a command, 326 without.
func keepsReadAhead(sh shells.Shell) bool {
	return sh.Family == shells.Bash || sh.Family == shells.Mksh || sh.Family == shells.Zsh
}

// dropsLineAfterINT reports whether sh, given SIGINT at its prompt, drops
// the line it reads next (zsh, mksh), where the others take the interrupt
// there and read on.
func dropsLineAfterINT(sh shells.Shell) bool {
	return sh.Family == shells.Zsh || sh.Family == shells.Mksh
}

// dropsReadAfterINT reports whether sh, given SIGINT at its prompt just as
// input comes, may take the signal after its read has returned that input,
// and drop what it read (dash, busybox sh: they read their input in
// blocks, and an interrupt unwinds to their prompt, the block lost).
func dropsReadAfterINT(sh shells.Shell) bool {
	return sh.Family == shells.Dash || sh.Family == shells.Busybox
}

// nudgeUnstarted sends the end line if the command has not been seen to
// start after a while, and again after twice as long, and so on. An
// interrupt that waits for the start goes then too, as for a shell that
// announces nothing (see sendINT): a start marker that never comes — the
// shell lost its own stdout (ksh93 closes it, and its stderr, when an
// interrupt lands as it restores the redirections of the command before)
// and could not write it by path either — must not keep the command from
// its interrupt, which would wait for ever.
func (c *Command) nudgeUnstarted(after time.Duration) {
	c.addTimer(time.AfterFunc(after, func() {
		c.mu.Lock()
		started, end := c.phase != phaseAnnounced, c.frame.End
		pending := !started && c.pendingINT
		if !started {
			c.noReuse = true
			c.pendingINT = false
		}
		c.mu.Unlock()
		if started {
			return
		}
		c.s.write(end)
		if pending {
			c.sendINT()
		}
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
func (c *Command) finish(r process.Result) { c.finishIf(false, r) }

// endQueued ends the command with r if it is still queued, and reports
// whether it did: one taken up meanwhile, even a moment ago, runs in the
// shell, and ending it here would leave the shell running a command
// reported as never started, with the session's turn held until it ends.
func (c *Command) endQueued(r process.Result) bool { return c.finishIf(true, r) }

// finishIf is finish, only from the queue when queued is set; it reports
// whether it ended the command.
func (c *Command) finishIf(queued bool, r process.Result) bool { return c.settle(queued, r, true) }

// settle is finishIf, measuring what the command used into r when measure
// is set (see endAfterSession for an r measured already).
func (c *Command) settle(queued bool, r process.Result, measure bool) bool {
	c.mu.Lock()
	if queued && c.phase != phaseQueued || c.advanceLocked(phaseEnded) != nil { // ended already, or taken up
		c.mu.Unlock()
		return false
	}
	if measure {
		r = c.meter.Account(r, &c.usage, slices.Contains(c.sent, syscall.SIGKILL))
	}
	c.result = r
	c.exitedAt = time.Now()
	c.endPID = pidNotRead // a command that never started keeps no startedAt
	for _, t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	f := c.frame
	c.mu.Unlock()
	c.s.mu.Lock()
	prev := c.s.lastEnded.Value()
	c.s.lastEnded = weak.Make(c)
	c.s.mu.Unlock()
	if prev != nil { // it ended with no command started in the shell since
		prev.endedBy(proctree.LastPID())
	}
	if f.Failed != nil {
		c.s.diag.Unwatch(f.Failed)
		c.s.diag.Unwatch(f.Start)
	}
	c.stdin.Close()
	c.log.Close()
	close(c.done)
	c.s.forget(c)
	if c.holdsTurn {
		// Ended (deleted, cancelled) before TakeTurn took the turn Begin
		// gave it: the turn goes back, or every later command would wait
		// for it, and Close too. A no-op once the turn was taken.
		c.s.h.Queue.Drop(c)
	}
	return true
}
