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

// TestCwdRenamedOrSetBack: a command that leaves $PWD as the last one
// reported it, but renames the directory the shell is in, or changes
// directory and sets PWD back, reports the shell's own directory, on every
// shell: the look at the directory was made only when $PWD changed. And
// the directory reported is $PWD, symbolic links and all, whenever it names
// the shell's, also one whose name ends as the kernel marks a removed one
// (the shell's /proc cwd link, which confirms $PWD in one call, reads so
// for it) and one through a link, repeated or not.
func TestCwdRenamedOrSetBack(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			base, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			dir := filepath.Join(base, "d")
			s := newSession(t, Options{Shell: shell})
			r, _, _ := run(t, s, CommandOptions{Cmd: "mkdir " + dir + " && cd " + dir})
			require.Equal(t, dir, r.Cwd)
			r, _, _ = run(t, s, CommandOptions{Cmd: `mv "$PWD" ` + dir + "2"})
			require.Equal(t, dir+"2", r.Cwd, "renamed")
			r, _, _ = run(t, s, CommandOptions{Cmd: "cd " + base + "; PWD=" + dir + "2"})
			require.Equal(t, base, r.Cwd, "PWD set back")
			require.Equal(t, base, s.Cwd())

			odd := filepath.Join(base, "d (deleted)")
			r, _, _ = run(t, s, CommandOptions{Cmd: "mkdir " + shQuote(odd) + " && cd " + shQuote(odd)})
			require.Equal(t, odd, r.Cwd, "a live directory so named")
			r, _, _ = run(t, s, CommandOptions{Cmd: "true"})
			require.Equal(t, odd, r.Cwd, "again")
			link := filepath.Join(base, "l")
			r, _, _ = run(t, s, CommandOptions{Cmd: "ln -s " + shQuote(odd) + " " + link + " && cd " + link})
			require.Equal(t, link, r.Cwd, "through a link")
			r, _, _ = run(t, s, CommandOptions{Cmd: "true"})
			require.Equal(t, link, r.Cwd, "through a link, again")
			r, _, _ = run(t, s, CommandOptions{Cmd: "cd " + shQuote(odd) + " && rmdir " + shQuote(odd)})
			require.Equal(t, odd, r.Cwd, "removed: as $PWD names it")
		})
	}
}
