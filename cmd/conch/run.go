package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// runNotes follow run's flags in its help.
const runNotes = `One argument is shell text; several are a program and its arguments, run
without a shell. With --session, the arguments are shell text (or, with
--code, code) for that session.

Ctrl-C is passed to the command, which gets SIGINT (SIGTERM, SIGHUP and
Ctrl-\'s SIGQUIT are passed as they are), and conch exits as the command
then does (130 when SIGINT ends it; its own status when it caught it and
exited). With --idle or --timeout too. -i sends all of conch's stdin, waiting while the command has
not read what was sent; output the daemon dropped before conch read it is
said on stderr where it was. A write of it the daemon refuses while the
command runs on (its stdin was closed meanwhile, by conch interact --eof) is
said on stderr, the rest is not sent, and the status is still the command's;
a command that ended first (or ends within a second of the refusal) stopped
reading, as a reader of a pipe may, and that is not said. When the daemon does not take the signal within 5 s, conch
stops waiting and exits 125; the command may still run. So it does when the
daemon does not answer (stopped, or stuck): the start within 30 s, a wait 30 s
past --timeout, or, while conch waits, /healthz (asked every 15 s) within
30 s (a 429, from a daemon at its --max-connections, is an answer); after the
answer, a page of the output it left out, or a write of -i's stdin, within
30 s ($CONCH_ANSWER_WAIT, like 5s, sets the 30 s). A page not read so
leaves a gap: conch prints the pages it read, says on stderr how many bytes
are missing there and the conch logs --cursor command that prints them, then
prints the tail the answer held, and exits 125. Output of a command that
writes on, which the daemon's log retention dropped before a page read it,
leaves a gap too: said on stderr with the bytes missing, nothing to read
again, then the tail; the status is as without the gap (123 while the
command runs). When the reader of
conch's output goes away (conch run yes | head; with --idle or --timeout
too, once the answer is printed, or, when it is a pipe, as soon as its
reader has gone while the answer is awaited), the command gets SIGPIPE and
conch exits 141.

--plain prints each line once it is complete, rendered. --output-limit, like
--idle and --timeout, prints the answer once it comes (the command's end):
its head, then on stderr what was left out, then its tail; a command that
does not end by itself needs --idle or --timeout with it.

Under --keep-logs none the daemon keeps no output for a stream that opens
after the start: conch then takes the run's answer, which holds it all (up to
the daemon's log retention, past which its head is dropped, and said), and
prints the output once the answer comes rather than as it comes. -i, which
needs the command started first, is refused with it.

Exit status: the command's own; 123 when --idle or --timeout came back while
it still runs (its id is printed; go on with conch interact); 124 when it ran
past --exec-timeout and was stopped (said on stderr); 125 when conch failed
(no daemon, no such session, a refused request); 127 when it could not start;
128+N when signal N ended it.`

// startFlags are the flags shared by run and start.
type startFlags struct {
	session  *string
	code     *bool
	name     *string
	cwd      *string
	shell    *string
	login    *bool
	stdin    *bool
	timeout  *durationMillis
	keepLogs *string
	env      envFlag
	json     *bool
	limits   *limitFlags
	verbose  *bool
	// keepStdin is start's --stdin open: stdin open, for conch interact.
	keepStdin bool
}

func addStartFlags(fs *flag.FlagSet) *startFlags {
	f := &startFlags{env: envFlag{}, timeout: new(durationMillis)}
	f.session = new(string)
	fs.Func("session", "run in the session with this `id` (the arguments are shell text)", func(id string) error {
		if id == "" { // S=$(conch session new) that failed: never run outside the session instead
			return errors.New("the session id is empty")
		}
		*f.session = id
		return nil
	})
	f.code = fs.Bool("code", false, "the arguments are code for the --session's code context (a session made with --language)")
	f.name = fs.String("name", "", "a `name` for the process")
	f.cwd = fs.String("cwd", "", "working `directory`, relative to conch's own (default: the daemon's directory, not conch's; not with --session: a session has its own)")
	f.shell = fs.String("shell", "", "`shell` that runs a command string (bash, sh, dash, zsh, ksh, mksh, busybox)")
	f.login = fs.Bool("login", false, "run the shell as a login shell")
	f.stdin = fs.Bool("i", false, "send conch's standard input to the command")
	fs.Var(f.timeout, "exec-timeout", "execution `timeout` after which the command is interrupted (like 30s)")
	f.keepLogs = keepLogsFlag(fs)
	fs.Var(f.env, "e", "set `KEY=VALUE` in the command's environment (repeatable)")
	f.json = fs.Bool("json", false, "print the process (start) or the result (run) as JSON")
	f.limits = addLimitFlags(fs, "process")
	f.verbose = new(bool) // -v is run's: start does not wait for the end
	return f
}

