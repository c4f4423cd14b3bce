package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// exitRunning is the status of run and interact when they come back before
// the command ended: it went quiet, waits for input, or the wait ran out.
const exitRunning = 123

// answerFlags are how long run (with them) and interact wait, and how they
// print.
type answerFlags struct {
	idle  *durationMillis
	wait  *durationMillis
	plain *bool
	limit *int64
	// from is the cursor the answer's output starts after, when one was
	// given: what the output before it left open is rendered first.
	from string
	// unrendered is why that output could not be read, when it could not
	// (see carried).
	unrendered error
}

func addAnswerFlags(fs *flag.FlagSet) *answerFlags {
	f := &answerFlags{idle: new(durationMillis), wait: new(durationMillis)}
	fs.Var(f.idle, "idle", "come back once the command has written nothing for this `duration` (like 2s)")
	fs.Var(f.wait, "timeout", "come back after this `duration` if the command still runs")
	f.plain = fs.Bool("plain", false, "print the output as plain text, line by line: escape sequences removed, \\r and \\b overwrites and cursor moves within a line applied, moves between lines, screen clears and switches to the alternate screen dropped (a full-screen program reads as its text in the order drawn; conch attach shows its screen)")
	f.limit = fs.Int64("output-limit", 0, "print at most this many `bytes` of output, head and tail, and say what was left out (default: all of it)")
	return f
}

// check returns what is wrong with the flags, for a usage error: a
// negative limit would mean none at all.
func (f *answerFlags) check() error {
	if *f.limit < 0 {
		return fmt.Errorf("--output-limit %d: want a number of bytes, 0 or more (0: all of it)", *f.limit)
	}
	return nil
}

// early reports whether the flags ask run to come back before the end.
func (f *answerFlags) early() bool { return *f.idle > 0 || *f.wait > 0 }

// report prints an answer's output, and, when the command still runs (p
// not nil), says so on stderr with its id; it returns the exit status. An
// answer the daemon cut to its default bound is printed whole, joined with
// the logs it left out; one cut to --output-limit is printed as it is, with
// what was left out said on stderr. When the reader of the output goes
// away (conch run --idle 5s yes | head -1), the command gets SIGPIPE, as a
// local one would, and the status is 141.
func (f *answerFlags) report(ctx context.Context, e *env, c *client.Client, r *client.RunResult, p *client.Process, asJSON bool) int {
	// A write to a broken pipe fails rather than end conch by SIGPIPE with
	// the command left running.
	proctree.SurviveBrokenPipe()
	if p != nil && *f.plain && !asJSON {
		r = f.heldBack(r)
	}
	if err := f.print(ctx, e, c, r, p, asJSON); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return brokenPipe(ctx, e, c, r.ProcessID, err)
		}
		if p != nil {
			err = fmt.Errorf("%w; %s still runs (conch interact %s --cursor %s)", err, p.ID, p.ID, r.Next)
		} else {
			err = fmt.Errorf("%w; %s has ended (%s)", err, r.ProcessID, r.WaitResult)
		}
		return fail(e, exitOwn, err)
	}
	if p == nil {
		return finish(e, r.ProcessID, r.WaitResult)
	}
	what := "is still running"
	switch {
	case r.WaitingForInput:
		what = "waits for input"
	case p.State == process.Starting:
		what = "is still queued"
	}
	// A line of its own, after output that left one open (a prompt).
	lead := ""
	if r.Output != "" && !strings.HasSuffix(r.Output, "\n") {
		lead = "\n"
	}
	fmt.Fprintf(e.stderr, "%sconch: %s %s; answer or wait on with: conch interact %s [--input TEXT] [--cursor %s]\n",
		lead, p.ID, what, p.ID, r.Next)
	return exitRunning
}

