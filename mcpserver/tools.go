package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
)

const instructions = `conch runs shell commands in persistent sessions: a session is one shell ` +
	`process, so cd, exported variables and shell functions carry over from one run to the next. ` +
	`Use run for commands; when run answers "still running", use interact to answer a prompt, ` +
	`interrupt (signal INT) or wait longer, and read_output to page through output left out. ` +
	`run with language (python or javascript) makes the session a code context instead: a ` +
	`persistent interpreter in which variables, functions and imports carry over between runs.`

var runTool = &mcp.Tool{
	Name: "run",
	Description: `Run a shell command in a named persistent session and wait for it. ` +
		`The session (default "main") is created on first use with the given shell and cwd; its ` +
		`working directory, environment and shell state carry over to later runs in it. ` +
		`The answer comes when the command ends (exit code, the session's cwd after it, the output ` +
		`as plain text), or earlier when it waits for input, when timeout (default 30 s) runs out, ` +
		`or when it printed nothing for idleTimeout: then it says "still running as ID" (or "still ` +
		`queued as ID" behind an earlier command of the session) and the command goes on; use ` +
		`interact with that id to answer, interrupt or wait more. Long output ` +
		`keeps its head and tail within outputLimit bytes and says how much was omitted and the ` +
		`cursor read_output reads it from. A non-zero exit code is a normal result, not an error. ` +
		`With language (python or javascript), a new session is a code context: command is run as ` +
		`code in a persistent interpreter instead of a shell, its variables and imports carry over, ` +
		`a trailing expression's value is printed as a REPL prints it, top-level await works in both ` +
		`languages, and an exception is exit code 1 ` +
		`with its traceback. Later runs in a code context run code whether or not language is given; ` +
		`a language that does not match the existing session is an error. A session whose shell or ` +
		`interpreter ended (exit, sys.exit()) is made again of the same kind, fresh, by the run after ` +
		`the one told so (a session the daemon had before, made elsewhere, is made again without the ` +
		`environment variables it was created with, as the answer says); close_session makes the name new.`,
}

// RunInput is the run tool's input.
type RunInput struct {
	Command     string  `json:"command" jsonschema:"the shell command line to run, as typed at a prompt; in a code context (see language), the code to run"`
	Session     string  `json:"session,omitempty" jsonschema:"name of the session to run in; default main. A new name starts a new session"`
	Shell       string  `json:"shell,omitempty" jsonschema:"shell of a new session: bash (default), sh, dash, zsh, ksh, mksh, busybox (its sh) or a path to one; ignored once the session exists"`
	Language    string  `json:"language,omitempty" jsonschema:"python or javascript (node, js): run the text as Python or JavaScript code in a persistent interpreter instead of a shell. Makes a new session a code context; on an existing session it must match what the session is. Not with shell"`
	Cwd         string  `json:"cwd,omitempty" jsonschema:"starting directory of a new session; ignored once the session exists (use cd)"`
	Timeout     float64 `json:"timeout,omitempty" jsonschema:"seconds to wait before answering with the command still running; default 30, from 0.001 to 86400 (a day): a longer timeout waits a day, a shorter one a millisecond. The command is not stopped"`
	IdleTimeout float64 `json:"idleTimeout,omitempty" jsonschema:"answer early once the command printed nothing for this many seconds; default none; from 0.001 to 86400 (a day), as timeout"`
	OutputLimit int64   `json:"outputLimit,omitempty" jsonschema:"bytes of output in the answer (head and tail); default 32768, at most 4194304; the line saying what was omitted (some 70 bytes) counts in it, and comes whole, alone, under a smaller limit"`
	CloseStdin  bool    `json:"closeStdin,omitempty" jsonschema:"run with stdin closed, so that reads get end of file at once; by default stdin stays open and a command that waits for input answers early, to be answered with interact"`
	Limits      *Limits `json:"limits,omitempty" jsonschema:"bounds of a new session: its shell or interpreter and everything its commands start, together; ignored once the session exists"`
}

// Limits bound a new session (RunInput.Limits).
type Limits struct {
	MemoryBytes int64 `json:"memoryBytes,omitempty" jsonschema:"memory in bytes, without swap; past it the OOM killer ends a process (the answer says oomKilled)"`
	Pids        int64 `json:"pids,omitempty" jsonschema:"processes and threads at once; a fork past it fails"`
	CPUMillis   int64 `json:"cpuMillis,omitempty" jsonschema:"CPU time per second: 1000 is one core"`
}