// options builds what args say: in a session, the arguments joined as shell
// text; otherwise one argument is shell text and several are an argv run
// without a shell.
func (f *startFlags) options(args []string, kind process.Kind) (client.StartOptions, client.CommandOptions, error) {
	stdin := process.StdinClosed
	if *f.stdin || f.keepStdin {
		stdin = process.StdinOpen
	}
	if err := f.check(kind); err != nil {
		return client.StartOptions{}, client.CommandOptions{}, err
	}
	if *f.session != "" {
		cmd := client.CommandOptions{
			Name: *f.name, Stdin: stdin,
			ExecutionTimeout: client.Millis(*f.timeout), KeepLogs: logstore.KeepLogs(*f.keepLogs),
		}
		if *f.code {
			cmd.Code = strings.Join(args, " ")
		} else {
			cmd.Cmd = strings.Join(args, " ")
		}
		return client.StartOptions{}, cmd, nil
	}
	cwd, err := absDir(*f.cwd)
	if err != nil {
		return client.StartOptions{}, client.CommandOptions{}, err
	}
	opts := client.StartOptions{
		Kind: kind, Name: *f.name, Cwd: cwd, Shell: *f.shell, Login: *f.login, Stdin: stdin,
		ExecutionTimeout: client.Millis(*f.timeout), KeepLogs: logstore.KeepLogs(*f.keepLogs),
		Limits: f.limits.limits(),
	}
	if len(f.env) > 0 {
		opts.Env = f.env
	}
	switch {
	case len(args) == 1:
		opts.Cmd = args[0]
	case len(args) > 1:
		opts.Argv = args
	}
	return opts, client.CommandOptions{}, nil
}

// check returns what is wrong with the flags together, for a usage error.
func (f *startFlags) check(kind process.Kind) error {
	if *f.code && *f.session == "" {
		return errors.New("--code runs a cell in a code context: give the context with --session ID (conch session new --language python)")
	}
	if *f.session != "" {
		if *f.cwd != "" || *f.shell != "" || *f.login || len(f.env) > 0 || kind == process.KindPTY {
			return errors.New("--cwd, --shell, --login, -e and --pty do not apply to a session command")
		}
		if f.limits.limits() != nil {
			return errors.New("--memory, --pids and --cpu bound a whole session: give them to conch session new")
		}
	}
	return nil
}

// absDir resolves a --cwd given relative to conch's own working directory,
// as a local command would read it; the daemon takes absolute paths only.
func absDir(dir string) (string, error) {
	if dir == "" || filepath.IsAbs(dir) {
		return dir, nil
	}
	return filepath.Abs(dir)
}

// startProcess starts what args say and returns it without waiting.
func (f *startFlags) startProcess(ctx context.Context, c *client.Client, args []string, kind process.Kind) (*client.Process, error) {
	opts, cmd, err := f.options(args, kind)
	if err != nil {
		return nil, err
	}
	if *f.session != "" {
		p, err := c.Submit(ctx, *f.session, cmd)
		return p, f.sessionErr(ctx, c, err)
	}
	return c.Start(ctx, opts)
}

// sessionErr is err, the refusal of a command sent to the --session, in
// the flags' words when it refused shell text for a code context or code
// for a shell session: the daemon's message names the API's fields (cmd,
// code), which a user of conch run does not see; and, when no session has
// the id, what the id is when a process has it (see notASession). It asks
// the daemon only when the command was refused.
func (f *startFlags) sessionErr(ctx context.Context, c *client.Client, err error) error {
	if err == nil {
		return err
	}
	qctx, cancel := quick(ctx, c)
	defer cancel()
	if client.HasCode(err, client.CodeNotFound) {
		return notASession(qctx, c, *f.session, err, func(p *client.Process) string {
			if p.SessionID != "" {
				return "give --session " + p.SessionID + " to run in its session"
			}
			return "answer it with conch interact " + p.ID + "; conch session ls lists the sessions"
		})
	}
	if !client.HasCode(err, client.CodeInvalidArgument) {
		return err
	}
	s, serr := c.Session(qctx, *f.session)
	switch {
	case serr != nil:
		return err
	case s.Language != "" && !*f.code:
		return fmt.Errorf("session %s is a %s code context: give its cell with --code", s.ID, s.Language)
	case s.Language == "" && *f.code:
		return fmt.Errorf("session %s is a shell session: drop --code to run shell text in it; --code is for a code context (conch session new --language python)",
			s.ID)
	}
	return err
}

