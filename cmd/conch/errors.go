package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/daemonrec"
)

// dial returns a client for the daemon this user runs.
func dial() (*client.Client, error) {
	c, err := client.Discover()
	if err != nil && errors.Is(err, fs.ErrNotExist) && os.Getenv(client.EnvURL) == "" {
		// No token file: no daemon ever ran for this user here, or the
		// one recorded is gone, or it runs and its token file was removed.
		return nil, errors.New(noToken(err))
	}
	if errors.Is(err, client.ErrNotRunning) {
		// Said with how to start one, as when it does not answer.
		return nil, errors.New(noDaemon(""))
	}
	return c, err
}

// answerWait bounds a request the daemon answers at once (a listing, a
// kill, a start, a page of logs, a write of stdin): one it does not answer
// by then is not coming, from a daemon that is stopped (SIGSTOP) or wedged.
// A kill is given its escalation's time beyond it (see cmdKill); waits meant
// to be long (run, wait, logs -f, ready) are not bounded so; run's and
// interact's are bounded by awaitAnswer. It is 30 s, or $CONCH_ANSWER_WAIT
// when that is set to a duration (like 5s) above zero.
var answerWait = envDuration(envAnswerWait, 30*time.Second)

// envAnswerWait names the variable that sets answerWait.
const envAnswerWait = "CONCH_ANSWER_WAIT"

// envDuration is the duration the variable name holds, or def when it is
// unset, or holds no duration above zero.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// notAnswered is the error of a request the daemon did not answer within
// its bound.
type notAnswered struct {
	url    string
	within time.Duration
}

func (e notAnswered) Error() string {
	return fmt.Sprintf("the daemon at %s did not answer within %s: it may be stopped (kill -STOP) or stuck; if it is, restart it",
		e.url, e.within)
}

// isNotAnswered reports whether err says that the daemon did not answer
// within its bound.
func isNotAnswered(err error) bool { return errors.As(err, new(notAnswered)) }

// quick returns the context of a request the daemon answers at once:
// answerWait ends it, and signalErr then says why.
func quick(ctx context.Context, c *client.Client) (context.Context, context.CancelFunc) {
	return quickWithin(ctx, c, answerWait)
}

// quickWithin is quick for a request the daemon answers within d.
func quickWithin(ctx context.Context, c *client.Client, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, notAnswered{c.URL(), d})
}

// quickEach returns the context of requests the daemon answers at once,
// sent one after another with work of conch's own between them (the pages
// of an output, each printed as it comes): each is bounded as quick bounds
// one, and the work, which between runs, is not counted (a slow reader of
// conch's output is not a daemon that does not answer). signalErr then says
// why.
func quickEach(ctx context.Context, c *client.Client) (_ context.Context, between func(func() error) error, cancel func()) {
	ctx, stop := context.WithCancelCause(ctx)
	timer := time.AfterFunc(answerWait, func() { stop(notAnswered{c.URL(), answerWait}) })
	between = func(work func() error) error {
		if !timer.Stop() {
			return context.Cause(ctx) // the bound ran out
		}
		defer timer.Reset(answerWait)
		return work()
	}
	return ctx, between, func() {
		timer.Stop()
		stop(nil)
	}
}

// awaitAnswer returns the context of a request the daemon answers once it
// has waited up to asked (an interact or a run with --timeout), or, with
// asked 0, as long as the command takes (with --idle alone, or none): one
// the daemon has not answered asked plus answerWait after it was sent ends.
// However long the request may wait, the daemon is asked for /healthz every
// probeEvery while it does; one that does not answer that within answerWait
// (stopped by SIGSTOP, or stuck) ends the request too, as a stream that
// misses its heartbeats does, rather than leave conch waiting for good.
// signalErr then says why.
func awaitAnswer(ctx context.Context, c *client.Client, asked time.Duration) (context.Context, context.CancelFunc) {
	var cancelWait context.CancelFunc = func() {}
	if asked > 0 {
		ctx, cancelWait = quickWithin(ctx, c, asked+answerWait)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(probeEvery):
			}
			hctx, hcancel := quick(ctx, c)
			_, err := c.Health(hctx)
			// Only no answer at all counts: a refusal is an answer, and a
			// daemon gone breaks the request's connection too.
			if err != nil && ctx.Err() == nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
				cancel(context.Cause(hctx))
			}
			hcancel()
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-done
		cancelWait()
	}
}

