package shellsession

import (
	"context"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestStatusVariableTampered: a command that changes how the end line's
// status variable ($__conch_s) reads — its width or justification, an
// integer attribute or base, a ksh93 discipline function — leaves every
// later command ended failed at once, saying why, with its output and no
// byte of the end marker in it; never reported with a wrong status (a
// width of 1 made 127 read as 1, and the next command's $? 1), nor with
// the marker, nonce and all, in its stdout and ended by the watchdog (an
// integer base made the status read 16#2A). unset repairs the session: the
// command that runs it ends with its own status again.
func TestStatusVariableTampered(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"bash": {"declare -i __conch_s"},
		"zsh":  {"typeset -L1 __conch_s", "typeset -R1 __conch_s", "typeset -Z2 __conch_s", "typeset -i __conch_s", "typeset -i 16 __conch_s"},
		"mksh": {"typeset -L1 __conch_s", "typeset -R1 __conch_s", "typeset -Z2 __conch_s", "typeset -i __conch_s", "typeset -i 16 __conch_s"},
		"ksh": {"typeset -L1 __conch_s", "typeset -R1 __conch_s", "typeset -Z2 __conch_s", "typeset -i __conch_s", "typeset -i 2 __conch_s",
			"function __conch_s.set { .sh.value=0; }"},
	}
	for shell, tampers := range cases {
		for _, tamper := range tampers {
			t.Run(shell+"/"+tamper, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
				run(t, s, CommandOptions{Cmd: tamper})
				for _, cmd := range []string{"echo hi; nosuchcmd 2>/dev/null", "echo hi; (exit 42)"} {
					res, stdout, _ := run(t, s, CommandOptions{Cmd: cmd})
					require.Equal(t, process.Failed, res.Reason, "%q: %+v, stdout %q", cmd, res, stdout)
					require.Contains(t, res.Error, "__conch_s")
					require.Equal(t, "hi\n", stdout)
				}
				repair := "unset __conch_s"
				if shell == "ksh" && tamper[0] == 'f' {
					repair = "unset -f __conch_s.set"
				}
				res, _, _ := run(t, s, CommandOptions{Cmd: repair + "; (exit 42)"})
				require.Equal(t, 42, code(res), "%+v", res)
				expectRun(t, s, `echo "after $?"`, 0, "after 42\n")
			})
		}
	}
}

// TestStatusVariableWidened pins what a width wider than any status does
// (typeset -L8 __conch_s): each status still reads whole, padded with
// blanks that take the place of the shell's option letters in the end
// marker; later commands report their own statuses.
func TestStatusVariableWidened(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"zsh", "mksh", "ksh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			run(t, s, CommandOptions{Cmd: "typeset -L8 __conch_s"})
			res, _, _ := run(t, s, CommandOptions{Cmd: "nosuchcmd 2>/dev/null"})
			require.Equal(t, 127, code(res), "%+v", res)
			expectRun(t, s, `echo "after $?"; (exit 42)`, 42, "after 127\n")
		})
	}
}

// TestEngineVariableNamerefs pins what a name reference on an engine's
// variable does (bash's declare -n, typeset -n in ksh93 and mksh): the
// engine's lines assign the variable it names, at every command, and
// conch cannot tell. Named by $__conch_s, it holds the status as the end
// line keeps it; by $__conch_m (ksh93, mksh: bash's end line has none) it
// is emptied; by $__conch (bash), it holds the running command's nonce,
// and the command that made the reference ends failed, its frame's guard
// gone. Each later command still runs and reports its own status.
func TestEngineVariableNamerefs(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "mksh", "ksh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			run(t, s, CommandOptions{Cmd: "mine=kept; typeset -n __conch_s=mine; (exit 3)"})
			expectRun(t, s, `echo "$mine $?"; (exit 4)`, 4, "_3_ 3\n")
			if shell != "bash" {
				run(t, s, CommandOptions{Cmd: "unset -n __conch_s; m=kept; typeset -n __conch_m=m"})
				expectRun(t, s, `echo "[$m]"; (exit 4)`, 4, "[]\n")
				return
			}
			run(t, s, CommandOptions{Cmd: "unset -n __conch_s"})
			res, _, _ := run(t, s, CommandOptions{Cmd: "g=kept; declare -n __conch=g"})
			require.Equal(t, process.Failed, res.Reason, "%+v", res)
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			c, res, err := s.Run(ctx, CommandOptions{Cmd: `echo "$g"; (exit 4)`})
			require.NoError(t, err)
			require.Equal(t, 4, code(res), "%+v", res)
			out, _ := output(c)
			require.Equal(t, string(c.frame.Nonce)+"\n", out)
		})
	}
}

// TestSetT pins what set -t (exit after one more command) does in bash and
// ksh93: the engine's end line is that one more command, so the shell
// exits right after the command that ran set -t, which reports its own
// status, and the session ends: no later command runs. (dash, zsh, mksh
// and busybox sh refuse the option in an interactive shell.)
func TestSetT(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "ksh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			res, stdout, _ := run(t, s, CommandOptions{Cmd: "set -t; echo set"})
			require.Equal(t, 0, code(res), "%+v", res)
			require.Equal(t, "set\n", stdout)
			requireEnds(t, s, "set -t")
			_, err := s.Submit(CommandOptions{Cmd: "echo never"})
			require.ErrorIs(t, err, ErrSessionEnded)
		})
	}
}