// runRoute runs what args say through the daemon's run route and prints
// its answer, as the answer flags say. It serves --json, whose result is
// the run route's answer, and --keep-logs none, under which it is the only
// way to all of the output: the daemon keeps the frames of a run for its
// answer, where a stream or an interact opened after the start misses what
// the command wrote before it. The output is printed once the answer comes,
// not as it comes.
func (f *startFlags) runRoute(ctx context.Context, e *env, c *client.Client, a *answerFlags, stdin process.Stdin, args []string) int {
	opts, cmd, err := f.options(args, process.KindExec)
	if err != nil {
		return fail(e, exitOwn, err)
	}
	limit := *a.limit
	if logstore.KeepLogs(*f.keepLogs) == logstore.KeepNone && limit == 0 {
		// The answer is the only way to the output, which no log keeps to
		// be read after it: all of it (the daemon bounds the answer by
		// its retention, and says what that dropped).
		limit = math.MaxInt32
	}
	wait := client.RunOptions{
		Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
		Plain: *a.plain, OutputLimit: limit,
	}
	// The answer names the process only once it comes: Ctrl-C goes to
	// the process this run started, found when it comes.
	asked := time.Now()
	sigs := catchSignals()
	ctx, stop := sigs.passToFound(ctx, c, func(ctx context.Context) (string, error) {
		return f.findRun(ctx, c, opts, cmd, asked)
	})
	defer stop()
	defer sigs.passReaderGone(e.stdout)()
	var r *client.RunResult
	var p *client.Process
	actx, cancel := awaitAnswer(ctx, c, time.Duration(*a.wait))
	if *f.session != "" {
		cmd.Stdin = stdin
		r, p, err = c.RunCommand(actx, *f.session, client.CommandRunOptions{
			CommandOptions: cmd, Timeout: wait.Timeout, IdleTimeout: wait.IdleTimeout,
			Plain: wait.Plain, OutputLimit: wait.OutputLimit,
		})
	} else {
		opts.Stdin = stdin
		wait.StartOptions = opts
		r, p, err = c.Run(actx, wait)
	}
	// A refusal (which sessionErr may say in other words) is an answer.
	refused := errors.As(err, new(*client.Error))
	if *f.session != "" {
		err = f.sessionErr(actx, c, err)
	}
	err = signalErr(actx, err)
	cancel()
	if err != nil {
		// Not a refusal, nor passTo's give-up, which says so: the
		// command may have started, and run on, as runEarly says. Its id
		// comes with the answer only, which did not come.
		if !refused && context.Cause(ctx) == nil {
			err = fmt.Errorf("%w; the command may still run (conch ps --state running lists it; --name names a run to find it by)", err)
		}
		return fail(e, exitOwn, err)
	}
	code := a.report(ctx, e, c, r, p, *f.json)
	if *f.verbose && p == nil {
		printUsage(e.stderr, r.WaitResult)
	}
	return code
}

// emptyCommand refuses a command of one empty argument (conch run ""),
// which the daemon would refuse as giving no command.
func emptyCommand(args []string) error {
	if len(args) == 1 && args[0] == "" {
		return errors.New("the command is empty: give the shell text to run, or a program and its arguments")
	}
	return nil
}

// findRun returns the id of the process a run route request sent at asked
// started: of the running processes with its name, session, command and
// retention, the one created nearest to asked (another conch may run the
// same command at the same time).
func (f *startFlags) findRun(ctx context.Context, c *client.Client, opts client.StartOptions, cmd client.CommandOptions, asked time.Time) (string, error) {
	keep := cmp.Or(logstore.KeepLogs(*f.keepLogs), logstore.KeepUntilCleanup)
	text := func(got, want string, truncated bool) bool {
		return got == want || truncated && strings.HasPrefix(want, got)
	}
	want := func(p client.Process) bool {
		if p.System || p.Name != *f.name || p.KeepLogs != keep {
			return false
		}
		if *f.session != "" {
			return text(p.ShellCommand, cmd.Cmd, p.ShellCommandTruncated) && text(p.Code, cmd.Code, p.CodeTruncated)
		}
		if opts.Cmd != "" {
			return text(p.ShellCommand, opts.Cmd, p.ShellCommandTruncated)
		}
		return p.ShellCommand == "" && (slices.Equal(p.Argv, opts.Argv) ||
			// The record keeps an argv's head only (argvTruncated).
			p.ArgvTruncated && p.ArgvCount == len(opts.Argv) && len(p.Argv) < len(opts.Argv) &&
				slices.Equal(p.Argv, opts.Argv[:len(p.Argv)]))
	}
	found, nearest := "", time.Duration(math.MaxInt64)
	for p, err := range c.Processes(ctx, client.ListOptions{State: "running", SessionID: *f.session, Name: *f.name}) {
		if err != nil {
			return "", err
		}
		if d := p.CreatedAt.Sub(asked).Abs(); want(p) && d < nearest {
			found, nearest = p.ID, d
		}
	}
	return found, nil
}

