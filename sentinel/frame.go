package sentinel

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"unsafe"
)

// MarkerLead is the first byte of every marker: a control character that text
// output rarely contains, so that scanning seldom has to hold bytes back.
const MarkerLead = '\x1e'

// Nonce is the random part of a command's markers.
type Nonce string

// NewNonce returns a fresh random nonce.
func NewNonce() Nonce {
	var b [12]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand documents it)
	return Nonce(hex.EncodeToString(b[:]))
}

// Marker returns the bytes that open an end marker: MarkerLead, "CONCH", nonce.
func (n Nonce) Marker() []byte { return []byte("\x1eCONCH" + string(n)) }

// Paths are the files a framed command's streams are redirected to.
type Paths struct {
	Stdin  string // "" means /dev/null: the command reads end-of-file
	Stdout string
	Stderr string
	// Script is the file holding the command's text, which the shell sources.
	Script string
	// Announce makes the frame write its start marker (Frame.Start) to the
	// shell's own stdout before it runs the command.
	Announce bool
	// OwnStderr makes the frame write the markers meant for the engine
	// (Frame.Start, Frame.Failed) to the shell's own stderr rather than its
	// stdout, for a shell that runs with its stdout closed.
	OwnStderr bool
	// OwnPath, when set, makes the frame write those markers to this path
	// instead — the engine's end of the shell's own output, opened anew
	// for each marker — for a shell that runs with its stdout and stderr
	// both closed; with OwnStderr too, a marker that cannot be written
	// there goes to the shell's stderr, for a shell that may have either.
	OwnPath string
	// OwnElse, when set and OwnPath is not, is a path to the same end as
	// OwnPath's, by which the shell's own stream is put back when a marker
	// cannot be written to it (see ownRepair): a shell that lost its stdout
	// and stderr (ksh93 closes both when an interrupt lands as it restores
	// the redirections of the command it ran). It costs nothing otherwise.
	OwnElse string
	// Calls says how the frame calls the shell's builtins; the zero value
	// suits a POSIX shell where special builtins cannot be functions.
	Calls Calls
	// Before is shell text run just before the command, ahead of restoring
	// its $?: zsh turns tracing off there, so that the "." is not traced
	// into the command's stderr, and the command file turns it back on.
	Before string
	// Run is how the command is run; the zero value sources Script.
	Run Run
	// GuardInScript leaves the assignment of the frame's guard, and the
	// restoring of $? after it, to the command's script, which the caller
	// starts with Frame.AppendHead: the guard then holds the nonce only if
	// the shell ran the script, and an end line after a "." or eval that
	// could not run it (a builtin the frame calls was disabled, as bash's
	// enable -n does) finds it unset. For RunSource and RunFile only.
	GuardInScript bool
	// Text is the command's text, for RunText: the frame carries it itself
	// and Script is not read.
	Text string
	// StatusFile, when set, is a file the caller writes with the frame's
	// StatusText before it sends it. After a command whose status was
	// neither 0 nor 1, the frame then gives $? that status by sourcing
	// the file, which returns it, rather than by a subshell that exits
	// with it: no fork, so that a command still runs in a session at its
	// pids limit (a fork that fails there drops the rest of the frame's
	// line, the command with it). With GuardInScript, the file sets the
	// guard too, and the script has no head (see Frame.AppendHead): a
	// "." of the file inside the script would run bash's RETURN trap
	// with the command's redirections, into its output, where one run
	// from the frame's line writes to the shell's own.
	StatusFile string
	// FrameFile and EndFile, when set, make the lines the shell is sent
	// short: they source the frame's text and the end line's from these
	// files, which the caller writes (Frame.FrameText, Frame.EndText)
	// before it sends them. A shell that reads its input one byte per read
	// call (zsh, mksh, on a pipe) then reads a few dozen bytes a command
	// rather than a kilobyte. EndFile must name a file of this command
	// alone: an end line sent twice may run late, when the next command's
	// is written. The frame's file is sourced with Calls.Source alone, so
	// only for a shell whose "." no function can take over (mksh): its
	// status is the command's, and no fallback could tell that it failed.
	FrameFile, EndFile string
	// EndInText puts an end line on Text's second line, for a shell that
	// keeps what it read ahead when a command aborts (bash), sent the
	// frame and its end line in one write. That end line is the first
	// the shell can run for the nonce — nothing it reads can come between
	// the two lines — so it spares the guarded look, which cost bash
	// about a sixth of its CPU a command, for a cheaper one (the path it
	// writes its marker by exists only while the guard holds the nonce;
	// see unguardedTarget), and then resets the guard: End, for sending
	// again, still looks. A command that changed the guard, or whose frame
	// could not set it, gets the Failed marker. Ignored with FrameFile or
	// EndFile.
	EndInText bool
}