// probeEvery is how often awaitAnswer asks whether the daemon answers:
// half of answerWait (15 s), so that one that stops answering is found
// within about one and a half answerWait.
var probeEvery = answerWait / 2

// describe is err as a user reads it: a refused request's message, with its
// code in words only where the message does not say it already, or, for a
// daemon that does not answer, whether one is expected and how to start it.
func describe(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		words := strings.ReplaceAll(string(ae.Code), "_", " ")
		if ae.Code == client.CodeUnauthenticated {
			return words + ": " + badToken()
		}
		if ae.Message == "" || strings.Contains(ae.Message, words) {
			return cmp.Or(ae.Message, words)
		}
		return words + ": " + ae.Message
	}
	base, asked := daemonOf(err)
	if asked && closedEarly(err) {
		if recordedGone(base) {
			// What answered at its address is not this user's daemon,
			// which is gone: another program took its port since.
			return noDaemon(base)
		}
		// The daemon was reached, and the connection ended before its
		// answer: Go's own words for it are `Get "URL": EOF`.
		return fmt.Sprintf("the daemon at %s closed the connection before it answered (it stopped, or was killed?)", base)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return noDaemon(base)
	}
	return err.Error()
}

// followCut is err, which ended the following of process id before the
// process ended, as a user reads it, and whether it says that the daemon
// stopped: a daemon that stops closes its streams as it begins to end
// every process, refuses what is asked of it since ("shutting down"), and
// takes no connection a moment later; one that is killed takes its
// processes with it (its guardian kills them). A daemon that still
// answers ended the stream for another reason: the process may still run.
func followCut(ctx context.Context, c *client.Client, id string, err error) (_ error, stopped bool) {
	if daemonStopped(ctx, c) {
		// Whatever err says (a cut stream, a refused resumption, a
		// refused connection), this is what became of the process.
		return fmt.Errorf("the daemon stopped, or was killed, before %s ended, and %s ended with it: nothing answers at %s any more",
			id, id, c.URL()), true
	}
	if closedEarly(err) {
		// Go's words alone ("read stream: unexpected EOF") said
		// neither who closed it nor what became of the process.
		err = fmt.Errorf("the daemon closed its stream of %s before the process ended (%w: it stopped, or was killed?)", id, err)
	}
	return err, false
}

// stoppedWait is how long daemonStopped looks for a daemon that answers to
// stop answering: one that stops closes its streams a moment before its
// listener.
const stoppedWait = time.Second

