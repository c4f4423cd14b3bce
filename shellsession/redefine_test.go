package shellsession

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// redefinable are names the engine's own lines could depend on and a user can
// define as a function or an alias in some shell.
var redefinable = []string{"command", "builtin", "printf", "echo", "cd", "pwd", "trap", "exec",
	"return", ".", "source", "false", "exit", "eval", "set", ":", "case", "esac"}

var mkshSpecial = map[string]bool{".": true, ":": true, "eval": true, "exec": true, "exit": true, "return": true, "set": true, "trap": true}

// TestRedefinedNames defines each name as a function and as an alias, then
// checks that the session still reports later commands exactly — output,
// exit code, $?, cwd — and that the user's definition is still in place.
func TestRedefinedNames(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, name := range redefinable {
			for _, kind := range []string{"function", "alias"} {
				t.Run(fmt.Sprintf("%s/%s/%s", shell, kind, name), func(t *testing.T) {
					t.Parallel()
					checkRedefined(t, shell, name, kind)
				})
			}
		}
	}
}

func checkRedefined(t *testing.T, shell, name, kind string) {
	dir := t.TempDir()
	s := newSession(t, Options{Shell: shell, Cwd: dir})
	// Each definition makes the name exit 1 without recursing into itself
	// (zsh loops on an alias that expands to its own name at the end of a
	// file, as the sourced command's text ends).
	def := name + "() { return 1; }"
	if name == "return" {
		def = name + "() { (exit 1); }"
	}
	if kind == "alias" {
		def = "alias '" + name + "=(exit 1)'"
		if name == "exit" {
			def = "alias exit='return 1'"
		}
	}
	res, _, defErr := run(t, s, CommandOptions{Cmd: def})
	require.Equal(t, process.Exited, res.Reason, "definition: %+v %q", res, defErr)
	defined := code(res) == 0

	res, stdout, stderr := run(t, s, CommandOptions{Cmd: "sh -c 'echo out; echo err >&2; exit 3'"})
	if kind == "function" && name == "builtin" && (shell == "bash" || shell == "zsh") {
		// Pinned: bash and zsh let a function take any name, and the
		// frame runs the command with `builtin .` (`builtin eval`), so a
		// function named builtin runs instead of every later command.
		// printf falls back to `command printf`: the session still
		// reports each command, on bash as failed (the command file
		// that sets the guard did not run), on zsh with the function's
		// status.
		if shell == "bash" {
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
		} else {
			require.Equal(t, 1, code(res), "%+v", res)
		}
		require.Empty(t, stdout+stderr)
		return
	}
	require.Equal(t, process.Exited, res.Reason, "%+v", res)
	require.Equal(t, 3, code(res))
	require.Equal(t, "out\n", stdout)
	require.Equal(t, "err\n", stderr)

	res, stdout, _ = run(t, s, CommandOptions{Cmd: `sh -c 'echo "$1"' x "$?"`})
	require.Equal(t, process.Exited, res.Reason, "%+v", res)
	require.Equal(t, "3\n", stdout, "$? after a command that exited 3")

	sub := filepath.Join(dir, "sub")
	cd := "mkdir sub && cd sub"
	if name == "cd" && (shell == "bash" || shell == "zsh") {
		cd = "mkdir sub && builtin cd sub"
	} else if name == "cd" {
		cd = "mkdir sub && command cd sub"
	}
	res, _, stderr = run(t, s, CommandOptions{Cmd: cd})
	require.Equal(t, process.Exited, res.Reason, "%+v", res)
	require.Equal(t, 0, code(res), "cd: %q", stderr)
	require.Equal(t, sub, s.Cwd())

	// The user's definition is still there: the name now runs it. (An
	// alias named case or esac is a reserved word to most shells, and in
	// mksh a special builtin wins over a function of its name.)
	if defined && name != "case" && name != "esac" && !(shell == "mksh" && kind == "function" && mkshSpecial[name]) {
		res, stdout, stderr = run(t, s, CommandOptions{Cmd: name})
		require.Equal(t, process.Exited, res.Reason, "%+v", res)
		require.Equal(t, 1, code(res), "%s after its definition: stdout %q stderr %q", name, stdout, stderr)
		require.Empty(t, stdout+stderr)
	}
}