var interactTool = &mcp.Tool{
	Name: "interact",
	Description: `Work with a command that is still running (an id from run): send input ` +
		`(include the trailing newline to press Enter), close its stdin (eof), or send a ` +
		`signal (INT to interrupt like Ctrl-C, TERM, KILL), then wait and read the output that ` +
		`came after the last answer for it, answered as run answers. With nothing to send it ` +
		`just waits longer. Pass cursor (the "next" of an answer, or an omittedAfter) to read after another point.`,
}

// InteractInput is the interact tool's input.
type InteractInput struct {
	ID          string  `json:"id" jsonschema:"id of the running command, as run or list gave it"`
	Input       string  `json:"input,omitempty" jsonschema:"text written to the command's stdin; end it with a newline to submit a line"`
	EOF         bool    `json:"eof,omitempty" jsonschema:"close the command's stdin after the input"`
	Signal      string  `json:"signal,omitempty" jsonschema:"signal sent to the command and its children after the input: INT, TERM, KILL, HUP, QUIT, ..."`
	Cursor      string  `json:"cursor,omitempty" jsonschema:"read output after this cursor (next of an earlier answer of run, interact or read_output, or an omittedAfter, as given: CURSOR+N and a ~HEX end too); default: after the last answer run or interact gave for this command, so that nothing printed since is missed"`
	Timeout     float64 `json:"timeout,omitempty" jsonschema:"seconds to wait before answering with the command still running; default 30, from 0.001 to 86400 (a day): a longer timeout waits a day, a shorter one a millisecond"`
	IdleTimeout float64 `json:"idleTimeout,omitempty" jsonschema:"answer early once the command printed nothing for this many seconds; from 0.001 to 86400 (a day), as timeout"`
	OutputLimit int64   `json:"outputLimit,omitempty" jsonschema:"bytes of output in the answer (head and tail); default 32768, at most 4194304; the line saying what was omitted (some 70 bytes) counts in it, and comes whole, alone, under a smaller limit"`
}

var readTool = &mcp.Tool{
	Name: "read_output",
	Description: `Read a command's output from a cursor, without waiting: the output left out ` +
		`of a long answer (cursor = its omittedAfter) or what a still running command printed ` +
		`since an answer (cursor = its next). Answers at most limit bytes as plain text and the ` +
		`next cursor to read on from (it may be CURSOR+N, within a frame, and end in ~HEX, the escape sequence ` +
		`open there: pass it as given); "more" says there is more ` +
		`to read now.`,
}

// ReadInput is the read_output tool's input.
type ReadInput struct {
	ID     string `json:"id" jsonschema:"id of the command"`
	Cursor string `json:"cursor,omitempty" jsonschema:"read after this cursor; default: from the start of the output"`
	Limit  int64  `json:"limit,omitempty" jsonschema:"bytes to read at most (a character longer than that comes whole); default 32768, at most 4194304"`
}

var listTool = &mcp.Tool{
	Name: "list",
	Description: `List the sessions (name, id, shell, cwd, state) and the commands still ` +
		`running (id, session, command line, whether it waits for input), each oldest first. Use it to find an id ` +
		`for interact or read_output, or to see which sessions exist.`,
}

// ListInput is the list tool's input: there is nothing to choose.
type ListInput struct{}

var closeTool = &mcp.Tool{
	Name: "close_session",
	Description: `Close a session: end its shell and every command still running in it. ` +
		`A later run with the same name starts a fresh session, with the shell or language it gives.`,
}

// CloseInput is the close_session tool's input.
type CloseInput struct {
	Session string `json:"session,omitempty" jsonschema:"name of the session to close; default main"`
}

// CloseOutput is the close_session tool's answer.
type CloseOutput struct {
	Session string `json:"session"`
	ID      string `json:"id"`
	Closed  bool   `json:"closed"`
}