func cmdRun(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "run", "[--session ID [--code]] [--] CMD [ARG...]", runNotes)
	f := addStartFlags(fs)
	a := addAnswerFlags(fs)
	fs.BoolVar(f.verbose, "v", false, "say on stderr what the command cost (CPU time, memory peak) once it ended")
	stdinMode := fs.String("stdin", "", "`open`: keep the command's stdin open for conch interact (with --idle or --timeout)")
	if code, ok := parseArgs(fs, args, atLeastOne); !ok {
		return code
	}
	// Usage is checked before the daemon is asked: a wrong flag is said as
	// one (exit 2), with or without a daemon.
	switch {
	case *stdinMode != "" && *stdinMode != string(process.StdinOpen) && *stdinMode != string(process.StdinClosed):
		return usageError(e, "--stdin %q: want open or closed", *stdinMode)
	case a.early() && *f.stdin:
		return usageError(e, "-i copies conch's stdin to the end; with --idle or --timeout use --stdin open and conch interact")
	case *stdinMode == string(process.StdinOpen) && !a.early():
		return usageError(e, "--stdin open needs --idle or --timeout, so that the command can be answered; -i sends conch's stdin")
	case logstore.KeepLogs(*f.keepLogs) == logstore.KeepNone && *f.stdin:
		return usageError(e, "-i sends stdin to a command conch has started, and under --keep-logs none what it wrote before conch reads on is lost: drop one of them")
	}
	if err := errors.Join(f.check(process.KindExec), a.check(), emptyCommand(fs.Args())); err != nil {
		return usageError(e, "%v", err)
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	switch {
	case logstore.KeepLogs(*f.keepLogs) == logstore.KeepNone:
		return f.runRoute(ctx, e, c, a, process.Stdin(*stdinMode), fs.Args())
	case a.early() || *a.limit > 0:
		return f.runEarly(ctx, e, c, a, process.Stdin(*stdinMode), fs.Args())
	case *f.json && !*f.stdin:
		return f.runRoute(ctx, e, c, a, "", fs.Args())
	}
	// Ctrl-C, TERM and HUP reach the command, as they would a local one;
	// conch exits when the command does.
	sigs := catchSignals()
	sctx, started := sigs.whileStarting(ctx)
	qctx, cancel := quick(sctx, c) // as conch start's
	p, err := f.startProcess(qctx, c, fs.Args(), process.KindExec)
	err = signalErr(qctx, err)
	cancel()
	started()
	if err != nil {
		sigs.release()
		return fail(e, exitOwn, err)
	}
	ctx, stop := sigs.passTo(ctx, c, p.ID)
	defer stop()
	fctx := ctx // the follow's: a write of -i's stdin not answered ends it
	if *f.stdin {
		fctx = sendStdin(ctx, e, c, p.ID, e.stdin)
	}
	// A reader of conch's output that goes away (conch run yes | head)
	// ends the command as it would a local one: a write to the broken pipe
	// fails, rather than ending conch by SIGPIPE with the command left
	// running, and the command gets SIGPIPE.
	proctree.SurviveBrokenPipe()
	// With --plain, each line is printed rendered once it is complete.
	write, flush := frameWriter(e, false, *a.plain, plaintext.Carried{})
	if *f.json {
		write = nil
	}
	res, err := follow(fctx, c, p.ID, write, e.stderr)
	if err == nil && write != nil {
		err = flush()
	}
	err = signalErr(fctx, err)
	if errors.Is(err, syscall.EPIPE) {
		return brokenPipe(ctx, e, c, p.ID, err)
	}
	if err != nil {
		if context.Cause(ctx) == nil { // not passTo's give-up, which says so
			var stopped bool
			if err, stopped = followCut(ctx, c, p.ID, err); !stopped {
				err = fmt.Errorf("%w; %s may still run (conch logs -f %s, conch kill %s)", err, p.ID, p.ID, p.ID)
			}
		}
		return fail(e, exitOwn, err)
	}
	if *f.json {
		// The whole result, its output included, as without -i: a bare
		// interact from the start answers it for an ended process.
		var out any = res
		qctx, cancel := quick(ctx, c)
		if r, _, err := c.Interact(qctx, p.ID, client.InteractOptions{Cursor: "0"}); err == nil && r != nil {
			out = r
		}
		cancel()
		if code := printJSON(e, out); code != 0 {
			return exitOwn
		}
	}
	if *f.verbose {
		printUsage(e.stderr, *res)
	}
	return finish(e, p.ID, *res)
}