// daemonStopped reports whether the daemon of c no longer takes
// connections (refused, or closed before an answer) within stoppedWait.
func daemonStopped(ctx context.Context, c *client.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, stoppedWait)
	defer cancel()
	for {
		_, err := c.Health(ctx)
		if errors.Is(err, syscall.ECONNREFUSED) || closedEarly(err) {
			return true
		}
		if err != nil {
			return false // not answered in time, or answered otherwise
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// daemonOf returns the daemon (scheme://host) of the request err is the
// failure of, and whether err names one.
func daemonOf(err error) (base string, ok bool) {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return "", false
	}
	if u, perr := url.Parse(ue.URL); perr == nil {
		return u.Scheme + "://" + u.Host, true
	}
	return ue.URL, true
}

// closedEarly reports whether err says that a connection to the daemon
// ended before its answer or stream did.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// recordedGone reports whether base is the address of the daemon this
// user's state directory records (no $CONCH_URL names another), and that
// daemon no longer runs.
func recordedGone(base string) bool {
	if os.Getenv(client.EnvURL) != "" {
		return false
	}
	dir, err := client.StateDir()
	if err != nil {
		return false
	}
	ep, err := client.ReadEndpoint(dir)
	if err != nil || strings.TrimSuffix(ep.URL, "/") != base {
		return false
	}
	return !daemonrec.Running(dir, ep.PID)
}

// noDaemon says why no daemon answers at base ("" when none was found at
// all) and how to start one.
func noDaemon(base string) string {
	const start = "start one with 'conch serve' (it stays in the foreground: run it in another terminal, or as 'conch serve &')"
	if os.Getenv(client.EnvURL) != "" {
		return fmt.Sprintf("nothing answers at %s ($%s): is a daemon running there? %s, or unset %s to reach this user's own daemon",
			base, client.EnvURL, strings.Replace(start, "'conch serve'", "'conch serve --listen ADDR'", 1), client.EnvURL)
	}
	dir, err := client.StateDir()
	if err != nil {
		return "no daemon is running for this user: " + start
	}
	ep, err := client.ReadEndpoint(dir)
	switch {
	case err != nil:
		return fmt.Sprintf("no daemon is running for this user (none is recorded in %s): %s", dir, start)
	case daemonrec.Running(dir, ep.PID):
		return fmt.Sprintf("the daemon recorded in %s (pid %d) does not answer at %s: it may be starting or stopping; if it is stuck, stop it and %s",
			filepath.Join(dir, client.EndpointFile), ep.PID, cmp.Or(base, ep.URL), start)
	}
	return fmt.Sprintf("the daemon recorded in %s (pid %d) is no longer running: it was killed or crashed; %s",
		filepath.Join(dir, client.EndpointFile), ep.PID, start)
}

// noToken says why there is no token file to read (err, from
// client.Discover, says which) and what to do: the daemon recorded runs,
// and its file was removed, or none runs.
func noToken(err error) string {
	dir, derr := client.StateDir()
	if derr != nil {
		return noDaemon("")
	}
	ep, eerr := client.ReadEndpoint(dir)
	if eerr != nil || !daemonrec.Running(dir, ep.PID) {
		return noDaemon("")
	}
	path := ep.TokenFile
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path = pe.Path
	}
	return fmt.Sprintf("the daemon recorded in %s (pid %d) runs, but its token file %s is missing: set $%s to its token, or stop it and start it again with 'conch serve', which writes a new one",
		filepath.Join(dir, client.EndpointFile), ep.PID, path, client.EnvToken)
}

// badToken says which token the daemon refused and what to do about it:
// the daemon's own words ("missing or wrong bearer token") name neither.
func badToken() string {
	if os.Getenv(client.EnvToken) != "" {
		return fmt.Sprintf("the daemon refused the token in $%s: set it to the daemon's token, or unset it to use the token this user's daemon wrote",
			client.EnvToken)
	}
	if u := os.Getenv(client.EnvURL); u != "" {
		return fmt.Sprintf("the daemon at %s ($%s) refused this user's token: set $%s to its token",
			u, client.EnvURL, client.EnvToken)
	}
	return "the daemon refused the token it recorded (was it restarted with another?): run the command again"
}

// notASession is err, a session route's answer for id, said as what id is
// when no session has it but a process does (the id of a one-shot process,
// or of a session's command, given to a session command): the daemon's
// "session ID: not found" left a user to find out why, and which command
// takes it. fit says, of that process, which command does: "remove it with
// conch rm ID". Every command that sends a session id asks it.
func notASession(ctx context.Context, c *client.Client, id string, err error, fit func(p *client.Process) string) error {
	if !client.HasCode(err, client.CodeNotFound) {
		return err
	}
	p, gerr := c.Get(ctx, id)
	if gerr != nil || p.System {
		// No process either, or a session's shell after all (a session
		// removed between the two requests): the daemon's words stand.
		return err
	}
	what := "a process"
	if p.SessionID != "" { // kind session, as its session's shell is
		what = "a command of session " + p.SessionID
	}
	return fmt.Errorf("%s is %s, not a session: %s", id, what, fit(p))
}
