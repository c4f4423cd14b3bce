package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
)

func cmdLogs(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "logs", "ID", `Prints the output kept of the process when it starts, stdout to stdout and
stderr to stderr, and says on stderr where output was dropped by retention
or the log budget (when retention dropped all of it first, a page of what is kept then; while
following, the first gap, then at most a line a second counting the gaps).
With -f, it follows until the process ends; Ctrl-C stops following and exits
130 (Ctrl-\: 131), and the process goes on. With --plain and --cursor, the
output before the cursor is read (a page within 30 s, $CONCH_ANSWER_WAIT) to
render what it left open (an unfinished line, an escape sequence): when it is
not, the output is printed rendered without it, that is said on stderr, and
conch exits 125, as conch interact does. A character the cursor is inside of is
printed whole, read from its start before the cursor; when that start is no
longer kept (or was not read), the rest of it is left out rather than printed
as U+FFFD.`)
	followFlag := fs.Bool("f", false, "follow: print new output until the process ends")
	cursor := fs.String("cursor", "", "only output after this `cursor`")
	asJSON := fs.Bool("json", false, "print frames as JSON lines (cursor, channel, data, encoding, timestamp)")
	plain := fs.Bool("plain", false, "print the output as plain text, line by line: escape sequences removed, \\r and \\b overwrites and cursor moves within a line applied, moves between lines, screen clears and switches to the alternate screen dropped (a full-screen program reads as its text in the order drawn; conch attach shows its screen)")
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	if *plain && *asJSON {
		return usageError(e, "--plain and --json: give one")
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	var open plaintext.Carried
	var unrendered error // why the output before the cursor was not read
	if *plain {
		var err error
		if open, err = carriedBefore(ctx, c, id, *cursor); err != nil {
			unrendered = unrenderedErr(id, *cursor, err)
		}
	}
	write, flush := frameWriter(e, *asJSON, *plain, open)
	printed := false // a frame was printed, rendered without what unrendered lacks
	out := func(f client.LogFrame) error {
		printed = true
		return write(f)
	}
	// failed and ended end the print: once it printed output rendered
	// without the output before the cursor, that is said, and the status
	// is 125, after whatever else went wrong; before it printed any, what
	// went wrong alone is said (a process that is not there).
	failed := func(err error) int {
		if unrendered != nil && printed {
			err = fmt.Errorf("%w; then: %s", unrendered, describe(err))
		}
		return fail(e, exitOwn, err)
	}
	ended := func() int {
		if unrendered != nil && printed {
			return fail(e, exitOwn, unrendered)
		}
		return 0
	}
	if *followFlag {
		ictx, stop, interrupted := stopOnInterrupt(ctx)
		defer stop()
		g := gaps{say: e.warn}
		defer g.flush()
		streamed := false // an event came: the stream ran
		for ev, err := range c.Stream(ictx, id, client.StreamOptions{Cursor: *cursor}) {
			if err != nil && ictx.Err() != nil && ctx.Err() == nil {
				flush()
				if unrendered != nil && printed {
					fail(e, exitOwn, unrendered) // said; the status is Ctrl-C's
				}
				return interrupted()
			}
			if err != nil {
				// A stream that ran, or was cut, was ended by the
				// daemon or its connection: which says what became of
				// the process.
				if streamed || closedEarly(err) {
					var stopped bool
					if err, stopped = followCut(ctx, c, id, err); !stopped && closedEarly(err) {
						err = fmt.Errorf("%w; %s may still run", err, id)
					}
				}
				return failed(err)
			}
			streamed = true
			switch ev.Type {
			case client.EventLog:
				if err := out(*ev.Frame); err != nil {
					return failed(err)
				}
			case client.EventWarning:
				g.note(ev.Warning)
			}
		}
		flush()
		return ended()
	}
	// What is kept now: up to the newest frame when it starts, so that the
	// output of a process that writes on does not keep it printing for
	// good (logs -f follows).
	qctx, cancel := quick(ctx, c)
	p, err := c.Get(qctx, id)
	err = signalErr(qctx, err)
	cancel()
	if err != nil {
		return failed(err)
	}
	last := cursorOf(p.LastCursor)
	opts := client.LogsOptions{Cursor: *cursor, Limit: 1000}
	seen := map[string]bool{opts.Cursor: true} // the cursors asked for
	prev := cursorOf(opts.Cursor)              // the last frame's cursor, or the one asked
	for first := true; ; first = false {
		qctx, cancel := quick(ctx, c) // each page: a long log takes many
		page, err := c.Logs(qctx, id, opts)
		err = signalErr(qctx, err)
		cancel()
		if err != nil {
			return failed(err)
		}
		if page.TruncatedHead {
			// On later pages: the output was dropped while it was read.
			if first && p.KeepLogs == api.KeepNone {
				e.warn(id + " keeps no output for later reading (keepLogs none): only a stream open while it writes gets it (conch logs -f)")
			} else if first {
				e.warn("the head of the output was dropped by retention or the log budget")
				if len(page.Items) > 0 && cursorOf(page.Items[0].Cursor) > last {
					// All that was kept when it started is gone (a
					// process that writes fast): one page of what is
					// kept now, rather than nothing.
					last = cursorOf(page.Items[len(page.Items)-1].Cursor)
				}
			} else {
				e.warn(fmt.Sprintf("output after cursor %s was dropped by retention or the log budget while it was read", opts.Cursor))
			}
		}
		done := len(page.Items) == 0
		for _, f := range page.Items {
			// The daemon's cursors are numbers that grow frame by frame,
			// and only frames up to last are printed: pages whose frames
			// do not move on (each page naming a new next all the same)
			// would be printed for ever.
			at := cursorOf(f.Cursor)
			if at <= prev {
				flush()
				return failed(fmt.Errorf("the logs of %s: pages that do not move on (frame cursor %q after %d): not the daemon's answer", id, api.Clip([]byte(f.Cursor)), prev))
			}
			prev = at
			if at > last {
				done = true
				break
			}
			if err := out(f); err != nil {
				return failed(err)
			}
		}
		// A page is bounded in bytes too: only an empty one is the end.
		if done {
			flush()
			return ended()
		}
		if seen[page.Next] {
			// Cursors only increase: asked again, the page would come
			// again, and be printed for ever.
			flush()
			return failed(fmt.Errorf("the logs of %s: pages that do not move on (next %q again): not the daemon's answer", id, api.Clip([]byte(page.Next))))
		}
		seen[page.Next] = true
		opts.Cursor = page.Next
	}
}