// Run is how a frame runs the command, always in the shell itself, so that
// every change the command makes to the shell stays. Most shells name a
// sourced file in their messages ("dash: 1: /dev/shm/.../cmd: x: not
// found"), which a terminal does not show; an eval of the text at the
// shell's top level names none, or only "eval".
type Run int

const (
	// RunSource sources Script: `. Script`.
	RunSource Run = iota
	// RunFile evals Script's text read with $(<Script), which zsh, mksh,
	// ksh93 and bash do with no fork.
	RunFile
	// RunText evals Paths.Text, carried on the frame's own line, for
	// shells that cannot read a file into a word without a fork (dash,
	// busybox sh). Eval is a special builtin there: no function can take
	// it over.
	RunText
)

// Calls are the words a frame calls builtins by. A user can define a
// function or an alias by almost any name, the frame's own included, so each
// word is quoted (no alias applies to a quoted word) and is one that no
// function can take over in the shell at hand; where the shell has none
// (bash and zsh let a function take any name), two ways are tried in turn.
type Calls struct {
	// Printf is one or two words that run the printf builtin, tried in
	// turn until one succeeds; nil means `\command \printf`.
	Printf []string
	// Print, when set, is used instead of Printf: words that run ksh's
	// print builtin (mksh's printf is no builtin: each call would fork).
	Print []string
	// Source sources a file in the current shell; "" means `\.`.
	Source string
	// Return returns from a sourced file with a status; "" means
	// `\return`.
	Return string
	// Exit ends a subshell with a status; "" means `\exit`.
	Exit string
	// Eval runs its arguments as shell text; "" means `\eval`.
	Eval string
	// SourceElse, when set, is tried when Source fails to source an end
	// file (whose status is 0 once it runs): `\.` where a function can take
	// "builtin".
	SourceElse string
	// False returns status 1 with no fork; "" means a negated assignment
	// (`! __conch_s=1`), which no function can take over but which bash
	// and zsh let an alias named "!" take over (they expand aliases of
	// reserved words): there, `\builtin false`.
	False string
}

// writeOwn returns the calls that write a marker meant for the engine (see
// Calls.write) where p says.
func (p Paths) writeOwn(lit string, vars []string, nul bool) string {
	if p.OwnPath == "" {
		redir := ""
		if p.OwnStderr {
			redir = " >&2"
		}
		w := p.Calls.write(lit, vars, nul, redir)
		if p.OwnElse != "" {
			w += " || " + p.ownRepair(lit, vars, nul)
		}
		return w
	}
	w := p.Calls.write(lit, vars, nul, " >"+quote(p.OwnPath))
	if p.OwnStderr {
		w += " || " + p.Calls.write(lit, vars, nul, " >&2")
	}
	return w
}

// ownRepair returns the words tried when a marker cannot be written to the
// shell's own stream (see Paths.OwnElse): where no function can take exec
// over (Calls.Exit is the default), they put that stream back for good, by
// OwnElse, and this one marker is lost; a shell that kept its stream lost
// would hold what it could not write and write it later, into a command's
// output (ksh93's buffered printf). Elsewhere (bash, zsh) they write the
// marker by that path.
func (p Paths) ownRepair(lit string, vars []string, nul bool) string {
	switch {
	case p.Calls.Exit != "":
		return p.Calls.write(lit, vars, nul, " >"+quote(p.OwnElse))
	case p.OwnStderr:
		return `\exec 2>` + quote(p.OwnElse)
	}
	return `\exec >` + quote(p.OwnElse) + " 2>&1"
}

