package shellsession

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A session with no cwd starts in the directory of the process that made
// it, even once that was removed: busybox, started in the session's own
// directory and moved to that one, failed to start ("getwd: no such file
// or directory"). Every shell then runs commands there, and the session's
// cwd is the path the directory had, though the shells' $PWD is empty
// (dash, mksh, busybox) or "." (zsh).
func TestStartInRemovedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Chdir(dir)
	require.NoError(t, os.Remove(dir))
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			s := newSession(t, Options{Shell: shell})
			r, out, errOut := run(t, s, CommandOptions{Cmd: "readlink /proc/$$/cwd"})
			require.Equal(t, 0, code(r), "stderr %q", errOut)
			require.Equal(t, dir+" (deleted)\n", out)
			require.Equal(t, dir, s.Cwd())
		})
	}
}
