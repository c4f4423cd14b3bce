package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
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
}

func addAnswerFlags(fs *flag.FlagSet) *answerFlags {
	f := &answerFlags{idle: new(durationMillis), wait: new(durationMillis)}
	fs.Var(f.idle, "idle", "come back once the command has written nothing for this `duration` (like 2s)")
	fs.Var(f.wait, "timeout", "come back after this `duration` if the command still runs")
	f.plain = fs.Bool("plain", false, "print the output as plain text: escape sequences removed, \\r and \\b overwrites applied")
	f.limit = fs.Int64("output-limit", 0, "print at most this many `bytes` of output, head and tail, and say what was left out (default: all of it)")
	return f
}

// early reports whether the flags ask run to come back before the end.
func (f *answerFlags) early() bool { return *f.idle > 0 || *f.wait > 0 }

// report prints an answer's output, and, when the command still runs (p
// not nil), says so on stderr with its id; it returns the exit status. An
// answer the daemon cut to its default bound is printed whole, joined with
// the logs it left out; one cut to --output-limit is printed as it is, with
// what was left out said on stderr.
func (f *answerFlags) report(ctx context.Context, e *env, c *client.Client, r *client.RunResult, p *client.Process, asJSON bool) int {
	switch {
	case asJSON:
		if code := printJSON(e, r); code != 0 {
			return exitOwn
		}
	case r.OmittedBytes > 0 && *f.limit == 0:
		write := frameWriter(e, false)
		var out, errs plaintext.Renderer
		if *f.plain {
			// Rendered per channel, as the daemon renders stdout and stderr.
			write = func(fr client.LogFrame) error {
				b, err := fr.Bytes()
				if fr.Channel == "stderr" {
					errs.Write(b)
				} else {
					out.Write(b)
				}
				return err
			}
		}
		dropped, err := c.WholeOutput(ctx, "", r, write)
		if err != nil {
			return fail(e, exitOwn, err)
		}
		if *f.plain {
			out.Flush()
			errs.Flush()
			fmt.Fprint(e.stdout, out.String())
			fmt.Fprint(e.stderr, errs.String())
		}
		if dropped {
			e.warn("part of the output was dropped by retention before it was read")
		}
	default:
		fmt.Fprint(e.stdout, r.Stdout)
		fmt.Fprint(e.stderr, r.Stderr)
		if r.OmittedBytes > 0 {
			fmt.Fprintf(e.stderr, "conch: %d bytes of output left out after cursor %s (conch logs)\n", r.OmittedBytes, r.OmittedAfter)
		}
	}
	if p == nil {
		return exitCode(r.WaitResult)
	}
	what := "is still running"
	if r.WaitingForInput {
		what = "waits for input"
	}
	fmt.Fprintf(e.stderr, "\nconch: %s %s; answer or wait on with: conch interact %s [--input TEXT] [--cursor %s]\n",
		p.ID, what, p.ID, r.Next)
	return exitRunning
}

// runEarly runs what args say through the run route, to come back as the
// answer flags say.
func (f *startFlags) runEarly(ctx context.Context, e *env, c *client.Client, a *answerFlags, stdin process.Stdin, args []string) int {
	opts, cmd, err := f.options(args, process.KindExec)
	if err != nil {
		return fail(e, exitOwn, err)
	}
	var r *client.RunResult
	var p *client.Process
	if *f.session != "" {
		cmd.Stdin = stdin
		r, p, err = c.RunCommand(ctx, *f.session, client.CommandRunOptions{
			CommandOptions: cmd, Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
			Plain: *a.plain, OutputLimit: *a.limit,
		})
	} else {
		opts.Stdin = stdin
		r, p, err = c.Run(ctx, client.RunOptions{
			StartOptions: opts, Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
			Plain: *a.plain, OutputLimit: *a.limit,
		})
	}
	if err != nil {
		return fail(e, exitOwn, err)
	}
	return a.report(ctx, e, c, r, p, *f.json)
}

func cmdInteract(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "interact", "ID")
	input := fs.String("input", "", "`text` to write to the command's stdin first; \\n, \\r, \\t, \\\\, \\e and \\xHH are read as escapes")
	eof := fs.Bool("eof", false, "close the command's stdin after the input")
	sig := fs.String("signal", "", "`signal` to send before waiting (INT, TERM, ...)")
	cursor := fs.String("cursor", "", "print the output after this `cursor` (default: what comes after the input)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	a := addAnswerFlags(fs)
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:] // the id may come before the flags
	}
	want := exactlyOne
	if id != "" {
		want = func(n int) bool { return n == 0 }
	}
	if code, ok := parseArgs(fs, args, want); !ok {
		return code
	}
	if id == "" {
		id = fs.Arg(0)
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	r, p, err := c.Interact(ctx, id, client.InteractOptions{
		Input: unescape(*input), EOF: *eof, Signal: *sig, Cursor: *cursor,
		Timeout: client.Millis(*a.wait), IdleTimeout: client.Millis(*a.idle),
		OutputLimit: *a.limit, Plain: *a.plain,
	})
	if err != nil {
		return fail(e, exitOwn, err)
	}
	return a.report(ctx, e, c, r, p, *asJSON)
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
