package main

import (
	"context"
	"fmt"
	"time"

	"github.com/conchsh/conch/client"
)

func cmdReady(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "ready", "ID --port PORT|any and/or --pattern RE", `Waits until the process, or a server it started (with & in a session), listens
on the port or has printed a line matching the pattern (given both, until both
hold), and prints "ready: port N" (given both too) or "ready: matched TEXT".

Exit status: 0 when it is ready; 1 when it ended before (how it ended is
printed, and whether retention or the log budget dropped output the pattern
may have been in); 123 when --timeout ran out first; 125 when conch failed.
Ctrl-C stops waiting and exits 130 (Ctrl-\: 131); the process goes on.`)
	var opts client.ReadyOptions
	portFlag(fs, &opts.Port)
	fs.StringVar(&opts.Pattern, "pattern", "", "wait until its output matches this `regexp` (RE2)")
	fs.DurationVar(&opts.Timeout, "timeout", 0, "give up after this `duration` (default: until it is ready or ends)")
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	if opts.Port == "" && opts.Pattern == "" {
		return usageError(e, "ready: give --port (a number or any) and/or --pattern")
	}
	if opts.Timeout < 0 { // it would mean no timeout at all
		return usageError(e, "--timeout %s: want a duration of 0 or more (0: until it is ready or ends)", opts.Timeout)
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	ictx, stop, interrupted := stopOnInterrupt(ctx)
	defer stop()
	start := time.Now()
	r, p, err := c.Ready(ictx, id, opts)
	switch {
	case err != nil && ictx.Err() != nil && ctx.Err() == nil:
		fmt.Fprintf(e.stderr, "conch: stopped waiting; %s goes on\n", id)
		return interrupted()
	case err != nil:
		return fail(e, exitOwn, err)
	case p != nil:
		fmt.Fprintf(e.stderr, "conch: %s is not ready after %s and still runs\n", id, time.Since(start).Round(time.Millisecond))
		return exitRunning
	case !r.Ready:
		result := "ended"
		if r.Result != nil {
			result = r.Result.String()
		}
		fmt.Fprintf(e.stderr, "conch: %s ended before it was ready (%s)\n", id, result)
		if r.Truncated {
			// The pattern may have been in what was dropped, which no
			// match sees: said, rather than taken for never written.
			fmt.Fprintf(e.stderr, "conch: part of its output was dropped by retention or the log budget before it was matched: the pattern may have been there\n")
		}
		return exitFailure
	case r.Port != 0:
		fmt.Fprintf(e.stdout, "ready: port %d\n", r.Port)
	default:
		fmt.Fprintf(e.stdout, "ready: matched %q\n", r.Match)
	}
	return 0
}