// TestBashDebugTrapSkipsEverything pins what bash does under extdebug with a
// DEBUG trap that fails: it skips every simple command, the engine's own
// lines too (no word can escape it), as it skips every command typed at a
// terminal. The session does not hang: each command ends failed.
func TestBashDebugTrapSkipsEverything(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	for _, cmd := range []string{"shopt -s extdebug; trap false DEBUG", "echo hi"} {
		res, stdout, _ := run(t, s, CommandOptions{Cmd: cmd})
		require.Equal(t, process.Failed, res.Reason, "%q: %+v", cmd, res)
		require.Empty(t, stdout)
	}
}

// TestNoopWriterFunction pins the one definition the frame cannot survive:
// a function that takes over the first word it writes its markers with and
// succeeds without running its arguments. Every later command goes
// unreported and ends failed (the shell is back at its prompt), rather than
// hanging the session.
func TestNoopWriterFunction(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			name := "command"
			if shell == "bash" || shell == "zsh" || shell == "mksh" {
				name = "builtin"
			}
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			for _, cmd := range []string{name + "() { :; }", "true"} {
				res, _, _ := run(t, s, CommandOptions{Cmd: cmd})
				require.Equal(t, process.Failed, res.Reason, "%q: %+v", cmd, res)
			}
		})
	}
}

// TestCommandAssignsGuard pins what becomes of a command that assigns the
// frame's guard variable ($__conch, which holds its nonce while it runs):
// its end line, which writes its marker only while the guard holds its
// nonce, writes none, and the command ends failed — with its status on
// bash, whose end line gives its marker up for the Failed one, and once
// the shell is back at its prompt on the others. The next command runs.
func TestCommandAssignsGuard(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, stdout, _ := run(t, s, CommandOptions{Cmd: "__conch=x; echo hi; (exit 3)"})
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			require.Equal(t, "hi\n", stdout)
			if shell == "bash" {
				require.Equal(t, 3, code(res), "%+v", res)
				require.Contains(t, res.Error, "$__conch")
			}
			expectRun(t, s, "echo next", 0, "next\n")
		})
	}
}

// TestReadOnlyGuard: a command that makes the frame's guard read-only, or
// an integer, where the frame's assignment of a nonce then fails, leaves a
// session whose later commands end failed, saying why — never ended with
// the failed assignment's status and no output, as if they had run (bash
// drops the rest of a line whose assignment failed, the command with it).
func TestReadOnlyGuard(t *testing.T) {
	t.Parallel()
	breaks := []string{"readonly __conch"}
	for _, shell := range testShells {
		cases := breaks
		if shell != "dash" && shell != "busybox" {
			cases = append(cases, "typeset -i __conch")
		}
		for _, brk := range cases {
			t.Run(shell+"/"+brk, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
				run(t, s, CommandOptions{Cmd: brk})
				for range 2 {
					res, stdout, _ := run(t, s, CommandOptions{Cmd: "echo hi; (exit 3)"})
					require.Equal(t, process.Failed, res.Reason, "%+v, stdout %q", res, stdout)
					require.NotEmpty(t, res.Error)
				}
			})
		}
	}
}