// heldBack is r, the --plain answer of a command that still runs, without
// its last frame when that frame is the first bytes of a character (the
// daemon sends them in a frame of their own when the rest comes later),
// whose text is a U+FFFD, and with the cursor before that frame as its
// next: the answer read on from it renders the character whole, rather
// than a U+FFFD now and another for its rest then. It is r as it is when
// no cursor names where that frame starts. A daemon that holds such a
// frame back itself (docs/api.md) sends none: r is then as it is.
func (f *answerFlags) heldBack(r *client.RunResult) *client.RunResult {
	n := len(r.Logs)
	if n == 0 || r.OmittedBytes > 0 {
		return r
	}
	last := r.Logs[n-1]
	b, err := last.Bytes()
	if err != nil || len(b) == 0 || plaintext.IncompleteTail(b) != len(b) {
		return r
	}
	before := f.from
	if n > 1 {
		before = r.Logs[n-2].Cursor
	}
	text := &r.Stdout
	if last.Channel == "stderr" {
		text = &r.Stderr
	}
	const replaced = "\uFFFD"
	if before == "" || !strings.HasSuffix(*text, replaced) || !strings.HasSuffix(r.Output, replaced) {
		return r
	}
	held := *r
	held.Logs = r.Logs[:n-1]
	held.Next = before
	held.Output = strings.TrimSuffix(r.Output, replaced)
	if last.Channel == "stderr" {
		held.Stderr = strings.TrimSuffix(r.Stderr, replaced)
	} else {
		held.Stdout = strings.TrimSuffix(r.Stdout, replaced)
	}
	return &held
}

// print writes an answer's output, as report says; it returns the first
// write or read that failed, and, after what was printed all the same, why
// --plain output from a cursor was rendered without the output before it
// (see carried).
func (f *answerFlags) print(ctx context.Context, e *env, c *client.Client, r *client.RunResult, p *client.Process, asJSON bool) error {
	err := f.printOutput(ctx, e, c, r, p, asJSON)
	switch {
	case f.unrendered == nil || errors.Is(err, syscall.EPIPE):
		return err
	case err == nil:
		return f.unrendered
	}
	return fmt.Errorf("%w; then: %s", f.unrendered, describe(err))
}

