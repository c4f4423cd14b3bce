package shellsession

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotFoundMessage pins how a command that is not found reads on each
// shell: begun with the shell's own name, as a terminal's shell begins it
// (not the path it was started by), with the right line number, and exit
// status 127. All but bash name the file the engine sources the command
// from (dash, zsh, mksh, ksh and busybox name a sourced file in every
// message, and none can be told otherwise).
func TestNotFoundMessage(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"bash":    `^bash: nosuchcmd_xyz: command not found\n$`,
		"dash":    `^dash: 1: /\S+/cmd: nosuchcmd_xyz: not found\n$`,
		"zsh":     `^/\S+/cmd:1: command not found: nosuchcmd_xyz\n$`,
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