// TestAliasesBreakingTheFrame: aliases whose text would change how the
// engine's lines parse — ":" and "!" (bash and zsh expand aliases of
// reserved words) made the start of an if, a zsh global alias of
// /dev/null made a pipe — change nothing of what later commands report,
// after each exit status the frame restores in its own way (0, 1, 3). Before
// the frame quoted them, each left the commands after a failure unreported,
// or hung them (dash, busybox). zsh expands a global alias of any word,
// not only of a command's name: the builtins' names after "\builtin" and
// the paths of the command's streams are quoted too. Before, a global alias
// of eval ran no later command yet reported each exited 1, of false or exit
// gave the next command a wrong $?, of printf failed every command, and of
// the stdout's path lost the output.
func TestAliasesBreakingTheFrame(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		defs := []string{`alias ':=if'`, `alias '!=if'`}
		if shell == "zsh" {
			defs = append(defs, `alias -g '/dev/null=|'`, `alias -g eval=false`, `alias -g false=true`,
				`alias -g exit=true`, `alias -g printf=false`, `alias -g "$(readlink /proc/$$/fd/1)=/dev/null"`)
		}
		for _, def := range defs {
			t.Run(shell+"/"+def, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
				// A shell that refuses the name ("!" in some) leaves
				// nothing to check, but must not break either.
				run(t, s, CommandOptions{Cmd: def + " 2>/dev/null"})
				for _, status := range []int{3, 1, 0} {
					// Quoted: the alias of exit takes the command's own word.
					res, _, _ := run(t, s, CommandOptions{Cmd: fmt.Sprintf("sh -c 'exit %d'", status)})
					require.Equal(t, status, code(res), "%+v", res)
					expectRun(t, s, `echo "after $?"`, 0, fmt.Sprintf("after %d\n", status))
				}
			})
		}
	}
}

// TestSetNoexec pins what `set -n` does to a session. dash, mksh and
// busybox sh honour it even when interactive and run nothing more, the
// engine's lines included: every later command ends failed once the shell is
// back at its prompt, naming set -n among the causes, and the session has to
// be deleted. bash and ksh93 ignore it in an interactive shell; zsh refuses
// it.
func TestSetNoexec(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			set, _, stderr := run(t, s, CommandOptions{Cmd: "set -n"})
			after, stdout, _ := run(t, s, CommandOptions{Cmd: "echo after"})
			switch shell {
			case "dash", "mksh", "busybox":
				require.Equal(t, process.Failed, set.Reason, "%+v", set)
				require.Equal(t, process.Failed, after.Reason, "%+v", after)
				require.Contains(t, after.Error, "set -n")
				require.Empty(t, stdout)
				return
			case "zsh":
				require.Equal(t, 1, code(set), "%+v", set)
				require.Contains(t, stderr, "can't change option")
			default:
				require.Equal(t, 0, code(set), "%+v", set)
			}
			require.Equal(t, 0, code(after), "%+v", after)
			require.Equal(t, "after\n", stdout)
		})
	}
}

// TestClosingTheShellsOwnDescriptors pins what becomes of a command that
// closes the descriptors a shell keeps its own stdin, stdout and stderr in
// while it sources the command, to restore them after (the lowest free from
// 10 up): bash's 10, 11 and 12, busybox's 11, 12 and 13 (its 10 is its
// input). bash cannot restore them and ends after the command, and with it
// the session; busybox loops on the error it cannot report, until the
// command's execution timeout ends the session. dash, zsh, mksh and ksh93
// take one digit only in a redirection: `exec 10>&-` runs a program named
// 10, which ends the session as any failed exec does.
func TestClosingTheShellsOwnDescriptors(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		fds := []string{"11"}
		switch shell {
		case "bash":
			fds = []string{"10", "11", "12"}
		case "busybox":
			fds = []string{"12", "13"}
		}
		for _, fd := range fds {
			t.Run(shell+"/"+fd, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell, StopGrace: 200 * time.Millisecond})
				c, err := s.Submit(CommandOptions{Cmd: "exec " + fd + ">&-", ExecutionTimeout: time.Second})
				require.NoError(t, err)
				r := wait(t, c)
				requireEnds(t, s, fmt.Sprintf("%+v", r))
				switch shell {
				case "busybox":
					require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
				case "bash":
					require.Equal(t, process.Exited, r.Reason, "%+v", r)
				default:
					require.Equal(t, 127, code(r), "%+v", r)
				}
			})
		}
	}
}

