package shellsession

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/sentinel"
)

// shellArgs returns the arguments that start sh interactively, reading
// commands from stdin, with no rc or profile file unless login. Its $0 is its
// name, as a terminal starts it: dash, mksh and ksh begin their messages with
// it ("dash: 1: ...", not "/usr/bin/dash: 1: ...").
func shellArgs(sh shells.Shell, login bool) []string {
	args := append([]string{filepath.Base(sh.Path)}, sh.Prefix...)
	switch sh.Family {
	case shells.Bash:
		if login {
			return append(args, "--login", "--noediting", "-i")
		}
		return append(args, "--norc", "--noprofile", "--noediting", "-i")
	case shells.Zsh:
		if login {
			return append(args, "-l", "-i")
		}
		return append(args, "-f", "-i")
	}
	if login {
		args = append(args, "-l")
	}
	args = append(args, "-i")
	if readsInputLink(sh) {
		args = append(args, inputLink)
	}
	return args
}

// inputLink is the name, in the session's directory, of a link to the
// shell's own stdin, which busybox sh is given as its script (see
// readsInputLink).
const inputLink = "sh"

// readsInputLink reports whether sh reads its input through inputLink
// rather than from its stdin. Interactive busybox sh reads stdin with stdio,
// which takes a read interrupted by SIGCHLD (a background job ending while
// the shell waits for input) for the end of its input, and exits; a script
// it reads with a read that retries. Named "sh" and opened from the session's
// directory, the script keeps $0 and the shell's messages as they were.
func readsInputLink(sh shells.Shell) bool { return sh.Family == shells.Busybox }

// linkInput makes inputLink in dir and returns the line that moves the shell,
// started in dir, to cwd, physically as a shell started there sees it, with
// OLDPWD as it was in env. Only from dir: a login profile that moved the
// shell elsewhere keeps it there, as with the shells started in cwd. The
// shell reads the line after its profile, whose aliases and functions it
// knows: the builtins it calls are named quoted, against aliases, and cd,
// which a function can take over too, is called by command, as the frame
// calls builtins (see frameCalls).
func linkInput(dir, cwd string, env []string) (string, error) {
	if err := os.Symlink("/proc/self/fd/0", filepath.Join(dir, inputLink)); err != nil {
		return "", err
	}
	oldpwd := `\unset OLDPWD`
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "OLDPWD="); ok {
			oldpwd = "OLDPWD=" + shQuote(v)
		}
	}
	here := shQuote(dir)
	if phys, err := filepath.EvalSymlinks(dir); err == nil && phys != dir {
		here += "|" + shQuote(phys)
	}
	return "case $PWD in " + here + `) \command \cd -P -- ` + shQuote(cwd) + " && " + oldpwd + ";; esac\n", nil
}

// shellInput returns the two ends of the shell's input: the one it reads
// commands from and the engine's. A shell must not read past the end of a
// line from input a command could read next, so on a pipe zsh, mksh and
// ksh93 read one byte per read call; on a socket ksh93 peeks at what is
// there and reads whole lines, a call or two a line instead of one a byte.
func shellInput(sh shells.Shell) (r, w *os.File, err error) {
	if sh.Family != shells.Ksh {
		return os.Pipe()
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), "shell input"), os.NewFile(uintptr(fds[1]), "shell input"), nil
}