// signals are the SIGINT (Ctrl-C), SIGQUIT (Ctrl-\), SIGTERM and SIGHUP
// conch catches from before it starts a command, so that one that comes
// while the command starts still reaches it rather than ending conch alone
// (SIGQUIT's default in a Go program: a dump of every goroutine, status 2).
type signals chan os.Signal

func catchSignals() signals {
	s := make(signals, 4)
	signal.Notify(s, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	return s
}

// passTo passes what s caught, and catches until the returned stop is
// called, to the process id and its descendants, as a terminal passes them
// to its foreground job. The context it returns ends when the daemon does
// not take a signal within signalPassWait (it does not answer, or is gone):
// conch then stops waiting for a command it can no longer reach rather than
// ignore every Ctrl-C; signalErr says why.
func (s signals) passTo(ctx context.Context, c *client.Client, id string) (context.Context, func()) {
	return s.passToFound(ctx, c, func(context.Context) (string, error) { return id, nil })
}

// passToFound is passTo for a process whose id find tells once the first
// signal comes: "" while it finds none (the process has not started yet,
// or has ended). A signal that finds none within signalPassWait is not
// passed; the wait for the process goes on.
func (s signals) passToFound(ctx context.Context, c *client.Client, find func(context.Context) (string, error)) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		id := ""
		for sig := range s {
			name := process.SignalName(sig.(syscall.Signal))
			kctx, kcancel := context.WithTimeout(ctx, signalPassWait)
			var err error
			for id == "" && err == nil && kctx.Err() == nil {
				if id, err = find(kctx); id == "" && err == nil {
					select {
					case <-kctx.Done():
					case <-time.After(findRetry):
					}
				}
			}
			if id != "" && err == nil {
				err = c.Kill(kctx, id, client.KillOptions{Signal: name})
			}
			kcancel()
			// An answer, even a refusal (the process ended), shows the
			// daemon there.
			var answered *client.Error
			if err != nil && !errors.As(err, &answered) && ctx.Err() == nil {
				what := id
				if what == "" {
					what = "the command"
				}
				cancel(fmt.Errorf("the daemon did not take SIG%s for %s, which may still run: %w", name, what, err))
			}
		}
	}()
	return ctx, func() {
		signal.Stop(s)
		close(s)
		<-done
		cancel(nil)
	}
}

// findRetry is how often passToFound looks again for a process it did not
// find.
const findRetry = 50 * time.Millisecond

// whileStarting returns the context of the request that starts the
// command. A signal caught while it is sent is kept for passTo; if the
// start has not been answered signalPassWait after it, the context ends
// (signalErr says why): conch stops waiting for a daemon that does not
// answer rather than ignore every Ctrl-C. done ends the watch.
func (s signals) whileStarting(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-s:
			select {
			case s <- sig: // for passTo, once the command is known
			default:
			}
			select {
			case <-time.After(signalPassWait):
				cancel(fmt.Errorf("the daemon did not answer the start within %s of SIG%s: the command may have started",
					signalPassWait, process.SignalName(sig.(syscall.Signal))))
			case <-stop:
			}
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		<-watched
	}
}

// signalPassWait bounds how long passTo waits for the daemon to take a
// signal.
const signalPassWait = 5 * time.Second

// signalErr is err, or why passTo gave up when it did.
func signalErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && err != nil {
		return cause
	}
	return err
}

// release stops catching when no process came of it.
func (s signals) release() { signal.Stop(s) }