// TestClosingTheShellsInput: ksh93's {var} redirection reaches past one
// digit, and a command that closes the descriptor ksh93 reads its input
// from (its socket, at 10) leaves it looping on the read's error for ever,
// a CPU busy, deaf to interrupts. The watchdog's look finds the input
// closed: the command fails, saying so, and the session ends.
func TestClosingTheShellsInput(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "ksh", StopGrace: 200 * time.Millisecond})
	r, _, _ := run(t, s, CommandOptions{Cmd: `fd=10; exec {fd}>&-; echo hello`})
	require.Equal(t, process.Failed, r.Reason, "%+v", r)
	require.Contains(t, r.Error, "closed its own input")
	requireEnds(t, s, "the shell closed its input")
}

// TestReplacingBusyboxsSavedStdout pins what busybox sh does when a command
// opens a file on the descriptor it keeps its own stdout in while it
// sources the command (12): it restores its stdout from there, so the
// shell's own stdout, where the frame writes its start markers, is the file
// from then on. Later commands still end with their exact output and
// status, each once the watchdog's look finds the shell at its prompt (about
// a second) rather than at its marker; the markers go to the file.
func TestReplacingBusyboxsSavedStdout(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "busybox"})
	file := filepath.Join(t.TempDir(), "own")
	expectRun(t, s, "exec 12>"+file+"; echo a", 0, "a\n")
	for range 2 {
		res, stdout, stderr := run(t, s, CommandOptions{Cmd: "echo b; echo c >&2; (exit 3)"})
		require.Equal(t, 3, code(res), "%+v", res)
		require.Equal(t, "b\n", stdout)
		require.Equal(t, "c\n", stderr)
	}
	own, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NotEmpty(t, own, "the shell's own stdout did not go to the file")
}

// TestDisabledBuiltins: a command that disables a builtin bash's frame
// runs commands with (enable -n) leaves a session whose later commands end
// failed, saying why, rather than ended with the status of the frame's
// failed call (127, 1) and no output, as if they had run. Pinned for zsh
// (disable), where the command file cannot set the guard (see
// guardsInScript): after disable builtin or disable eval every later
// command ends with the failed call's status without running; after
// disable . (its end line is sourced) every command runs but ends failed,
// the one that ran it too.
func TestDisabledBuiltins(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"bash": {"enable -n builtin", "enable -n ."},
		"zsh":  {"disable builtin", "disable eval", "disable ."},
	}
	for shell, breaks := range cases {
		for _, brk := range breaks {
			t.Run(shell+"/"+brk, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
				res, stdout, _ := run(t, s, CommandOptions{Cmd: brk + "; echo off"})
				require.Equal(t, "off\n", stdout)
				if brk == "disable ." {
					require.Equal(t, process.Failed, res.Reason, "%+v", res)
				} else {
					require.Equal(t, 0, code(res), "%+v", res)
				}
				for range 2 {
					res, stdout, stderr := run(t, s, CommandOptions{Cmd: "echo hi; (exit 3)"})
					switch brk {
					case "disable builtin", "disable eval":
						require.Equal(t, process.Exited, res.Reason, "%+v", res)
						require.NotEqual(t, 3, code(res), "%+v", res)
						require.Empty(t, stdout, "stderr %q", stderr)
					case "disable .":
						require.Equal(t, process.Failed, res.Reason, "%+v", res)
						require.Equal(t, "hi\n", stdout)
					default:
						require.Equal(t, process.Failed, res.Reason, "%+v, stdout %q", res, stdout)
						require.Empty(t, stdout)
						require.Contains(t, res.Error, "disable")
					}
				}
			})
		}
	}
}

// TestBashReturnTrap pins what a RETURN trap does in bash: bash runs it
// whenever a sourced file is done, and the frame sources each command's
// file, so the trap's output ends every command's output, where a terminal
// shows it after functions (under set -T) and sourced scripts only.
func TestBashReturnTrap(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	expectRun(t, s, "trap 'echo ret' RETURN; echo set", 0, "set\nret\n")
	expectRun(t, s, "echo x; (exit 3)", 3, "x\nret\n")
	expectRun(t, s, "trap - RETURN; echo y", 0, "y\n")
}

