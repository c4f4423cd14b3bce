package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// answerWait says when a run or interact call comes back before the process
// ends: after timeout, after idle without output, or when it waits for
// input. Zero durations do not bound the wait.
type answerWait struct {
	timeout, idle time.Duration
	// turn, when set, is the process, run on the waiting goroutine by its
	// TakeTurn until it ends or its context is done (see Server.submit):
	// the wait then cancels that context rather than waiting itself.
	turn *shellsession.Command
	// ended says that p had ended, with its final result, when the call
	// came (see endedNow): it is answered at once, as the wait route
	// answers, while what it left running may hold its output a while.
	ended bool
}

// answerRun waits for p as aw says and answers: 200 with its RunResult once
// it ended, else 202 with the process and its output so far.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, p process.Process, aw answerWait, a runAnswer) error {
	a.cameBack = s.awaitAnswer(r.Context(), p, aw)
	if err := r.Context().Err(); err != nil {
		return err
	}
	return s.writeRunAnswer(w, p, a)
}

// errIdle ends a wait whose process was quiet for its idle timeout.
var errIdle = errors.New("quiet for the idle timeout")

// awaitAnswer blocks until p is done, ctx ends, the timeout runs out, p has
// been quiet for the idle timeout (since its last frame or the start of the
// wait, whichever is later), or p waits for input. It returns why an answer
// comes early (api.CameBack...), "" when p is done or ctx ended.
func (s *Server) awaitAnswer(ctx context.Context, p process.Process, aw answerWait) string {
	start := time.Now()
	outer := ctx
	if aw.timeout > 0 {
		var stop func()
		ctx, stop = s.deadlines.with(ctx, aw.timeout)
		defer stop()
	}
	// early is why an answer comes before p's end: reason, unless p has
	// ended meanwhile.
	early := func(reason string) string {
		if endedNow(p) {
			return ""
		}
		return reason
	}
	if aw.ended {
		return ""
	}
	// timedOut is why an answer comes once ctx is done: the timeout, unless
	// the request itself ended (it gets no answer).
	timedOut := func() string {
		if outer.Err() != nil {
			return ""
		}
		return early(api.CameBackTimeout)
	}
	if aw.turn != nil {
		if due, idle := runUntilAnswer(ctx, p, aw, start); due {
			switch {
			case idle:
				return early(api.CameBackIdle)
			case ctx.Err() != nil:
				return timedOut()
			}
			return ""
		}
	}
	var idle <-chan time.Time
	var idleTimer *time.Timer
	if aw.idle > 0 {
		idleTimer = time.NewTimer(aw.idle)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	in := s.input(p.ID())
	for {
		changed := in.Changed()
		if in.Waiting() {
			return early(api.CameBackInput)
		}
		select {
		case <-p.Done():
			return ""
		case <-ctx.Done():
			return timedOut()
		case <-changed:
		case <-idle:
			quiet := quietFor(p, start)
			if quiet >= aw.idle {
				return early(api.CameBackIdle)
			}
			idleTimer.Reset(aw.idle - quiet)
		}
	}
}

// doneNow reports whether p has ended and its output is all read.
func doneNow(p process.Process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// endedNow reports whether p has ended, with its final result: a process
// is terminal before it is done while what it left running holds its output
// (read on for up to its drain delay), as the wait route answers it.
func endedNow(p process.Process) bool {
	if doneNow(p) {
		return true
	}
	i := p.Info()
	return i.State == process.Terminal && i.Result != nil
}

// runUntilAnswer runs p with aw.turn until p ends, ctx is done or, with an
// idle timeout, p has been quiet that long, and reports whether the answer
// is due, and whether it is for the idle timeout; it is not due when p
// runs on elsewhere (a later command came first). p has no input to wait
// for: it runs here only with its stdin closed.
func runUntilAnswer(ctx context.Context, p process.Process, aw answerWait, start time.Time) (due, idle bool) {
	if aw.idle <= 0 {
		aw.turn.TakeTurn(ctx)
	} else {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var mu sync.Mutex
		var t *time.Timer
		mu.Lock()
		t = time.AfterFunc(aw.idle, func() {
			mu.Lock()
			defer mu.Unlock()
			if quiet := quietFor(p, start); quiet < aw.idle {
				t.Reset(aw.idle - quiet)
				return
			}
			cancel(errIdle)
		})
		mu.Unlock()
		defer t.Stop()
		aw.turn.TakeTurn(ctx)
		if ctx.Err() != nil {
			return true, context.Cause(ctx) == errIdle
		}
	}
	select {
	case <-p.Done():
		return true, false
	case <-ctx.Done():
		return true, false
	default:
		return false, false
	}
}

// quietFor returns how long p has written nothing, since start at most.
func quietFor(p process.Process, start time.Time) time.Duration {
	last := p.Log().LastFrameTime()
	if last.Before(start) {
		last = start
	}
	return time.Since(last)
}

func (s *Server) interact(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	var opts api.InteractOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	sig, err := parseSignal("signal", opts.Signal, 0)
	if err != nil {
		return err
	}
	limit, err := s.outputLimit(opts.OutputLimit)
	if err != nil {
		return err
	}
	after, err := logCursor(p, opts.Cursor)
	if err != nil {
		return err
	}
	input := []byte(opts.Input)
	if opts.InputBase64 != "" {
		if opts.Input != "" {
			return badRequest("input and inputBase64: give one")
		}
		if input, err = base64.StdEncoding.DecodeString(opts.InputBase64); err != nil {
			return badRequest("inputBase64: %v", err)
		}
	}
	if p.Info().System {
		// Not even a bare wait: the shell is no command whose output an
		// answer could hold, and it ends only with its session.
		return fmt.Errorf("%w: interact on a session's own shell: run a command in it", process.ErrUnsupported)
	}
	// The call waits for the ones before it to answer, then takes its
	// cursor before it writes: the answer starts before anything its input
	// caused.
	// The wait for the turn counts toward the call's timeout.
	begun, timeout := time.Now(), opts.Timeout.Duration()
	turnCtx := r.Context()
	if timeout > 0 {
		var stop func()
		turnCtx, stop = s.deadlines.with(turnCtx, timeout)
		defer stop()
	}
	line := s.turns(p.ID())
	defer s.leftLine(p.ID(), line)
	done, err := line.take(turnCtx)
	if err != nil {
		if r.Context().Err() != nil {
			return err
		}
		if opts.Cursor == "" {
			after = p.Log().Seal()
		}
		return s.noTurn(w, p, len(input) > 0 || opts.EOF || sig != 0, runAnswer{after: after, limit: limit, plain: opts.Plain})
	}
	defer done()
	if timeout > 0 {
		timeout = max(timeout-time.Since(begun), time.Millisecond)
	}
	if p.Log().Keep() == logstore.KeepNone {
		// Nothing is kept for later reading: the answer holds what comes
		// while it waits, as a run's does, or nothing would reach it.
		defer p.Log().Hold()()
	}
	if sealed := p.Log().Seal(); opts.Cursor == "" {
		after = sealed
	}
	ended := endedNow(p)
	if err := s.deliver(p, input, opts.EOF, sig); err != nil {
		return err
	}
	return s.answerRun(w, r, p, answerWait{timeout: timeout, idle: opts.IdleTimeout.Duration(), ended: ended},
		runAnswer{after: after, limit: limit, plain: opts.Plain})
}

// noTurn answers an interact call whose timeout ran out before the calls
// before it on p had answered. One that had something to deliver (input,
// eof, a signal) delivered nothing: 409, saying so, to be sent again. A
// bare one is a wait that ran out: 202 with the output after its cursor
// (with none, after now: none), or 200 when p has ended.
func (s *Server) noTurn(w http.ResponseWriter, p process.Process, delivers bool, a runAnswer) error {
	if delivers {
		return fmt.Errorf("%w: interact: the calls before this one on process %s did not answer within its timeout; nothing of it was written or sent: send it again",
			process.ErrUnsupported, p.ID())
	}
	a.cameBack = api.CameBackTimeout
	return s.writeRunAnswer(w, p, a)
}

// deliver writes input to p, closes its stdin when eof, and sends it sig
// (none when 0), in that order. The caller parsed sig first, so that a bad
// name writes nothing.
func (s *Server) deliver(p process.Process, input []byte, eof bool, sig syscall.Signal) error {
	if len(input) > 0 || eof {
		if p.Info().Stdin != process.StdinOpen {
			return process.ErrStdinNotOpen
		}
	}
	// The watcher hears of the input after it was written, so that a look
	// begun before cannot leave a stale yes behind.
	if len(input) > 0 {
		// No frame holds both output from before the write and output
		// after it, so that a cursor taken before the write is before
		// every reply to it.
		p.Log().Seal()
		err := s.queueStdin(p, input)
		if !errors.Is(err, process.ErrStdinNotOpen) {
			s.input(p.ID()).Written() // all or part of it was queued
		}
		if err != nil {
			return err
		}
	}
	if eof {
		if err := p.CloseStdin(); err != nil {
			return err
		}
		s.input(p.ID()).Written()
	}
	if sig != 0 {
		if err := p.Kill(sig, 0, 0); err != nil {
			return err
		}
		// A signal changes what the process waits for as input does: a
		// yes from before it is stale (a trap runs, or the process ends).
		s.input(p.ID()).Written()
	}
	return nil
}