// stopOnInterrupt returns a context that Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT)
// or SIGTERM ends: the commands that only wait or read (wait, ready, logs
// -f) stop there and leave the process running, and exit with status():
// 131 after SIGQUIT, as a shell reports a program it ended, else
// exitInterrupted.
func stopOnInterrupt(ctx context.Context) (_ context.Context, stop func(), status func() int) {
	ctx, cancel := context.WithCancel(ctx)
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM)
	var quit atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-caught:
			quit.Store(sig == syscall.SIGQUIT)
			cancel()
		case <-ctx.Done():
		}
	}()
	stop = func() {
		signal.Stop(caught)
		cancel()
		<-done
	}
	status = func() int {
		if quit.Load() {
			return 128 + int(syscall.SIGQUIT)
		}
		return exitInterrupted
	}
	return ctx, stop, status
}

// exitInterrupted is the status of a command that Ctrl-C stopped, as a
// shell reports one that SIGINT ended.
const exitInterrupted = 128 + int(syscall.SIGINT)

// exitBrokenPipe is conch run's status when its output's reader went away,
// as a shell reports a command that SIGPIPE ended; brokenPipeKillWait
// bounds the wait for the daemon to take the command's SIGPIPE.
const (
	exitBrokenPipe     = 128 + int(syscall.SIGPIPE)
	brokenPipeKillWait = 10 * time.Second
)

// brokenPipe ends the process id whose output's reader went away (err is
// the write that failed) as the pipe would end a local command, by
// SIGPIPE, and returns exitBrokenPipe; when the daemon does not take the
// signal, it says so, with the id, and returns exitOwn. A process that has
// ended already takes the signal as a no-op.
func brokenPipe(ctx context.Context, e *env, c *client.Client, id string, err error) int {
	kctx, cancel := context.WithTimeout(ctx, brokenPipeKillWait)
	defer cancel()
	if kerr := c.Kill(kctx, id, client.KillOptions{Signal: "PIPE"}); kerr != nil {
		return fail(e, exitOwn, fmt.Errorf("%w; and sending SIGPIPE to %s, which may still run: %w", err, id, kerr))
	}
	return exitBrokenPipe
}

// finish says on stderr how the process ended where its status alone does
// not tell (an execution timeout, a start that failed, a command the engine
// lost), and returns that status.
func finish(e *env, id string, r client.WaitResult) int {
	code := exitCode(r)
	switch r.Reason {
	case process.TimedOut:
		fmt.Fprintf(e.stderr, "conch: %s timed out: it ran past its execution timeout and was stopped (exit %d)\n", id, code)
	case process.Failed, process.Lost:
		fmt.Fprintf(e.stderr, "conch: %s %s (exit %d)\n", id, r, code)
	}
	return code
}

// stdinRetry is how often copyStdin offers again what a full stdin queue
// refused.
const stdinRetry = 20 * time.Millisecond

// copyStdin sends r to the process's stdin, then closes it. While the
// daemon's queue for it is full (stdin_full: the process has not read what
// was sent), it waits and sends the rest again. Each write is bounded as a
// quick request is: when the daemon does not answer one, that is said, and
// returned, and nothing more is sent. A write refused otherwise, or a read
// of r that fails, is said on stderr and returned as errStdinLost; stdin is
// then closed, so that the process does not wait for input that will not
// come. A write refused because the process has ended is not said: it is
// returned as a stdinEnded.
func copyStdin(ctx context.Context, e *env, c *client.Client, id string, r io.Reader) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if werr := writeStdin(ctx, c, id, buf[:n]); werr != nil {
			if isNotAnswered(werr) {
				fmt.Fprintf(e.stderr, "conch: sending stdin to %s: %v; the rest of it was not sent\n", id, werr)
				return werr
			}
			if ctx.Err() == nil && !endedFirst(ctx, c, id, werr) {
				fmt.Fprintf(e.stderr, "conch: sending stdin to %s: %s; the rest of it was not sent, and its stdin is closed\n", id, describe(werr))
				return cmp.Or(closeStdin(ctx, e, c, id), errStdinLost)
			}
			return stdinEnded{werr}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(e.stderr, "conch: reading stdin: %v; the rest of it was not sent to %s, and its stdin is closed\n", err, id)
				return cmp.Or(closeStdin(ctx, e, c, id), errStdinLost)
			}
			return closeStdin(ctx, e, c, id)
		}
	}
}

// sendStdin sends r to the process's stdin as copyStdin does, while the
// caller waits for the process, and returns a context for that wait: it
// ends when the daemon does not answer a write, its cause saying so. The
// process, its stdin neither all sent nor closed, may wait for the rest for
// good (cat), and conch with it: conch stops waiting instead, and exits 125.
func sendStdin(ctx context.Context, e *env, c *client.Client, id string, r io.Reader) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		if err := copyStdin(ctx, e, c, id, r); isNotAnswered(err) && ctx.Err() == nil {
			cancel(fmt.Errorf("stopped waiting for %s, which may wait for the rest of its stdin: the daemon did not answer a write of it (said above)", id))
		}
	}()
	return ctx
}