// cursorOf is a frame cursor's number, 0 when it is not one.
func cursorOf(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// carriedBefore returns what the output of process id up to cursor left
// open (see plaintext.Carried), from the frames just before it that are
// still kept: plain text printed from cursor on renders as the daemon's
// plain answers do, not the rest of a sequence cut there as text, nor the
// rest of a character cut there as U+FFFD. Cut is set when the frames just
// before it are not all kept.
// It returns the page's failure too, with nothing carried.
func carriedBefore(ctx context.Context, c *client.Client, id, cursor string) (plaintext.Carried, error) {
	var o plaintext.Carried
	n := cursorOf(cursor)
	if n == 0 {
		return o, nil
	}
	qctx, cancel := quick(ctx, c)
	defer cancel()
	back := min(n, plaintext.CarriedFrames)
	page, err := c.Logs(qctx, id, client.LogsOptions{Cursor: strconv.FormatUint(n-back, 10), Limit: int(back)})
	if err != nil {
		return plaintext.Carried{Cut: true}, signalErr(qctx, err)
	}
	o.Cut = true // until the frame at cursor is read
	for _, f := range page.Items {
		b, err := f.Bytes()
		if err != nil || cursorOf(f.Cursor) > n {
			break // past it: frames before it were dropped
		}
		o.Add(b, f.Channel == "stderr")
		o.Cut = page.TruncatedHead || cursorOf(f.Cursor) != n
	}
	return o, nil
}

// frameWriter returns how frames are printed: their bytes to stdout or
// stderr, as plain text (each line once it is finished, starting from what
// open says the output before them left open; flush prints the last one,
// and returns a failed write of it to stdout), or one JSON object per line.
func frameWriter(e *env, asJSON, plain bool, open plaintext.Carried) (write func(client.LogFrame) error, flush func() error) {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		return func(f client.LogFrame) error { return enc.Encode(f) }, func() error { return nil }
	}
	var outText, errText plaintext.Renderer
	outText.Write(open.Out) // no text: a sequence left open, a character's start
	errText.Write(open.Err)
	// How many continuation bytes at the start of each channel's text are
	// dropped (see plaintext.RestLen): the rest of a character whose first
	// bytes, before the cursor, were not read.
	var outRest, errRest int
	if open.Cut {
		if plaintext.IncompleteTail(open.Out) == 0 {
			outRest = utf8.UTFMax - 1
		}
		if plaintext.IncompleteTail(open.Err) == 0 {
			errRest = utf8.UTFMax - 1
		}
	}
	write = func(f client.LogFrame) error {
		b, err := f.Bytes()
		if err != nil {
			return err
		}
		w, r, rest := e.stdout, &outText, &outRest
		if f.Channel == "stderr" {
			w, r, rest = e.stderr, &errText, &errRest
		}
		if plain {
			if *rest > 0 && len(b) > 0 {
				k := min(plaintext.RestLen(b), *rest)
				b = b[k:]
				if *rest -= k; len(b) > 0 {
					*rest = 0 // a character starts: what follows is text
				}
			}
			_, _ = r.Write(b)
			_, err = fmt.Fprint(w, r.Lines())
			return err
		}
		_, err = w.Write(b)
		return err
	}
	flush = func() error {
		if !plain {
			return nil
		}
		outText.Flush()
		_, err := fmt.Fprint(e.stdout, outText.String())
		errText.Flush()
		fmt.Fprint(e.stderr, errText.String())
		return err
	}
	return write, flush
}
