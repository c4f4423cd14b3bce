package main

import (
	"cmp"
	"context"
	"flag"
	"strconv"
	"syscall"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
)

func cmdKill(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "kill", "ID...")
	sig := signalVar(fs, "s", "TERM", "`signal` to send, by name or number (TERM, KILL or 9, INT, HUP, ...)")
	// A negative duration is a usage error, as run's are, not a request
	// the daemon refuses.
	after := new(durationMillis)
	fs.Var(after, "escalate-after", "send the escalation signal after this `duration` if it still runs")
	to := signalVar(fs, "escalate-to", "", "escalation `signal` (default KILL)")
	// The kill of a session or code context answers once it has ended: what
	// outlives the signal gets the escalation after escalate-after
	// (process.StopGrace when none), then KILL process.StopGrace later.
	held := func() time.Duration { return cmp.Or(time.Duration(*after), process.StopGrace) + process.StopGrace }
	return eachIDHeld(ctx, e, fs, args, held, func(ctx context.Context, c *client.Client, id string) error {
		return c.Kill(ctx, id, client.KillOptions{Signal: string(*sig), EscalateAfter: client.Millis(*after), EscalateTo: string(*to)})
	})
}

// signalName is the name of a signal given by number (9 is KILL), as kill(1)
// takes it; the daemon takes names. Anything else is passed on as it is.
func signalName(s string) string {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return s
	}
	return process.SignalName(syscall.Signal(n))
}

func cmdRm(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "rm", "ID...")
	return eachID(ctx, e, fs, args, func(ctx context.Context, c *client.Client, id string) error { return c.Delete(ctx, id) })
}

// eachID parses args into fs and calls f with every id argument, bounded
// as a request the daemon answers at once. Each failure is reported; the
// status is 125 when any failed.
func eachID(ctx context.Context, e *env, fs *flag.FlagSet, args []string, f func(ctx context.Context, c *client.Client, id string) error) int {
	return eachIDHeld(ctx, e, fs, args, nil, f)
}

// eachIDHeld is eachID for a request the daemon may hold for up to held()
// (read once the flags are parsed) before it answers: that is given beyond
// answerWait.
func eachIDHeld(ctx context.Context, e *env, fs *flag.FlagSet, args []string, held func() time.Duration, f func(ctx context.Context, c *client.Client, id string) error) int {
	ids, code, ok := parseIDs(fs, args, atLeastOne)
	if !ok {
		return code
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	var extra time.Duration
	if held != nil {
		extra = held()
	}
	for _, id := range ids {
		qctx, cancel := quickWithin(ctx, c, answerWait+extra)
		err := signalErr(qctx, f(qctx, c, id))
		cancel()
		if err != nil {
			code = fail(e, exitOwn, err)
		}
	}
	return code
}