// pwd is the working directory as the end line reports it.
const pwd = "${PWD-}"

// write returns the calls that write lit (printf escapes), then the values
// of the expansions vars separated by blanks, then a NUL if nul, with redir;
// one call for each way c has to write, joined by || so that each is tried
// in turn.
func (c Calls) write(lit string, vars []string, nul bool, redir string) string {
	var args string
	if len(c.Print) > 0 {
		args = "-n -- '" + lit + "'"
		if len(vars) > 0 {
			vs := make([]string, len(vars))
			for i, v := range vars {
				// print interprets backslashes: double those of
				// values that may have some.
				vs[i] = v
				if v == pwd {
					vs[i] = `${PWD//\\/\\\\}`
				}
			}
			args += `"` + strings.Join(vs, " ") + `"`
		}
		if nul {
			args += `'\000'`
		}
	} else {
		f, vs := lit, ""
		for i, v := range vars {
			if i > 0 {
				f += " "
			}
			f += "%s"
			vs += ` "` + v + `"`
		}
		if nul {
			f += `\000`
		}
		args = "'" + f + "'" + vs
	}
	words := c.Print
	if len(words) == 0 {
		words = c.Printf
	}
	if len(words) == 0 {
		words = []string{`\command \printf`}
	}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteString(" || ")
		}
		b.WriteString(w + " " + args + redir)
	}
	return b.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Frame is one command framed for the shell.
type Frame struct {
	Nonce Nonce
	// Text is what the shell is sent first. With Paths.Announce it begins by
	// writing Start to the shell's own stdout (stderr with OwnStderr, or
	// Paths.OwnPath), which tells the engine that
	// the shell has read the whole line and runs it.
	Text string
	// Start is the start marker: MarkerLead, "S", nonce. Start and Failed
	// are read only: a Template's frame keeps them in the memory its
	// strings are views of.
	Start []byte
	// Failed is the marker End writes to the shell's own stdout (stderr with
	// OwnStderr, or Paths.OwnPath), followed by
	// the exit status and a NUL, when it cannot open the command's streams
	// (the command ran out of file descriptors, say): MarkerLead, "F", nonce.
	Failed []byte
	// End is the line that writes the end marker. A shell that reads its
	// input in blocks drops what it read ahead when a command aborts (an
	// error under set -u, an interrupt), so for such a shell End is sent
	// only once it has announced the command; a shell that keeps what it
	// read ahead (bash, mksh), or reads none ahead (zsh, a byte per read
	// call), can get it with Text, or in it (Paths.EndInText). Sending it
	// again is harmless: it writes the marker only once per nonce.
	End string
	// EndInText says that Text ends with an end line (Paths.EndInText):
	// End is for sending again only.
	EndInText bool
	// Run is how the frame runs the command (Paths.Run).
	Run Run
	// FrameText and EndText are what the caller writes to Paths.FrameFile
	// and Paths.EndFile, when they are set, before it sends Text and End.
	FrameText, EndText string
	// StatusText is what the caller writes to Paths.StatusFile before it
	// sends the frame, when the frame sources it; "" otherwise.
	StatusText string

	restore  string // what AppendHead gives $? by (Paths.GuardInScript)
	headless bool   // the status file sets the guard: AppendHead adds nothing
}

// The frame's variables: guardVar holds the nonce of the command whose end
// line may still write its markers (Text sets it, End resets it to "-");
// statusVar the exit status End reports; sinkVar, for a moment, /dev/null
// when End runs for a command that is not the current one.
const (
	guardVar  = "__conch"
	statusVar = "__conch_s"
	sinkVar   = "__conch_m"
)