// errStdinLost is copyStdin's error once it said that part of the stdin
// was not sent.
var errStdinLost = errors.New("part of the stdin was not sent")

// stdinEnded is copyStdin's error when the process ended, or conch was
// done with it, before it took all of its stdin: err is the refused write.
type stdinEnded struct{ err error }

func (s stdinEnded) Error() string { return s.err.Error() }

// closeStdin closes the process's stdin; when the daemon does not answer
// that, it says so, and returns why.
func closeStdin(ctx context.Context, e *env, c *client.Client, id string) error {
	qctx, cancel := quick(ctx, c)
	err := signalErr(qctx, c.WriteStdin(qctx, id, nil, true))
	cancel()
	if isNotAnswered(err) {
		fmt.Fprintf(e.stderr, "conch: closing the stdin of %s: %v\n", id, err)
		return err
	}
	return nil
}

// endedFirst reports whether err, a refused write of stdin to the process
// id, came because the process has ended (see ended): then what was not
// sent is left unsaid, as a local pipe's writer is ended when its reader is
// gone.
func endedFirst(ctx context.Context, c *client.Client, id string, err error) bool {
	if !client.HasCode(err, client.CodeUnsupportedOperation) {
		return false
	}
	// The process's stdin closes as it exits, a moment before its record
	// says it ended: look again for a second at most, unless conch is done
	// with it meanwhile (its result came).
	for range 50 {
		got := ended(ctx, c, id, err)
		if isNotAnswered(got) {
			return false
		}
		if got != err || ctx.Err() != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return true
		case <-time.After(stdinRetry):
		}
	}
	return false
}

// writeStdin writes b whole to the process's stdin, waiting while its queue
// is full. Each write is bounded as a quick request is.
func writeStdin(ctx context.Context, c *client.Client, id string, b []byte) error {
	for len(b) > 0 {
		qctx, cancel := quick(ctx, c)
		err := signalErr(qctx, c.WriteStdin(qctx, id, b, false))
		cancel()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != client.CodeStdinFull {
			return err
		}
		b = b[min(max(ce.AcceptedBytes, 0), len(b)):]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(stdinRetry):
		}
	}
	return nil
}

// follow streams the process's output through write (nil: none is
// printed) until it ends, says the gaps on stderr, and returns how it
// ended.
func follow(ctx context.Context, c *client.Client, id string, write func(client.LogFrame) error, stderr io.Writer) (*client.WaitResult, error) {
	// Output the stream fell behind on was dropped: say so where the gap
	// is, as conch logs -f does.
	g := gaps{say: func(msg string) { fmt.Fprintf(stderr, "conch: %s\n", msg) }}
	defer g.flush()
	for ev, err := range c.Stream(ctx, id, client.StreamOptions{}) {
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case client.EventLog:
			if write == nil {
				continue
			}
			if err := write(*ev.Frame); err != nil {
				return nil, err
			}
		case client.EventWarning:
			g.note(ev.Warning)
		case client.EventState:
			return ev.State, nil
		}
	}
	return nil, errors.New("stream ended without the process's state")
}

// exitCode is the status a shell would report for r. A signaled process
// that caught the signal and exited with a status of its own exits with
// that status, as a shell's $? shows it; one the signal ended, 128+N (its
// code is that, or for a ksh93 session command N or 256+N).
func exitCode(r client.WaitResult) int {
	switch r.Reason {
	case process.Exited:
		if r.ExitCode != nil {
			return *r.ExitCode
		}
	case process.Signaled:
		if c := r.ExitCode; c != nil && r.Handled {
			return *c // caught, and exited with its own status
		}
		if sig, err := process.ParseSignal(r.Signal); err == nil {
			if c := r.ExitCode; c != nil && *c != 128+int(sig) && *c != int(sig) && *c != 256+int(sig) {
				return *c
			}
			return 128 + int(sig)
		}
	case process.TimedOut:
		return 124
	case process.Failed:
		return 127
	}
	if r.ExitCode != nil {
		return *r.ExitCode
	}
	return exitOwn
}