// printOutput is print but for what carried could not read.
func (f *answerFlags) printOutput(ctx context.Context, e *env, c *client.Client, r *client.RunResult, p *client.Process, asJSON bool) error {
	switch {
	case asJSON:
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if p != nil {
			return enc.Encode(earlyAnswer(p, r))
		}
		return enc.Encode(r)
	case r.OmittedBytes > 0 && *f.limit == 0:
		if r.Truncated {
			e.warn("the head of the output was dropped by retention or the log budget before it was read")
		}
		// Rendered per channel as it comes, as the daemon renders stdout and stderr.
		write, flush := frameWriter(e, false, *f.plain, f.carried(ctx, c, r.ProcessID))
		// Each page the daemon is asked for is bounded, as a quick request
		// is; the printing of its frames is not.
		qctx, between, cancel := quickEach(ctx, c)
		var last string // the cursor of the last frame printed
		var paged int64 // the bytes printed past the head
		head := slices.IndexFunc(r.Logs, func(fr client.LogFrame) bool { return fr.Cursor == r.OmittedAfter })
		printed := 0
		nl := true     // whether what was printed ends a line
		var werr error // a write of conch's own that failed
		dropped, err := c.WholeOutput(qctx, "", r, func(fr client.LogFrame) error {
			return between(func() error {
				if werr = write(fr); werr != nil {
					return werr
				}
				b, _ := fr.Bytes()
				if last = fr.Cursor; printed > head {
					paged += int64(len(b))
				}
				if len(b) > 0 {
					nl = b[len(b)-1] == '\n'
				}
				printed++
				return nil
			})
		})
		err = signalErr(qctx, err)
		cancel()
		if err != nil && werr == nil {
			// A page the daemon did not give: what was read is printed,
			// then what is missing, said where it is, then the tail the
			// answer holds.
			return f.printRest(e, r, head, last, paged, nl, write, flush, err)
		}
		if err != nil {
			// --plain holds an unfinished line back, which was lost with
			// the rest.
			_ = flush()
			return err
		}
		if dropped {
			// Retention dropped a page before it was read: what was read
			// is printed, then the gap, said where it is, then the tail
			// the answer holds, as for a page not read; the dropped
			// bytes are nowhere to read again, and the status is the
			// command's, as for output dropped while it was followed.
			return f.printRest(e, r, head, last, paged, nl, write, flush, nil)
		}
		return flush()
	}
	if r.Truncated {
		e.warn("the head of the output was dropped by retention or the log budget before it was read")
	}
	if r.OmittedBytes > 0 {
		// Cut to --output-limit: the head, then what was left out, said
		// where it was, then the tail; the text fields join head and tail.
		head := r.Logs[:r.Head()]
		if err := f.printFrames(e, head, f.carried(ctx, c, r.ProcessID)); err != nil {
			return err
		}
		at := ""
		if n := len(head); n > 0 {
			if b, err := head[n-1].Bytes(); err == nil && len(b) > 0 && b[len(b)-1] != '\n' {
				at = "\n" // the head ends inside a line: the notice goes on a line of its own
			}
		}
		fmt.Fprintf(e.stderr, "%sconch: %d bytes of output left out here; %s\n", at, r.OmittedBytes, omittedHint(r, head))
		return f.printFrames(e, r.Logs[len(head):], plaintext.Carried{})
	}
	if *f.plain {
		// The text is the point: a terminal's rendering of the output.
		if _, err := fmt.Fprint(e.stdout, r.Stdout); err != nil {
			return err
		}
		fmt.Fprint(e.stderr, r.Stderr)
	} else {
		// The frames, not the text fields, whose bytes that are not
		// UTF-8 the daemon replaced: what the command wrote, exactly.
		return f.printFrames(e, r.Logs, plaintext.Carried{})
	}
	return nil
}

// printRest prints, once a page of the output r left out could not be read
// (err), the rest of what conch has of it: the answer's frames past the last
// one printed (last, "" for none; paged is the bytes printed past the head,
// whose last whole frame is r.Logs[head]; nl, whether what was printed ends
// a line), with, where the gap is, on stderr, how many bytes are missing and
// the command that reads them. It returns err, said as output that was
// lost; nil when the answer held all that was not printed. A nil err is a
// page that retention dropped before it was read: the gap is said as that,
// with nothing to read it again, and nil is returned.
func (f *answerFlags) printRest(e *env, r *client.RunResult, head int, last string, paged int64, nl bool, write func(client.LogFrame) error, flush func() error, err error) error {
	// The bytes from the head to r.Next: those left out and those of the
	// answer's frames after the head. What is missing is what of them was
	// neither printed nor is in the answer's frames still to print.
	missing := r.OmittedBytes - paged
	var cut, tail []client.LogFrame // the head's cut frame, the tail
	for i := head + 1; i < len(r.Logs); i++ {
		fr := r.Logs[i]
		if last != "" && cursorOf(fr.Cursor) <= cursorOf(last) {
			b, berr := fr.Bytes()
			if berr != nil {
				return berr
			}
			missing += int64(len(b)) // printed whole from a page
			continue
		}
		if i < r.Head() {
			cut = append(cut, fr)
		} else {
			tail = append(tail, fr)
		}
	}
	if missing <= 0 {
		// The answer held the rest: nothing is lost.
		return errors.Join(writeAll(write, append(cut, tail...)), flush())
	}
	if err := writeAll(write, cut); err != nil {
		return err
	}
	for _, fr := range cut {
		b, _ := fr.Bytes()
		if len(b) > 0 {
			nl = b[len(b)-1] == '\n'
		}
	}
	if werr := flush(); werr != nil {
		return werr
	}
	lead := ""
	if !nl {
		lead = "\n" // the notice goes on a line of its own
	}
	if err == nil {
		fmt.Fprintf(e.stderr, "%sconch: %d bytes of output are missing here: the daemon's log retention dropped output here before it was read\n",
			lead, missing)
	} else {
		fmt.Fprintf(e.stderr, "%sconch: %d bytes of output could not be read here; conch logs --cursor %s %s prints them, then the tail and what came after it\n",
			lead, missing, cmp.Or(last, r.OmittedAfter), r.ProcessID)
	}
	// The tail is rendered on its own, as the daemon renders it.
	if werr := f.printFrames(e, tail, plaintext.Carried{}); werr != nil || err == nil {
		return werr
	}
	return fmt.Errorf("%d bytes of the output of %s were not printed (see above): %w", missing, r.ProcessID, err)
}