// New frames the command whose text the caller has written to p.Script — a
// complete program the shell can parse (see the shellsession package's
// syntax check) — to run after a command that exited with prevStatus, so that
// $? is what the user expects. Sourcing a file, rather than sending the text,
// ends any text at its end (no shell waits for more input), and keeps an
// interactive bash from announcing background jobs or printing "exit", as it
// would for text typed at its prompt.
func New(prevStatus int, p Paths) Frame { return build(NewNonce(), prevStatus, p) }

// build is New with nonce n.
func build(n Nonce, prevStatus int, p Paths) Frame {
	var b strings.Builder
	if p.Announce {
		b.WriteString(p.writeOwn(`\036S`+string(n), nil, false) + "; ")
	}
	inScript := p.GuardInScript && p.Run != RunText
	if !inScript {
		b.WriteString(guardVar + "=" + string(n) + "; ")
	}
	if p.Before != "" {
		b.WriteString(p.Before + "; ")
	}
	// $? as the previous command left it: in the script, after the
	// guard's assignment, which sets it to 0; or by the status file, which
	// then assigns the guard itself.
	restore, statusText := restoreStatus(prevStatus, p.Calls), ""
	if p.StatusFile != "" && prevStatus != 0 && prevStatus != 1 {
		// The return is on the left of && in the file too: dash and
		// busybox sh, under set -e, end on a "." whose file returns a
		// status other than 0, whatever stands after the ".", unless
		// the return itself is exempt.
		restore = orDefault(p.Calls.Source, `\.`) + " " + quote(p.StatusFile) + ` && \:; `
		statusText = orDefault(p.Calls.Return, `\return`) + " " + strconv.Itoa(prevStatus) + " && \\:\n"
		if inScript {
			statusText = guardVar + "=" + string(n) + "; " + statusText
		}
		b.WriteString(restore)
		restore = ""
	} else if !inScript {
		b.WriteString(restore)
		restore = ""
	}
	// The redirections are on the "." (or eval) itself: its trace under
	// set -x goes to the shell's own stderr, and the command's permanent
	// redirections (exec >file) end with it.
	switch p.Run {
	case RunFile:
		b.WriteString(orDefault(p.Calls.Eval, `\eval`) + ` "$(<` + quote(p.Script) + `)" <`)
	case RunText:
		b.WriteString(orDefault(p.Calls.Eval, `\eval`) + " " + quote(p.Text) + " <")
	default:
		b.WriteString(orDefault(p.Calls.Source, `\.`) + " " + quote(p.Script) + " <")
	}
	if p.Stdin == "" {
		// Quoted: zsh expands a global alias (alias -g) of any word.
		b.WriteString("'/dev/null'")
	} else {
		b.WriteString(quote(p.Stdin))
	}
	b.WriteString(" >" + quote(p.Stdout) + " 2>" + quote(p.Stderr) + "\n")
	inText := p.EndInText && p.FrameFile == "" && p.EndFile == ""
	if inText {
		b.WriteString(endLine(n, p, false))
	}
	f := Frame{
		Nonce: n, Text: b.String(), End: EndLine(n, p), Run: p.Run, EndInText: inText, restore: restore,
		StatusText: statusText, headless: inScript && statusText != "",
		Start: []byte("\x1eS" + string(n)), Failed: []byte("\x1eF" + string(n)),
	}
	source := orDefault(p.Calls.Source, `\.`)
	if p.FrameFile != "" {
		f.FrameText, f.Text = f.Text, source+" "+quote(p.FrameFile)+"\n"
	}
	if p.EndFile != "" {
		f.EndText = strings.TrimPrefix(f.End, statusLead)
		f.End = statusLead + source + " " + quote(p.EndFile)
		if p.Calls.SourceElse != "" {
			f.End += " || " + p.Calls.SourceElse + " " + quote(p.EndFile)
		}
		f.End += "\n"
	}
	return f
}

// AppendHead appends to b what a script framed with Paths.GuardInScript
// starts with, on its first line: the words that set the frame's guard to
// its nonce, then those that give $? the previous command's status; none
// when the frame's status file does both (see Paths.StatusFile).
func (f Frame) AppendHead(b []byte) []byte {
	if f.headless {
		return b
	}
	b = append(append(append(b, guardVar+"="...), f.Nonce...), "; "...)
	return append(b, f.restore...)
}