func (s *Server) run(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, Result, error) {
	if in.Command == "" {
		return nil, Result{}, errors.New("command is empty: give the shell command line to run")
	}
	wait, err := waits(in.Timeout, in.IdleTimeout, in.OutputLimit)
	if err != nil {
		return nil, Result{}, err
	}
	name := in.Session
	if name == "" {
		name = DefaultSession
	}
	if len(name) > api.MaxNameBytes {
		// Said without the name, which the daemon's refusal quoted whole.
		return nil, Result{}, fmt.Errorf("session name is %d bytes, at most %d: give a shorter one", len(name), api.MaxNameBytes)
	}
	lang, err := language(in.Language, in.Shell)
	if err != nil {
		return nil, Result{}, err
	}
	sopts := client.SessionOptions{Shell: in.Shell, Language: lang, Cwd: in.Cwd}
	if l := in.Limits; l != nil {
		sopts.Limits = &client.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUMillis: l.CPUMillis}
	}
	var sess named
	var how origin
	// Submitted, then waited for, so that a cancelled call knows what to
	// interrupt. The submission is not cut short by a cancellation: the
	// daemon may have queued the command by then.
	cmd, prepared, err := s.submitInTurn(ctx, req, name, func() (string, client.CommandOptions, error) {
		var err error
		if sess, how, err = s.session(ctx, name, sopts); err != nil {
			return "", client.CommandOptions{}, err
		}
		if err := mismatch(name, sess, lang); err != nil {
			return "", client.CommandOptions{}, err
		}
		opts := client.CommandOptions{Stdin: api.StdinOpen}
		if sess.language != "" {
			opts.Code = in.Command
		} else {
			opts.Cmd = in.Command
		}
		if in.CloseStdin {
			opts.Stdin = api.StdinClosed
		}
		return sess.id, opts, nil
	})
	if !prepared {
		return nil, Result{}, err
	}
	id := sess.id
	var r *client.RunResult
	var p *client.Process
	// Taken once the command is queued, not before its turn.
	var cut bool
	wait.limit, cut = s.budget.take(req, wait.limit)
	if err == nil {
		r, p, err = s.c.Interact(ctx, cmd.ID, client.InteractOptions{Cursor: "0",
			Timeout: wait.timeout, IdleTimeout: wait.idle, OutputLimit: daemonLimit(wait.limit)})
	}
	if cmd != nil && ctx.Err() != nil && !s.cancelledByClient(req) {
		s.interrupt(cmd.ID)
	}
	if sessionEnded(err) || p == nil && r != nil && canceled(r) {
		next := "a new one"
		if n, ok := s.ended(name, id); ok {
			next = n.fresh()
		}
		return nil, Result{}, fmt.Errorf("session %q has ended (its shell or interpreter exited or it was closed): run again to start %s", name, next)
	}
	if err != nil {
		return nil, Result{}, explain(err)
	}
	r = s.whole(ctx, cmd.ID, r, wait.limit)
	out := s.result(ctx, r, answerOutput(r, "0"), p, id, wait.limit)
	out.Session = name
	s.answered(out)
	switch {
	case how == adopted:
		note := fmt.Sprintf("session %q is the daemon's running session of that name, made before, %s: its state carried over", name, sess.described())
		out.Note = joinNotes(joinNotes(note, ignored(sess, in)), out.Note)
	case how == existing && (in.Shell != "" || in.Cwd != "" || in.Limits != nil):
		out.Note = joinNotes(fmt.Sprintf("session %q existed already: %s", name, ignored(sess, in)), out.Note)
	case how == remade && in.Shell != "" && (sess.language != "" || in.Shell != sess.opts.Shell && in.Shell != sess.shell):
		out.Note = joinNotes(fmt.Sprintf("session %q had ended and was made again as it was, %s: a name keeps its kind, and shell applies only to a new name (close_session forgets it)", name, sess.kind()), out.Note)
	}
	if how == remade && sess.untold {
		out.Note = joinNotes(fmt.Sprintf("session %q had ended and was made again as the daemon said it was, %s, in the directory it was in when taken, but %s", name, sess.described(), envUntold), out.Note)
	}
	if cut {
		out.Note = joinNotes(out.Note, cutNote)
	}
	return textResult(out), out, nil
}