// writeAll writes frames through write, up to the first that fails.
func writeAll(write func(client.LogFrame) error, frames []client.LogFrame) error {
	for _, fr := range frames {
		if err := write(fr); err != nil {
			return err
		}
	}
	return nil
}

// omittedHint names the command that reads what an answer cut to
// --output-limit left out, and says what it prints: a logs page starts at a
// frame's start, and the frame the head was cut in (after the cursor
// OmittedAfter) gives the head's last bytes again, which a hint naming the
// cursor alone hid (conch logs --cursor 0 of seq 1 10000 printed the head,
// the bytes left out and the tail, as one frame held it all).
func omittedHint(r *client.RunResult, head []client.LogFrame) string {
	again := 0
	if at := slices.IndexFunc(head, func(f client.LogFrame) bool { return f.Cursor == r.OmittedAfter }); at+1 < len(head) {
		for _, f := range head[at+1:] {
			b, _ := f.Bytes()
			again += len(b)
		}
	}
	read := fmt.Sprintf("conch logs --cursor %s %s", r.OmittedAfter, r.ProcessID)
	if again == 0 {
		return read + " prints them, then the tail and what came after it"
	}
	return fmt.Sprintf("%s prints them after the head's last %d bytes again, then the tail and what came after it", read, again)
}

// carried is what the output before the answer's cursor left open, when
// its frames are rendered as plain text. When that output cannot be read,
// nothing is carried, and f.unrendered says why: the text printed from the
// cursor may then lack what it left open (an unfinished line that a \r
// goes back over, an escape sequence), and conch exits 125 once it has
// printed what it has.
func (f *answerFlags) carried(ctx context.Context, c *client.Client, id string) plaintext.Carried {
	if !*f.plain {
		return plaintext.Carried{}
	}
	o, err := carriedBefore(ctx, c, id, f.from)
	if err != nil {
		f.unrendered = unrenderedErr(id, f.from, err)
	}
	return o
}

// unrenderedErr says that the output of id before cursor could not be read
// (err), so that what follows it was printed rendered without it.
func unrenderedErr(id, cursor string, err error) error {
	return fmt.Errorf("the output of %s before cursor %s could not be read, and what follows it was printed rendered without it (what it left open, an unfinished line or escape sequence, was not applied): %s",
		id, cursor, describe(err))
}

// earlyAnswer is an answer that came back before the command ended as the
// run route gives it (202): the process's fields (id, state,
// waitingForInput, ...) with the output so far and why it came back.
func earlyAnswer(p *client.Process, r *client.RunResult) map[string]any {
	var answer, output map[string]any
	b, _ := json.Marshal(p)
	_ = json.Unmarshal(b, &answer)
	b, _ = json.Marshal(r)
	_ = json.Unmarshal(b, &output)
	for k, v := range output {
		if _, ok := answer[k]; ok || k == "reason" && v == "" {
			continue // the process's own, or a result it has not yet
		}
		answer[k] = v
	}
	return answer
}