// framesFromFiles reports whether sh is sent short lines that run a
// command's end line, and its frame, from files (see
// sentinel.Paths.FrameFile): zsh and mksh, which read their input one byte
// per read call, on a pipe or a socket alike. zsh's frame stays on its
// line: a function can take "builtin" there, and the frame's "." has no
// fallback (its status is the command's); an eval of the file's text would
// also name the file in the messages of the command it evals.
func framesFromFiles(sh shells.Shell) (frame, end bool) {
	return sh.Family == shells.Mksh, sh.Family == shells.Zsh || sh.Family == shells.Mksh
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// initScript is what a new shell is sent first: no prompts, no history,
// SIGTERM ends it (an interactive shell ignores SIGTERM otherwise, and
// `kill $$` must end the session), and no rc hooks. bash gets execfail: an
// exec that fails (`exec typo`) returns 127 at its prompt, but in a sourced
// file, as each command is, it ends the shell; the other shells end at
// their prompt too. Its words are quoted, and in bash and zsh called
// through builtin: a login shell's profile may have defined aliases, and
// functions, by now.
//
// What the shell needs set, and commands must not get (PS1, PS2, PS3 and
// HISTFILE empty, ENV=/dev/null unless login, see shellEnv), it takes out
// of their environment: unset where the shell does without, else
// unexported; so is what a login profile exported of them, and
// PROMPT_COMMAND, MAIL and MAILPATH. A login shell's ENV, the daemon's or
// its profile's, is its commands'. A login profile may have made any of
// them read-only, as hardened images do (see orReadOnly): bash and zsh
// still unexport it, the other shells leave it to the commands.
//
// Last, on mksh, it closes the shell's own stdout, and its stderr where it
// may (closeOwn, with own the path that reaches the engine's end of them,
// see resident.Host.OwnPath); the frame then writes its markers for the
// engine to what is left open, or by that path (sentinel.Paths.OwnStderr,
// sentinel.Paths.OwnPath).
func initScript(sh shells.Shell, env map[string]string, login bool, own string) string {
	// bash and zsh let a profile's function take any name, the special
	// builtins' too, where the other shells run the builtin: there the
	// calls go through "builtin", as the frame's do (see frameCalls).
	// The trap's text is parsed when the signal comes, after the user's
	// commands: its word is quoted against their aliases too.
	const builtinInit = "__conch=-; \\builtin \\trap '\\builtin \\exit 143' TERM; "
	const common = "__conch=-; \\trap '\\exit 143' TERM; "
	unset := []string{"PROMPT_COMMAND", "MAIL", "MAILPATH"}
	if !login {
		unset = append(unset, "ENV")
	}
	prompts := []string{"PS1=", "PS2=", "PS3="}
	switch sh.Family {
	case shells.Bash:
		unset = append([]string{"HISTFILE", "MAILCHECK", "BASH_ENV"}, unset...)
		// export -n takes even a read-only variable out of the
		// commands' environment; unset then fails on it alone.
		unexport := "\\builtin \\export -n PS1 PS2 PS3 " + strings.Join(unset, " ")
		return builtinInit + orReadOnly(login, append(append(prompts, "PS0=", unexport), prefixEach("\\builtin \\unset ", unset)...)) +
			"\n\\builtin \\set +H +m +o history; \\builtin \\shopt -u checkwinsize; \\builtin \\shopt -s execfail\n" + exportAgain(sh, env) + closeOwn(sh, own)
	case shells.Zsh:
		unset = append([]string{"HISTFILE"}, unset...)
		// So does typeset +x, but it makes a variable that was not set
		// an empty one, which the unset after it takes away.
		unexport := "\\builtin \\typeset +x PS1 PS2 PS3 " + strings.Join(unset, " ")
		return builtinInit + orReadOnly(login, append(append(prompts, "PROMPT=", "RPROMPT=", "PROMPT_EOL_MARK=", unexport), prefixEach("\\builtin \\unset ", unset)...)) +
			"\n\\builtin \\setopt no_hup interactive_comments ignore_close_braces\n\\builtin \\unsetopt zle prompt_cr prompt_sp monitor bang_hist 2>'/dev/null'\n" + exportAgain(sh, env) + closeOwn(sh, own)
	case shells.Ksh, shells.Mksh:
		// HISTFILE stays empty, not unset: ksh93 without one falls back
		// to ~/.sh_history, shared by every session and the user's own
		// shells.
		// typeset is no special builtin in mksh: a profile's function
		// may take it, and "command typeset +x" unexports nothing there.
		// But a function may take "builtin" too: when that fails, the
		// plain call runs, as the frame's print falls back (frameCalls).
		// Each in braces, which no alias can take in mksh, for
		// orReadOnly joins the ops with && and would otherwise run a
		// fallback after an earlier op failed. ksh93 refuses a function
		// named typeset, and its "builtin" adds builtins rather than
		// running one.
		unexport := prefixEach("\\typeset +x ", []string{"PS1", "PS2", "PS3", "HISTFILE"})
		if sh.Family == shells.Mksh {
			for i, op := range unexport {
				unexport[i] = "{ \\builtin " + op + " || " + op + "; }"
			}
		}
		ops := append(append(prompts, "HISTFILE="), unexport...)
		return common + orReadOnly(login, append(ops, prefixEach("\\unset ", unset)...)) + "\n\\set +m 2>/dev/null\n" + exportAgain(sh, env) + closeOwn(sh, own)
	}
	// dash and busybox sh, which have no typeset, keep an exported PS1
	// exported after an unset and a new value: unset, a prompt is as
	// empty.
	// On two lines, as for ksh93 and mksh: a login profile that reads a
	// line or two of the shell's input (see upLine) then takes lines of
	// this script, and the first command's frame still runs to tell the
	// engine so; taken by the profile, the frame would leave the engine
	// waiting for that command to its readiness bound.
	unset = append([]string{"PS1", "PS2", "PS3", "HISTFILE"}, unset...)
	return common + orReadOnly(login, prefixEach("\\unset ", unset)) + "\n\\set +m 2>/dev/null\n" + exportAgain(sh, env) + closeOwn(sh, own)
}

// orReadOnly returns commands that run each of ops, assignments and
// unsets of the shell's variables, skipping those a read-only variable
// makes fail. An interactive shell drops the rest of the line when one
// fails so (dash and busybox sh what they read ahead of it too), which
// would lose the engine's readiness line; neither "command" nor "eval"
// keeps every shell from it. So for a login shell, whose profile may
// have made one of them read-only, a subshell tries them first, all at
// once, then each alone when one failed: one fork as the shell starts,
// and one more an op when a profile did so. A shell that read no profile
// (--norc, -f, ENV=/dev/null) has no read-only variable to meet, and
// forks nothing: at a limit of processes a fork fails, and bash retries
// it for 15 s before the session could start.
func orReadOnly(login bool, ops []string) string {
	if !login {
		return strings.Join(ops, "; ")
	}
	all := strings.Join(ops, " && ")
	var each strings.Builder
	for _, op := range ops {
		each.WriteString("( " + op + " ) 2>/dev/null && " + op + "; ")
	}
	return "if ( " + all + " ) 2>/dev/null; then " + all + "; else " + each.String() + "fi"
}

// prefixEach returns each of names after prefix.
func prefixEach(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = prefix + name
	}
	return out
}