func (s *Server) interact(ctx context.Context, req *mcp.CallToolRequest, in InteractInput) (*mcp.CallToolResult, Result, error) {
	if in.ID == "" {
		return nil, Result{}, errors.New("id is empty: give the id run answered, or one from list")
	}
	wait, err := waits(in.Timeout, in.IdleTimeout, in.OutputLimit)
	if err != nil {
		return nil, Result{}, err
	}
	cursor := in.Cursor
	if cursor == "" {
		cursor = s.lastNext(in.ID)
	}
	// Any cursor an answer gave (its "~HEX" end, the escape sequence open
	// there, aside): the daemon's, or "CURSOR+N" (read_output's
	// next, an omittedAfter), which the daemon cannot read from. Of that
	// one the frame's rest is read here first, and the daemon reads on
	// after the frame.
	asked, skip, open, err := parseReadCursor(cursor)
	if err != nil {
		return nil, Result{}, err
	}
	var cut bool
	wait.limit, cut = s.budget.take(req, wait.limit)
	if asked == "" && cursor != "" {
		asked = "0" // "+N": from the start; the daemon's "" is after the input
	}
	limit := daemonLimit(wait.limit)
	var lead *piece
	shown := 0
	if skip > 0 {
		if lead, asked, err = s.lead(ctx, in.ID, asked, skip, cursor); err != nil {
			return nil, Result{}, err
		}
	}
	if lead != nil {
		// The lead takes its share of the limit, half of it at most: the
		// rest of a longer one is omitted.
		shown = len(lead.data)
		if shown > int(limit/2) {
			shown = cutPoint(lead.data, int(limit/2))
		}
		limit = max(limit-int64(shown), 1)
	}
	// A signal for a command that has ended reaches nothing: the answer
	// says so, or an agent that interrupted would take the result for the
	// interrupt's.
	var before *client.Process // the command as it was before the signal
	if in.Signal != "" {
		if q, err := s.c.Get(ctx, in.ID); err == nil {
			before = q
		}
	}
	endedBefore := before != nil && before.Ended()
	opts := client.InteractOptions{Input: in.Input, EOF: in.EOF, Signal: in.Signal, Cursor: asked,
		Timeout: wait.timeout, IdleTimeout: wait.idle, OutputLimit: limit}
	r, p, err := s.c.Interact(ctx, in.ID, opts)
	if err != nil {
		return nil, Result{}, explain(err)
	}
	if lead != nil {
		r = s.whole(ctx, in.ID, r, wait.limit-int64(len(lead.data)))
	} else {
		r = s.whole(ctx, in.ID, r, wait.limit)
	}
	o := answerOutput(r, asked)
	if lead != nil {
		o = o.withLead(*lead, shown, int(wait.limit))
	}
	if lead != nil || !r.Truncated {
		// Else what came after the cursor was dropped: what follows is
		// no part of the sequence open there.
		o.open = open
	}
	// An ended command's answer names no session: the look before the
	// signal did, or one is made now. A command's session never changes.
	sessionID := ""
	switch {
	case p != nil:
		sessionID = p.SessionID
	case before != nil:
		sessionID = before.SessionID
	default:
		if q, err := s.c.Get(ctx, in.ID); err == nil {
			sessionID = q.SessionID
		}
	}
	out := s.result(ctx, r, o, p, sessionID, wait.limit)
	out.Session = s.names()[sessionID]
	if endedBefore {
		out.Note = fmt.Sprintf("the command had ended before the signal: %s reached nothing", in.Signal)
	}
	if cut {
		out.Note = joinNotes(out.Note, cutNote)
	}
	s.answered(out)
	return textResult(out), out, nil
}

// whole is r, the daemon's answer for the command id, with the bytes it
// left out read back in when all of its output fits in limit: the daemon
// is asked for less than limit (daemonLimit), leaving room for the line
// that says what was omitted, which output that fits needs not. r as it is
// when they cannot all be read (retention dropped some, say).
func (s *Server) whole(ctx context.Context, id string, r *client.RunResult, limit int64) *client.RunResult {
	if r.OmittedBytes <= 0 {
		return r
	}
	total := r.OmittedBytes
	for _, f := range r.Logs {
		b, err := f.Bytes()
		if err != nil {
			return r
		}
		total += int64(len(b))
	}
	if total > limit {
		return r
	}
	var frames []client.LogFrame
	dropped, err := s.c.WholeOutput(ctx, id, r, func(f client.LogFrame) error {
		frames = append(frames, f)
		return nil
	})
	if err != nil || dropped {
		return r
	}
	w := *r
	w.Logs, w.OmittedBytes, w.OmittedAfter, w.HeadFrames = frames, 0, "", 0
	return &w
}

// ignored says which of the run's arguments in that apply to a new session
// only the existing session sess did not take: a shell it does not run is
// named with the one it runs. Empty when there are none.
func ignored(sess named, in RunInput) string {
	var args []string
	other := ""
	if in.Shell != "" {
		switch {
		case sess.language != "":
			other = fmt.Sprintf("it is %s, not a %s shell session", sess.kind(), in.Shell)
		case !sess.runs(in.Shell):
			runs := cmp.Or(sess.shell, "bash")
			if sess.resolved != "" && sess.resolved != runs {
				runs += " (" + sess.resolved + ")"
			}
			other = fmt.Sprintf("it runs %s, not %s (close_session, then run with shell %s, for a %s session)", runs, in.Shell, in.Shell, in.Shell)
		}
		args = append(args, "shell")
	}
	if in.Cwd != "" {
		args = append(args, "cwd")
	}
	if in.Limits != nil {
		args = append(args, "limits")
	}
	if len(args) == 0 {
		return ""
	}
	verb := "applies"
	if len(args) > 1 {
		verb = "apply"
	}
	said := strings.Join(args[:len(args)-1], ", ")
	if said != "" {
		said += " and "
	}
	return joinNotes(said+args[len(args)-1]+" "+verb+" only when a session is created", other)
}