// TestBashDebugTrapUnderFunctrace: under set -T bash runs a DEBUG trap for
// the commands of a sourced file too; the command's output has the trap's
// output for the command's own commands only, as at a terminal, and not for
// the words the engine puts in the command file.
func TestBashDebugTrapUnderFunctrace(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	expectRun(t, s, "set -T; trap 'echo dbg' DEBUG; echo a", 0, "dbg\na\n")
	for range 2 {
		expectRun(t, s, "echo b; (exit 3)", 3, "dbg\nb\ndbg\n")
	}
}

// TestRestrictedMode pins what restricted mode, which a command can turn on
// but never off, does to a session: it forbids the frame's redirections,
// so that bash and ksh93 can run no later command, and each ends failed,
// saying so; zsh exits as the next command is sent, ending the session.
func TestRestrictedMode(t *testing.T) {
	t.Parallel()
	for shell, on := range map[string]string{"bash": "set -r", "ksh": "set -o restricted", "zsh": "setopt restricted"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, _, _ := run(t, s, CommandOptions{Cmd: on})
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			c, err := s.Submit(CommandOptions{Cmd: "echo hi; (exit 3)"})
			require.NoError(t, err)
			res = wait(t, c)
			if shell == "zsh" {
				requireEnds(t, s, fmt.Sprintf("%+v", res))
				return
			}
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			require.Contains(t, res.Error, "restricted")
		})
	}
}

// TestReadingTheShellsInput pins what becomes of a command that reads the
// descriptor its shell reads commands from while it sources the command:
// bash's and ksh93's 10, busybox's 11 (dash, zsh and mksh take one digit
// only in a redirection). The read takes the engine's end line, which the
// shell was sent with the command or once it announced it: the command ends
// failed, found by the watchdog's look, and on ksh93 and busybox what it
// read — the end line's text — is in its output; the next command runs as
// any other there, while on bash it ends failed too (its frame finds the
// state the lost line would have reset) and the one after it runs.
func TestReadingTheShellsInput(t *testing.T) {
	t.Parallel()
	for shell, fd := range map[string]string{"bash": "10", "ksh": "10", "busybox": "11"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, stdout, _ := run(t, s, CommandOptions{Cmd: `read -r x <&` + fd + `; echo "got=$x"`})
			require.Equal(t, process.Failed, res.Reason, "%+v, stdout %q", res, stdout)
			if shell != "bash" {
				require.True(t, strings.HasPrefix(stdout, "got=__conch_s=_$?_; "), "stdout %q", stdout)
			} else {
				res, _, _ = run(t, s, CommandOptions{Cmd: "echo lost"})
				require.Equal(t, process.Failed, res.Reason, "%+v", res)
			}
			expectRun(t, s, "echo after; (exit 3)", 3, "after\n")
		})
	}
}

// TestPromptHookReadingInput pins what a prompt hook that reads its stdin
// does to a session: the hook runs at the shell's prompt, where its stdin
// is the shell's own input, and takes a line the engine sent. zsh runs
// precmd after the command's frame and before its end line, which the hook
// takes: every later command runs but ends failed after about a second,
// until one removes the hook (its own end line then runs). bash runs
// PROMPT_COMMAND before every line it reads, the end line and the next
// command's frame alike: every later command ends failed, having run or
// not as the hook took its end line or its frame, and the session has to
// be deleted.
func TestPromptHookReadingInput(t *testing.T) {
	t.Parallel()
	for shell, hook := range map[string]string{"bash": "PROMPT_COMMAND='read -r x'", "zsh": "precmd() { read -r x; }"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, stdout, _ := run(t, s, CommandOptions{Cmd: hook + "; echo set"})
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			require.Equal(t, "set\n", stdout)
			for range 2 {
				res, stdout, _ := run(t, s, CommandOptions{Cmd: "echo hi; (exit 3)"})
				require.Equal(t, process.Failed, res.Reason, "%+v", res)
				if shell == "zsh" {
					require.Equal(t, "hi\n", stdout)
				}
			}
			if shell == "zsh" {
				expectRun(t, s, "unfunction precmd; echo off", 0, "off\n")
				expectRun(t, s, "echo after; (exit 3)", 3, "after\n")
			}
		})
	}
}