// exportAgain is the line that exports again what the session's env gives
// of the variables the init script unsets, or shellEnv sets to /dev/null:
// BASH_ENV and ENV, which the shell, started, reads no more (bash reads
// BASH_ENV only when not interactive, an interactive sh ENV only as it
// starts, when it was /dev/null), for the commands' own shells (bash -c)
// to read. Empty when env gives neither.
func exportAgain(sh shells.Shell, env map[string]string) string {
	export := `\export`
	if sh.Family == shells.Bash || sh.Family == shells.Zsh {
		export = `\builtin \export` // a login profile's function may take "export"
	}
	var b strings.Builder
	for _, k := range []string{"BASH_ENV", "ENV"} {
		if v, ok := env[k]; ok {
			b.WriteString(export + " " + k + "=" + shQuote(v) + "; ")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\n"
}

// closeOwn is what closes the shell's own stdout and stderr for good, on
// the one shell that can run without them (closesStdout, closesStderr). A
// redirection of a descriptor that is open costs a shell a save before the
// command and a restore after it — bash four fcntl calls, a dup2 and a
// close, then a dup2, a fcntl and a close — and of one that is closed only
// a close after: the command's stdout and stderr, and the end marker,
// which are redirections of the shell's fd 1 and 2, then cost about half
// the system calls of a frame less. Nothing the engine needs is written
// there on a command's way: what a command writes goes to its own
// streams, and the frame's markers go by the path own, which reaches the
// same pipe (sentinel.Paths.OwnPath): stderr is closed only when that path
// opens, and the engine looks which it is once the shell is up (see
// Session.lookOwn).
//
// But a shell that ends runs its EXIT trap, and the trap writes to what
// the shell's fd 1 and 2 are then. bash on an exit by set -e, dash and
// busybox sh on any exit, run it after they undo the redirections of the
// "." that ran the command, with their own descriptors: closed, the trap's
// first write would fail, set -e (still on) would end the trap there, and
// the command would report 1 rather than the status the shell ended with.
// So they keep both open, on the pipe the engine drains, where what such a
// trap writes is lost (bash runs it in place on exit, and its output is
// the command's). mksh runs its EXIT trap with the command's redirections
// in place, exit and set -e alike. ksh93 keeps its descriptors too: it
// moves a descriptor that opens as fd 1 out of the way and back, which
// costs it more than the save. So does zsh: what it saves, it reads back
// as the start marker's longer line, a byte per read call.
func closeOwn(sh shells.Shell, own string) string {
	if !closesStdout(sh) {
		return ""
	}
	// Quoted against a profile's aliases; exec and ":" are special
	// builtins, which mksh runs over a function of their name.
	line := `\exec >&-` + "\n"
	if closesStderr(sh) && own != "" {
		// A redirection that fails skips its command: ":" runs, and
		// stderr is closed, only when own opens.
		line += `\: >` + shQuote(own) + ` && \exec 2>&-` + "\n"
	}
	return line
}

// closesStdout reports whether sh runs with its stdout closed between
// commands (see closeOwn): mksh alone.
func closesStdout(sh shells.Shell) bool {
	return sh.Family == shells.Mksh
}

// closesStderr reports whether sh runs with its stderr closed too between
// commands (see closeOwn): mksh, whose frames write no marker for the
// engine on a command's way, only on the rare one where the end line
// cannot write its own.
func closesStderr(sh shells.Shell) bool {
	return sh.Family == shells.Mksh
}

// shellOwn is what a session's env may not set: the shell's prompts and
// history, which it does without.
var shellOwn = []string{"PS1", "PROMPT_COMMAND", "HISTFILE"}

// shellEnv returns the environment of a new shell: the daemon's, less what
// must not leak into commands, plus env and the tree tag.
func shellEnv(env map[string]string, login bool, tag string) []string {
	// TMOUT: an interactive bash idle for that many seconds logs out,
	// which would end the session between two commands; a hardened
	// login's profile exports it, and the daemon started from such a
	// login passes it on. A session asks for it in env if it wants it.
	drop := []string{"BASH_ENV", "PS1", "PROMPT_COMMAND", "TMOUT", "HISTFILE"}
	if !login {
		drop = append(drop, "ENV")
	}
	var extra []string
	if !login {
		// Interactive dash, mksh, ksh and busybox sh read $ENV (mksh and
		// ksh a default file when it is unset): point it at nothing.
		extra = append(extra, "ENV=/dev/null")
	}
	// ksh93 and mksh open their history file as they start, before the
	// init script runs, and would append the lines the engine sends to
	// the user's ~/.sh_history, a login shell's too (a profile that names
	// a file of its own still gets the init script's line), or to the
	// file env names; an empty name, which they cannot open, keeps no
	// history file at all.
	extra = append(extra, "HISTFILE=")
	// The shell shows no prompt and keeps no history whatever env says:
	// what env gives of these would only reach the commands.
	if slices.ContainsFunc(shellOwn, func(k string) bool { _, ok := env[k]; return ok }) {
		env = maps.Clone(env)
		for _, k := range shellOwn {
			delete(env, k)
		}
	}
	// The daemon's, less CONCH_TOKEN and what env sets, then env: its
	// instance mark is not env's to change, as for an exec process.
	return resident.Env(env, drop, append(extra, tag)...)
}

// frameCalls returns how a frame calls sh's builtins so that no user alias
// or function takes them over (see sentinel.Calls). Special builtins (".",
// exit) cannot be functions in dash, busybox and ksh93, and win over them in
// mksh. bash and zsh let a function take
// any name: there "builtin" reaches the real ".", and printf falls back to
// command when a function took "builtin" (but not when one took both). In
// the rest, printf (mksh's print) falls back from command to a plain call
// (builtin) when a function took "command".
func frameCalls(sh shells.Shell) sentinel.Calls {
	switch sh.Family {
	case shells.Bash, shells.Zsh:
		return builtinCalls
	case shells.Mksh:
		return mkshCalls
	}
	return commandCalls
}

// The calls of frameCalls, made once: a frame is made for every command.
var (
	builtinCalls = sentinel.Calls{Printf: []string{`\builtin \printf`, `\command \printf`}, Source: `\builtin \.`, Exit: `\builtin \exit`, Return: `\builtin \return`, Eval: `\builtin \eval`, SourceElse: `\.`, False: `\builtin \false`}
	// mksh's printf is /usr/bin/printf: print saves two forks a command.
	mkshCalls    = sentinel.Calls{Print: []string{`\builtin \print`, `\command \print`}}
	commandCalls = sentinel.Calls{Printf: []string{`\command \printf`, `\printf`}}
)

// runner returns how a frame runs a command of sh after one that left the
// shell with option letters flags (see sentinel.Run): so that messages read
// as at a terminal, without the command file's path ("zsh: command not
// found: x", "dash: 1: eval: x: not found"), zsh evals the file's text and
// dash the text the frame carries. Not under set -v, whose echo of the
// command's lines an eval would lose (a sourced file's lines are echoed as
// they are read, as typed ones are at a terminal). The other shells source
// the file: in an eval, mksh's LINENO is 1 on every line and busybox's counts
// every line the shell has read since it started; bash names no file anyway,
// and ksh93 would name "eval" with a line number. But bash evals a text
// that it may refuse as it reads it (parsedLater, see checkResult), so that
// a refusal is the eval's status, 2, with a message naming no file, rather
// than a sourced file that never ran.
func runner(sh shells.Shell, flags string, parsedLater bool) sentinel.Run {
	if strings.Contains(flags, "v") {
		return sentinel.RunSource
	}
	switch {
	case sh.Family == shells.Zsh:
		return sentinel.RunFile
	case sh.Family == shells.Dash:
		return sentinel.RunText
	case parsedLater: // bash
		return sentinel.RunFile
	}
	return sentinel.RunSource
}

// interruptedStatus is the status an interrupted command leaves in $?, given
// the one the shell reported: zsh's eval reports the interrupt of a builtin
// loop or function as its error flag, 2, where zsh at a terminal leaves 130.
func interruptedStatus(sh shells.Shell, run sentinel.Run, status int) int {
	if sh.Family == shells.Zsh && run == sentinel.RunFile && status == 2 {
		return 130
	}
	return status
}

// scriptText is the command's text as the shell runs it: text, after
// retrace when traced (see tracesCommand). In the command file it is
// followed by scriptEnd.
func scriptText(text string, traced bool, prev int) string {
	if traced {
		text = retrace + retraceStatus(prev) + text
	}
	return text
}

// scriptEnd is what the command file holds after text: a final newline
// where text has none. Under set -v a shell echoes a sourced file's lines
// as it reads them, with the newline that ends each: without one, the echo
// of the last line ran into the command's first stderr bytes ("ls /xls:
// cannot access") on every shell but bash, which adds its own. And mksh
// numbers the last line one too far in its messages without it ("cmd[2]:
// x: not found" for a one-line command). A text ending in a backslash gets
// none: the newline would join its last line. An eval of the text (see
// runner) echoes nothing and needs none.
func scriptEnd(text string) string {
	if strings.HasSuffix(text, "\n") || strings.HasSuffix(text, `\`) {
		return ""
	}
	return "\n"
}

// zsh traces the commands of a sourced file to a copy of the stderr it had
// before the "."'s redirections, the shell's own, unless tracing is off when
// the "." runs. So when the last command left xtrace on, the frame turns it
// off before the "." (untrace) and the command file turns it back on first
// thing (retrace), on the command's first line so that line numbers hold,
// untraced itself. Not under set -v, which would echo retrace.
const (
	untrace = `__conch_x=${${-//[^x]/}:+xtrace}; \builtin \set +x`
	retrace = `\builtin \set -o ${__conch_x:-noxtrace}; `
)

// guardsInScript reports whether the command file, rather than the frame,
// sets the frame's guard (and $? after it) for sh after a command that left
// the shell with option letters flags (see sentinel.Paths.GuardInScript):
// bash, where a command can disable the builtins the frame calls to run it
// (enable -n builtin, enable -n .) or a function can take "builtin" over. A
// frame whose "." does not run the file then leaves the guard unset, and
// its end line reports the command failed, rather than ended with the
// status of the failed call as if it had run. Not under set -v, which would
// echo the guard's words as the file is read, nor under set -x, which would
// trace them into the command's stderr, nor under set -T, where a DEBUG trap
// would run for them (a terminal runs it for the command's own words only).
// Not zsh, whose DEBUG trap runs for a sourced file's words in any case.
// Not for a text run (run) other than by sourcing it: bash's eval of a text
// it refuses (see runner) would leave the guard unset, and the command
// failed, where its status is the refusal's.
func guardsInScript(sh shells.Shell, flags string, run sentinel.Run) bool {
	return sh.Family == shells.Bash && run == sentinel.RunSource && !strings.ContainsAny(flags, "vxT")
}

// retraceStatus gives $? back the previous command's status, prev, after
// retrace (a builtin, which left it 0). In a subshell whose stderr is
// /dev/null, where its own trace goes: the command's trace shows the
// command's lines only.
func retraceStatus(prev int) string {
	if prev == 0 {
		return ""
	}
	return `(\builtin \exit ` + strconv.Itoa(prev) + `) 2>'/dev/null' && \:; `
}

// tracesCommand reports whether a command after one that left the shell
// with option letters flags needs untrace and retrace.
func tracesCommand(sh shells.Shell, flags string) bool {
	return sh.Family == shells.Zsh && strings.Contains(flags, "x") && !strings.Contains(flags, "v")
}

// reportJobs is what the frame of dash and busybox sh runs before each
// command: they free a finished background job only once they have
// reported it, which without job control (set +m) only jobs does, so every
// job of a long session stayed in the table, numbered on (dash's
// unreaped too), and busybox's kill %1 named a job long finished. Once the
// session started a job ($! set), jobs reports them where nothing reads:
// an open and a few dups a command; before, no system call at all. ${!-}:
// under set -u a plain $! is an error while unset. jobs is no special
// builtin, which a function can take over even quoted: it is called by
// "command", as the frame's printf is (see frameCalls), else a user's
// function named jobs would run in every frame in its place; and, as
// printf does, it falls back to a plain call when a function took
// "command", else finished jobs were never freed.
const reportJobs = `case ${!-} in ?*) \command \jobs >/dev/null || \jobs >/dev/null;; esac`

// reportsJobs says whether sh's frame runs reportJobs; the other shells
// free finished jobs by themselves.
func reportsJobs(sh shells.Shell) bool {
	return sh.Family == shells.Dash || sh.Family == shells.Busybox
}

// upLine is the first thing a shell is sent. A login profile runs before
// the shell reads its first line, on the same input: one that reads it (read
// x, head -1) takes what the engine sent for the shell, the init script that
// makes SIGTERM end it and unsets PROMPT_COMMAND among others, and busybox's
// move to its cwd. Any byte taken from the front breaks this assignment, so
// the first command, upCheck, tells the engine whether the shell got all of
// it.
const upLine = "__conch_up=up; "

// upCheck is the text of a new shell's first command: it prints "up" when
// the shell ran upLine, and unsets it. Its calls are quoted, as the frame's
// are (see frameCalls), against a profile's aliases and functions.
func upCheck(sh shells.Shell) string {
	if sh.Family == shells.Bash || sh.Family == shells.Zsh {
		return `\builtin \echo "${__conch_up-}"; \builtin \unset __conch_up`
	}
	return `\command \echo "${__conch_up-}"; \unset __conch_up`
}

// wentUp reports whether the first command's output, l, says the shell ran
// upLine: a line "up" on stdout, among what a profile's DEBUG or RETURN trap
// may print around it.
func wentUp(l *logstore.Log) bool {
	var out []byte
	for _, f := range l.Page(0, 0).Frames {
		if f.Channel == logstore.Stdout {
			out = append(out, f.Data...)
		}
	}
	return slices.Contains(strings.Split(string(out), "\n"), "up")
}