// restoreStatus returns the words that leave $? as status, with no
// command a user could redefine when it is 1 (a negated assignment, or
// Calls.False); "&& \:" keeps set -e from firing, and is quoted so that no
// alias named ":" can change how the line parses (the ":" never runs).
func restoreStatus(status int, c Calls) string {
	switch status {
	case 0:
		return ""
	case 1:
		if c.False != "" {
			return c.False + ` && \:; `
		}
		return "! " + statusVar + "=1; "
	}
	return "(" + orDefault(c.Exit, `\exit`) + " " + strconv.Itoa(status) + `) && \:; `
}

// statusLead begins every end line: it keeps the command's exit status
// before anything else can change $?, between underscores, so that the
// engine can tell a status whole from what is left of it when a command
// changed how the variable reads (see ParseStatus): zsh, mksh and ksh93 cut
// a value to a width (typeset -L1, -R1, -Z2) or write an integer in a base
// (typeset -i 16), and an integer attribute or a ksh93 discipline function
// makes the value something else (an integer evaluates "_127_" as a
// variable's name). The underscores have no case to change, and are no
// glob or expansion.
const statusLead = statusVar + "=_$?_; "

// EndLine returns the line that writes the end marker of the command with
// nonce n on its stdout, with the exit status, the shell's option letters
// and the working directory — or, when it cannot be written, the Failed
// marker with the status on the shell's own stdout (or stderr, or a path:
// see Paths.OwnStderr and Paths.OwnPath) — then resets the guard. The command's stderr gets no
// marker: the shell closed it before this line runs, having written all of
// the command's stderr, so a reader that drains it once the stdout marker
// has come has all of it; one marker more would cost the shell an open, a
// write and a close of the stream, and the parse of both ways to write it,
// for every command. Run for a command other than the one whose nonce the guard holds
// (it was sent twice), it writes to /dev/null. It uses only assignments,
// expansions, redirections, && and || (no reserved word: bash and zsh expand
// an alias named `case`) and the builtins named by p.Calls, so that user
// functions, aliases, set -e, set -u and set -x cannot break it (traces go
// to the shell's own stderr, which is not the command's).
func EndLine(n Nonce, p Paths) string { return endLine(n, p, true) }

// endLine is EndLine, which looks at the guard when guarded; unguarded, it
// writes its marker by a path that exists only while the guard holds the
// nonce, then resets it (Paths.EndInText).
func endLine(n Nonce, p Paths, guarded bool) string {
	// Unguarded: the marker goes to the command's stdout by a path that
	// exists only while the guard holds the nonce, and the guard is
	// reset.
	look, target, reset := "", unguardedTarget(n, p.Stdout), guardVar+"=-"
	if guarded {
		// The marker goes to /dev/null when the guard holds another
		// nonce, and the guard stays; the target is unquoted, so that
		// quote's quotes work: a redirection's target is not split into
		// fields, and quoted text is not globbed.
		look = sinkVar + "=${" + guardVar + "-}; " +
			sinkVar + "=${" + sinkVar + "#" + string(n) + "}; " +
			sinkVar + "=${" + sinkVar + ":+/dev/null}; "
		target = "${" + sinkVar + ":-" + quote(p.Stdout) + "}"
		reset = guardVar + "=${" + sinkVar + ":+$" + guardVar + "}; " + guardVar + "=${" + guardVar + ":--}"
	}
	return statusLead + look +
		p.Calls.write(`\036CONCH`+string(n), []string{"$" + statusVar, "$-", pwd}, true, " >"+target) + " || " +
		p.writeOwn(`\036F`+string(n), []string{"$" + statusVar}, true) +
		"; " + reset + "\n"
}