func cmdStart(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "start", "[--session ID [--code]] [--pty] [--] [CMD [ARG...]]",
		`With -i, conch prints the id, then sends all of its stdin to the command
and closes the command's stdin, and returns once it has sent it; when the
daemon does not answer a write within 30 s ($CONCH_ANSWER_WAIT sets it), it
says so and exits 125. So it does when the daemon refuses a write (the
command's stdin was closed meanwhile: the rest is not sent, and its stdin is
closed) and when conch's own stdin cannot be read. A command that ended
before it took all of it stopped reading, as a reader of a pipe may (head
-1): that is said, with how it ended, and conch exits 0. --stdin open keeps the command's stdin open instead, for conch
interact --input.`)
	f := addStartFlags(fs)
	pty := fs.Bool("pty", false, "run in a PTY (with no command: the shell)")
	stdinMode := fs.String("stdin", "", "`open`: keep the command's stdin open for conch interact")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	switch *stdinMode {
	case "", string(process.StdinClosed):
	case string(process.StdinOpen):
		if *f.stdin {
			return usageError(e, "-i sends conch's stdin and closes the command's; --stdin open keeps it open for conch interact: give one")
		}
		f.keepStdin = true
	default:
		return usageError(e, "--stdin %q: want open or closed", *stdinMode)
	}
	if fs.NArg() == 0 && !*pty {
		fs.Usage()
		return exitUsage
	}
	kind := process.KindExec
	if *pty {
		kind = process.KindPTY
	}
	if err := errors.Join(f.check(kind), emptyCommand(fs.Args())); err != nil {
		return usageError(e, "%v", err)
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	qctx, cancel := quick(ctx, c)
	p, err := f.startProcess(qctx, c, fs.Args(), kind)
	err = signalErr(qctx, err)
	cancel()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	code := 0
	if *f.json {
		code = printJSON(e, p)
	} else {
		code = printID(e, p.ID)
	}
	if code != 0 || !*f.stdin {
		return code
	}
	var gone stdinEnded
	if err := copyStdin(ctx, e, c, p.ID, e.stdin); errors.As(err, &gone) {
		if ctx.Err() != nil { // conch was stopped while it sent it
			return fail(e, exitOwn, fmt.Errorf("stopped before all of its stdin was sent to %s", p.ID))
		}
		// The command took what it wanted, as a reader of a pipe may
		// (head -1): said, with how it ended, and not conch's failure.
		e.warn(stdinEndedErr(ctx, c, p.ID).Error())
	} else if err != nil {
		return exitOwn // said
	}
	return 0
}

// stdinEndedErr says that the process id ended before conch sent it all of
// its stdin, with how it ended when the daemon says.
func stdinEndedErr(ctx context.Context, c *client.Client, id string) error {
	qctx, cancel := quick(ctx, c)
	defer cancel()
	how := ""
	if p, err := c.Get(qctx, id); err == nil && p.Result() != nil {
		how = " (" + p.Result().String() + ")"
	}
	return fmt.Errorf("%s ended%s before it took all of its stdin: the rest was not sent", id, how)
}

// printID prints the id of what was just started, and fails, saying it on
// stderr, when stdout does not take it: the caller would have no id for
// what now runs.
func printID(e *env, id string) int {
	if _, err := fmt.Fprintln(e.stdout, id); err != nil {
		return fail(e, exitOwn, fmt.Errorf("printing the id of %s: %w", id, err))
	}
	return 0
}

func cmdWait(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "wait", "ID", `Waits until the process ends and exits with its status (see 'conch --help').
Ctrl-C stops waiting and exits 130 (Ctrl-\: 131); the process goes on.`)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	ictx, stop, interrupted := stopOnInterrupt(ctx)
	defer stop()
	r, _, err := c.Wait(ictx, id, 0)
	if err != nil && ictx.Err() != nil && ctx.Err() == nil {
		fmt.Fprintf(e.stderr, "conch: stopped waiting; %s goes on\n", id)
		return interrupted()
	}
	if err != nil {
		return fail(e, exitOwn, err)
	}
	if *asJSON {
		if code := printJSON(e, r); code != 0 {
			return code
		}
	}
	return finish(e, id, *r)
}

// printJSON writes v as indented JSON.
func printJSON(e *env, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(e, exitOwn, err)
	}
	return 0
}

// durationMillis is a duration flag (like 30s) that travels as milliseconds.
type durationMillis client.Millis

func (d *durationMillis) String() string { return time.Duration(*d).String() }

func (d *durationMillis) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return errors.New("want a duration like 30s or 500ms")
	}
	*d = durationMillis(v)
	return nil
}
