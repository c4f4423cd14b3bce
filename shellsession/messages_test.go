package shellsession

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotFoundMessage pins how a command that is not found reads on each
// shell: begun with the shell's own name, as a terminal's shell begins it
// (not the path it was started by), with the right line number, and exit
// status 127. bash, zsh and dash name no file of the engine's: zsh reads
// exactly as at a terminal, dash says "eval" where a terminal says nothing.
// mksh, ksh93 and busybox name the file the engine sources the command from
// (an eval would cost mksh and busybox their LINENO, and give ksh93 "eval"
// with a line number).
func TestNotFoundMessage(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"bash":    `^bash: nosuchcmd_xyz: command not found\n$`,
		"dash":    `^dash: 1: eval: nosuchcmd_xyz: not found\n$`,
		"zsh":     `^zsh: command not found: nosuchcmd_xyz\n$`,
		"mksh":    `^E: mksh: /\S+/cmd\[1\]: nosuchcmd_xyz: inaccessible or not found\n$`,
		"ksh":     `^ksh: \.: /\S+/cmd\[1\]: nosuchcmd_xyz: not found\n$`,
		"busybox": `^sh: /\S+/cmd: line 1: nosuchcmd_xyz: not found\n$`,
	}
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, stdout, stderr := run(t, s, CommandOptions{Cmd: "nosuchcmd_xyz"})
			require.Equal(t, 127, code(res), "%+v", res)
			require.Empty(t, stdout)
			require.Regexp(t, regexp.MustCompile(want[shell]), stderr)
		})
	}
}

// TestLineNumbers: a multi-line command sees its own line numbers in LINENO
// (dash, interactive, keeps LINENO empty) and in the messages of shells that
// give one, and no message names a file of the engine's on the shells that
// name none (see TestNotFoundMessage).
func TestLineNumbers(t *testing.T) {
	t.Parallel()
	// The message of a program not found in a function f the command
	// defines on line 3 and calls on line 6.
	want := map[string]string{
		"bash":    `^bash: nosuch_in_f: command not found\n$`,
		"dash":    `^dash: 4: eval: nosuch_in_f: not found\n$`,
		"zsh":     `^f:1: command not found: nosuch_in_f\n$`,
		"mksh":    `^E: mksh: /\S+/cmd\[6\]: nosuch_in_f: inaccessible or not found\n$`,
		"ksh":     `^ksh: \.: /\S+/cmd\[6\]: f\[4\]: nosuch_in_f: not found\n$`,
		"busybox": `^sh: /\S+/cmd: line 4: nosuch_in_f: not found\n$`,
	}
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Cwd: t.TempDir()})
			res, stdout, stderr := run(t, s, CommandOptions{Cmd: "echo one\necho $LINENO\nf() {\n  nosuch_in_f\n}\nf\necho $LINENO"})
			require.Equal(t, 0, code(res), "%+v", res)
			lines := "one\n2\n7\n"
			if shell == "dash" {
				lines = "one\n\n\n"
			}
			require.Equal(t, lines, stdout)
			require.Regexp(t, regexp.MustCompile(want[shell]), stderr)
			if shell == "bash" || shell == "zsh" || shell == "dash" {
				require.NotContains(t, stderr, "/cmd", "the message names the engine's command file")
			}
		})
	}
}