// unguardedTarget is where an unguarded end line writes its marker: the
// command's stdout, reached through its directory's entry "." followed by
// what is left of the guard once the nonce is taken off its front. That is
// nothing when the guard holds the nonce, as the frame's text set it: the
// path is DIR/./NAME. When it does not, the path goes through a directory
// that the engine never makes (DIR/.0, DIR/.-), the marker cannot be
// written, and the Failed marker goes to the shell's own stream instead.
// So a frame whose assignment of the guard failed (a command made the
// variable read-only, or an integer, in an earlier command), and whose
// command therefore never ran, is reported failed rather than ended with
// the failed assignment's status and no output; so is a command that
// assigns the guard itself, as on the shells whose end line looks at it.
// The expansion is quoted: a guard holding a glob or blanks cannot reach
// another path. "##" rather than "#": for a pattern with no wildcard the
// two take off the same, and bash's "#" tries every length of prefix in
// turn (1.6 µs an expansion here, against 0.8).
func unguardedTarget(n Nonce, stdout string) string {
	i := strings.LastIndexByte(stdout, '/')
	if i < 0 {
		return quote(stdout) // no directory to hang the look on (never so in a session)
	}
	return quote(stdout[:i]+"/.") + `"${` + guardVar + "##" + string(n) + `}"` + quote(stdout[i:])
}

// quote single-quotes s for the shell, whatever it holds: zsh expands a
// global alias (alias -g) of any unquoted word wherever it stands, a plain
// path included, and an eval of an unquoted word would run a text that
// happens to be one word, such as a glob, after expanding it.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// A Template is the frame New makes for one set of Paths and previous
// status, built once with a stand-in for the nonce: each Frame of it puts a
// fresh nonce in, in one allocation, where New builds the whole text anew.
// A session keeps one for each set of streams it uses in turn.
type Template struct {
	f    Frame
	uses int // stand-ins in f.Text and f.End
}

// standIn takes a nonce's place in a Template: as long as a nonce, and made
// of a byte that no path, call word or shell text of a frame can hold.
var standIn = strings.Repeat("\x00", len(NewNonce()))

// Templated reports whether p can be framed from a Template: it names no
// file of the command's own (EndFile) and does not carry the command's text.
func Templated(p Paths) bool {
	return p.Run != RunText && p.FrameFile == "" && p.EndFile == ""
}

// NewTemplate builds the Template of p after prevStatus; p must be
// Templated.
func NewTemplate(prevStatus int, p Paths) Template {
	f := build(Nonce(standIn), prevStatus, p)
	return Template{f, strings.Count(f.Text, standIn) + strings.Count(f.End, standIn)}
}

// Frame returns the template's frame with a fresh nonce: what New returns.
func (t Template) Frame() Frame {
	var raw [12]byte
	rand.Read(raw[:]) // never fails on Linux (crypto/rand documents it)
	var n [2 * len(raw)]byte
	hex.Encode(n[:], raw[:])
	return t.with(n[:])
}

// with returns the template's frame with the nonce n. The nonce, both texts
// and the markers share one allocation, written once and never again: the
// strings are views of it.
func (t Template) with(n []byte) Frame {
	f := t.f
	b := make([]byte, 0, len(n)+len(f.Text)+len(f.End)+t.uses*(len(n)-len(standIn))+2*(2+len(n)))
	view := func(from int) string { return unsafe.String(unsafe.SliceData(b[from:]), len(b)-from) }
	b = append(b, n...)
	f.Nonce = Nonce(view(0))
	at := len(b)
	b = appendNonced(b, f.Text, n)
	f.Text = view(at)
	at = len(b)
	b = appendNonced(b, f.End, n)
	f.End = view(at)
	at = len(b)
	b = append(append(b, "\x1eS"...), n...)
	f.Start = b[at:len(b):len(b)]
	at = len(b)
	b = append(append(b, "\x1eF"...), n...)
	f.Failed = b[at:len(b):len(b)]
	return f
}

// appendNonced appends s to b with n in place of each stand-in.
func appendNonced(b []byte, s string, n []byte) []byte {
	for {
		i := strings.Index(s, standIn)
		if i < 0 {
			return append(b, s...)
		}
		b = append(append(b, s[:i]...), n...)
		s = s[i+len(standIn):]
	}
}