// joinNotes joins two notes of an answer.
func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// lead is the bytes of the frame after cursor from byte skip on, for an
// interact whose cursor (given) is "CURSOR+N", and the daemon's cursor to
// read on from, that frame's. It is checked before anything is sent. With
// that frame gone (retention dropped it) there is no lead: the daemon reads
// after cursor and says that output was dropped.
func (s *Server) lead(ctx context.Context, id, cursor string, skip int, given string) (*piece, string, error) {
	page, err := s.c.Logs(ctx, id, client.LogsOptions{Cursor: cursor, Limit: 1})
	if err != nil {
		return nil, "", explain(err)
	}
	if len(page.Items) == 0 || page.TruncatedHead {
		return nil, cursor, nil
	}
	f := page.Items[0]
	data, err := f.Bytes()
	if err != nil {
		return nil, "", err
	}
	if skip > len(data) {
		return nil, "", fmt.Errorf("cursor %s: the frame after %s holds %d bytes, not %d: give a cursor an answer gave", api.Quote(given), cursor, len(data), skip)
	}
	return &piece{data: data[skip:], before: cursor, off: skip, known: true}, f.Cursor, nil
}

// language checks run's language argument against its shell and returns
// its canonical name (python, javascript), or "" for a shell session.
func language(lang, shell string) (string, error) {
	if lang == "" {
		return "", nil
	}
	if shell != "" {
		return "", errors.New("shell and language together: shell makes a shell session, language a code context with no shell; give only one of them")
	}
	l := api.CanonicalLanguage(lang)
	if l == "" {
		return "", fmt.Errorf("language %s is not known: use python or javascript (node and js mean javascript), or leave it out to run shell commands", api.Quote(lang))
	}
	return l, nil
}

// short is a language's short name, for a session name to suggest.
var short = map[string]string{"python": "py", "javascript": "js"}

// mismatch is the error of a language argument that does not match the
// existing session: a language for a shell session, or another language.
// With no language the session's own kind applies.
func mismatch(name string, sess named, lang string) error {
	if lang == "" || lang == sess.language {
		return nil
	}
	was := ""
	if sess.ended {
		was = " (it has ended, and the next run makes it again as it was; close_session forgets it)"
	}
	return fmt.Errorf("session %q is %s%s, not a %s code context: run %s code in another session (e.g. session %q), or leave language out to use %q as it is",
		name, sess.kind(), was, lang, lang, name+"-"+short[lang], name)
}

// sessionEnded reports whether a session command was refused because the
// session is gone (not_found) or its shell has ended: submitting a command
// is unsupported_operation only then.
func sessionEnded(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && (ce.Code == client.CodeNotFound || ce.Code == client.CodeUnsupportedOperation)
}

// canceled reports whether the command never ran because its session's
// shell ended while it was queued: the daemon fails it with that error.
func canceled(r *client.RunResult) bool {
	return r.Reason == api.Failed && strings.HasSuffix(r.Error, "session ended")
}

// wait is how a run or interact waits and bounds its answer.
type wait struct {
	timeout, idle client.Millis
	limit         int64
}

// waits checks the tools' waits (seconds) and output limit and fills in
// the defaults.
func waits(timeout, idle float64, limit int64) (wait, error) {
	var w wait
	if timeout < 0 || idle < 0 || math.IsNaN(timeout) || math.IsNaN(idle) {
		return w, errors.New("timeout and idleTimeout are seconds and cannot be negative")
	}
	if limit < 0 {
		return w, errors.New("outputLimit is bytes and cannot be negative")
	}
	if limit > MaxOutputLimit {
		return w, fmt.Errorf("outputLimit is at most %d bytes: read the rest with read_output", MaxOutputLimit)
	}
	w.timeout = client.Millis(DefaultTimeout)
	if timeout > 0 {
		w.timeout = client.Millis(seconds(timeout))
	}
	if idle > 0 {
		w.idle = client.Millis(seconds(idle))
	}
	w.limit = DefaultOutputLimit
	if limit > 0 {
		w.limit = limit
	}
	return w, nil
}

// seconds converts a tool's seconds to a duration, at least a millisecond
// (the daemon's unit) and at most a day, as the tools' schemas say.
func seconds(v float64) time.Duration {
	return time.Duration(min(max(v, 0.001), 86400) * float64(time.Second))
}