// printFrames writes frames, rendered with --plain (on its own, after what
// open says the output before them left open: a head and a tail are each
// rendered alone, as the daemon renders them).
func (f *answerFlags) printFrames(e *env, frames []client.LogFrame, open plaintext.Carried) error {
	write, flush := frameWriter(e, false, *f.plain, open)
	for _, fr := range frames {
		if err := write(fr); err != nil {
			return err
		}
	}
	return flush()
}

// runEarly runs what args say through the run route, to come back as the
// answer flags say.
func (f *startFlags) runEarly(ctx context.Context, e *env, c *client.Client, a *answerFlags, stdin process.Stdin, args []string) int {
	opts, cmd, err := f.options(args, process.KindExec)
	if err != nil {
		return fail(e, exitOwn, err)
	}
	// The command is started, then waited for by interact from the zero
	// cursor (before its first frame), as the run route would answer, so
	// that its id is known while conch waits: Ctrl-C reaches the command.
	if *f.stdin {
		stdin = process.StdinOpen
	}
	var started *client.Process
	sigs := catchSignals()
	sctx, done := sigs.whileStarting(ctx)
	qctx, cancel := quick(sctx, c) // as conch start's
	if *f.session != "" {
		cmd.Stdin = stdin
		started, err = c.Submit(qctx, *f.session, cmd)
		err = f.sessionErr(qctx, c, err)
	} else {
		opts.Stdin = stdin
		started, err = c.Start(qctx, opts)
	}
	err = signalErr(qctx, err)
	cancel()
	done()
	if err != nil {
		sigs.release()
		return fail(e, exitOwn, err)
	}
	ctx, stop := sigs.passTo(ctx, c, started.ID)
	defer stop()
	defer sigs.passReaderGone(e.stdout)()
	ask := client.InteractOptions{
		Cursor:  logstore.Cursor(0).String(),
		Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
		Plain: *a.plain, OutputLimit: *a.limit,
	}
	var r *client.RunResult
	var p *client.Process
	if !*f.stdin {
		actx, cancel := awaitAnswer(ctx, c, time.Duration(*a.wait))
		r, p, err = c.Interact(actx, started.ID, ask)
		err = signalErr(actx, err)
		cancel()
	} else {
		// -i (without --idle or --timeout, which cmdRun refuses): conch's
		// stdin is the command's. The daemon answers an interact as soon
		// as the command waits for input, which may be for what conch has
		// yet to send: the end is waited for, then the answer asked for,
		// which the daemon gives at once.
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sctx := sendStdin(cctx, e, c, started.ID, e.stdin)
		actx, cancelWait := awaitAnswer(sctx, c, 0)
		_, _, err = c.Wait(actx, started.ID, 0)
		err = signalErr(actx, err)
		cancelWait()
		if err == nil {
			qctx, cancel := quick(ctx, c)
			r, p, err = c.Interact(qctx, started.ID, ask)
			err = signalErr(qctx, err)
			cancel()
		}
	}
	if err != nil {
		var answered *client.Error
		// Not a refusal, nor passTo's give-up, which says so.
		if !errors.As(err, &answered) && context.Cause(ctx) == nil {
			err = fmt.Errorf("%w; %s may still run (conch interact %s, conch kill %s)", err, started.ID, started.ID, started.ID)
		}
		return fail(e, exitOwn, err)
	}
	code := a.report(ctx, e, c, r, p, *f.json)
	if *f.verbose && p == nil {
		printUsage(e.stderr, r.WaitResult)
	}
	return code
}

func cmdInteract(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "interact", "ID", `Writes the input, sends the signal, then waits as 'conch run --idle' does and
prints the output after the input (or after --cursor). A daemon that does not
answer (stopped, or stuck) ends it with exit 125, as it ends 'conch run': a wait
30 s past --timeout, /healthz (asked every 15 s while conch waits) within 30 s,
or, after the answer, a page of the output it left out, or the question whether
the command has ended when the input was refused, within 30 s ($CONCH_ANSWER_WAIT,
like 5s, sets the 30 s; /healthz is then asked every half of it). A page not
read so leaves a gap, said on stderr with the bytes missing and the conch logs
--cursor command that prints them; the tail the answer held is printed after it.
So does output that the daemon's log retention dropped before a page read it
(a command that writes on): said with the bytes missing, which nothing reads
again, and the status is not changed.
With --plain and --cursor, the output before the cursor is read (a page within
30 s too) to render what it left open (an unfinished line, an escape sequence):
when it is not, the output is printed rendered without it, that is said on
stderr, and conch exits 125.

Ctrl-C is passed to the command, as --signal INT would be (SIGTERM, SIGHUP
and Ctrl-\'s SIGQUIT as they are); conch then prints what it wrote and exits
as it did.
When the reader of conch's output goes away (| head; a pipe's reader that
goes before the answer too), the command gets SIGPIPE and conch exits 141.

Exit status: the command's own once it ended; 123 while it still runs (the
cursor to read on from is printed); 125 when conch failed, or the command had
already ended before the input could be written (its result is printed).`)
	input := fs.String("input", "", "`text` to write to the command's stdin first; \\n, \\r, \\t, \\\\, \\e and \\xHH are read as escapes")
	eof := fs.Bool("eof", false, "close the command's stdin after the input")
	sig := signalVar(fs, "signal", "", "`signal` to send before waiting, by name or number (INT or 2, TERM, ...)")
	cursor := fs.String("cursor", "", "print the output after this `cursor` (default: what comes after the input)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	a := addAnswerFlags(fs)
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	if err := a.check(); err != nil {
		return usageError(e, "%v", err)
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	sigs := catchSignals()
	ctx, stop := sigs.passTo(ctx, c, id)
	defer stop()
	defer sigs.passReaderGone(e.stdout)()
	opts := client.InteractOptions{
		EOF: *eof, Signal: string(*sig), Cursor: *cursor,
		Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
		OutputLimit: *a.limit, Plain: *a.plain,
	}
	// Bytes \xHH made that are no UTF-8 (\xff) go as bytes, not as text.
	if in := unescape(*input); utf8.ValidString(in) {
		opts.Input = in
	} else {
		opts.InputBase64 = base64.StdEncoding.EncodeToString([]byte(in))
	}
	actx, cancel := awaitAnswer(ctx, c, time.Duration(*a.wait))
	r, p, err := c.Interact(actx, id, opts)
	err = signalErr(actx, err)
	cancel()
	if err != nil {
		return fail(e, exitOwn, ended(ctx, c, id, err))
	}
	a.from = *cursor
	return a.report(ctx, e, c, r, p, *asJSON)
}

// ended is err, or, when the process has ended and that is why the input
// could not be written, an error that says so with its result; when the
// daemon does not answer the question, err and that.
func ended(ctx context.Context, c *client.Client, id string, err error) error {
	if !client.HasCode(err, client.CodeUnsupportedOperation) {
		return err
	}
	qctx, cancel := quick(ctx, c)
	p, gerr := c.Get(qctx, id)
	gerr = signalErr(qctx, gerr)
	cancel()
	if isNotAnswered(gerr) {
		return fmt.Errorf("%s; asked then whether %s has ended: %w", describe(err), id, gerr)
	}
	if gerr != nil {
		return err
	}
	r := p.Result()
	if r == nil {
		return err
	}
	return fmt.Errorf("%s has ended (%s): nothing was written or sent to it", id, r)
}

// unescape reads the escapes a user types in --input: \n, \r, \t, \\, \e,
// \0 and \xHH. Any other backslash stays as it is.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'e':
			b.WriteByte(0x1b)
		case '0':
			b.WriteByte(0)
		case '\\':
			b.WriteByte('\\')
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			b.WriteString(`\x`)
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
