package resident

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewDirLeavesWhatIsThere: the base of NewDir is used only when it is a
// directory of the engine's own; a missing one is made. Anything else at
// its name (a file, a FIFO, a symbolic link to a directory, to a file or to
// nothing) is left as it was, never followed, and a directory made beside
// it serves in its place. A file named there was removed, and a link to a
// directory was followed.
func TestNewDirLeavesWhatIsThere(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, []byte("important data"), 0o644))
	dir := filepath.Join(root, "dir")
	require.NoError(t, os.Mkdir(dir, 0o700))
	links := map[string]string{"to-dir": dir, "to-file": file, "to-nothing": filepath.Join(root, "nothing")}
	for name, to := range links {
		require.NoError(t, os.Symlink(to, filepath.Join(root, name)))
	}
	fifo := filepath.Join(root, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	for _, base := range []string{file, fifo, filepath.Join(root, "to-dir"), filepath.Join(root, "to-file"), filepath.Join(root, "to-nothing")} {
		d, err := NewDir(base, "conch-")
		require.NoError(t, err, "%s", base)
		require.True(t, strings.HasPrefix(d.Path(), base+"-"), "%s made in %s", d.Path(), base)
		requireOwn(t, filepath.Dir(d.Path()))
		requireOwn(t, d.Path())
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "important data", string(b))
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type())
	for name, to := range links {
		got, err := os.Readlink(filepath.Join(root, name))
		require.NoError(t, err, "the link %s was replaced", name)
		require.Equal(t, to, got)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "made where a link points")
	_, err = os.Lstat(filepath.Join(root, "nothing"))
	require.ErrorIs(t, err, os.ErrNotExist, "made where a dangling link points")

	// A missing base is made, and used.
	base := filepath.Join(root, "gone", "base")
	d, err := NewDir(base, "conch-")
	require.NoError(t, err)
	require.Equal(t, base, filepath.Dir(d.Path()))
	requireOwn(t, d.Path())
}

// TestForeignBase: another user's directory at the base's name, made there
// after the engine's base was removed, is never used, nor one that others
// may write: a new base is made beside it under a name no one could make
// in advance, and a session whose directory went with the old base moves
// there, as do new ones. Before, both made their directories in the other
// user's, who could then rename them and put their own command file in
// their place.
func TestForeignBase(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make a directory another user owns")
	}
	for _, how := range []string{"foreign", "wide"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			base := filepath.Join(t.TempDir(), "conch-instance")
			d, err := NewDir(base, "conch-")
			require.NoError(t, err)
			require.Equal(t, base, filepath.Dir(d.Path()))
			path, moved, err := d.Remake()
			require.NoError(t, err)
			require.False(t, moved)
			require.Equal(t, d.Path(), path)

			// Removed (rm -rf /dev/shm/conch-*), and made anew by another
			// user, whose directory anyone may write.
			require.NoError(t, os.RemoveAll(base))
			require.NoError(t, os.Mkdir(base, 0o777))
			require.NoError(t, os.Chmod(base, 0o777))
			if how == "foreign" {
				require.NoError(t, os.Chown(base, 65534, 65534))
			}
			old := d.Path()
			path, moved, err = d.Remake()
			require.NoError(t, err)
			require.True(t, moved)
			require.Equal(t, path, d.Path())
			require.NotEqual(t, base, filepath.Dir(path))
			require.True(t, strings.HasPrefix(path, base+"-"), path)
			requireOwn(t, filepath.Dir(path))
			requireOwn(t, path)
			_, err = os.Lstat(old)
			require.ErrorIs(t, err, os.ErrNotExist, "made in the other user's directory")

			next, err := NewDir(base, "conch-")
			require.NoError(t, err)
			require.Equal(t, filepath.Dir(path), filepath.Dir(next.Path()), "a new directory is made in the other user's")
			entries, err := os.ReadDir(base)
			require.NoError(t, err)
			require.Empty(t, entries)

			// Neither Remove nor RemoveOwn touches what is not the engine's.
			require.NoError(t, os.WriteFile(filepath.Join(base, "theirs"), nil, 0o666))
			require.Error(t, RemoveOwn(base))
			_, err = os.Lstat(filepath.Join(base, "theirs"))
			require.NoError(t, err)
			next.Remove()
			_, err = os.Lstat(next.Path())
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// TestRemakeLink: a symbolic link put in the place of the engine's
// directory, or of its base, is never followed: a link at the directory's
// own name is removed and the directory made anew there; at the base's,
// it stays and a new base is made beside it. Before, the directory was
// made where the base's link pointed.
func TestRemakeLink(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"dir", "base"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			elsewhere := t.TempDir()
			base := filepath.Join(t.TempDir(), "conch-instance")
			d, err := NewDir(base, "conch-")
			require.NoError(t, err)
			old := d.Path()
			if at == "dir" {
				require.NoError(t, os.Remove(old))
				require.NoError(t, os.Symlink(elsewhere, old))
			} else {
				require.NoError(t, os.RemoveAll(base))
				require.NoError(t, os.Symlink(elsewhere, base))
			}
			path, moved, err := d.Remake()
			require.NoError(t, err)
			requireOwn(t, path)
			if at == "dir" {
				require.False(t, moved)
				require.Equal(t, old, path)
			} else {
				require.True(t, moved)
				require.True(t, strings.HasPrefix(path, base+"-"), path)
				got, err := os.Readlink(base)
				require.NoError(t, err, "the link was removed")
				require.Equal(t, elsewhere, got)
			}
			entries, err := os.ReadDir(elsewhere)
			require.NoError(t, err)
			require.Empty(t, entries, "made where the link points")
		})
	}
}

// requireOwn fails unless path is a directory as the engine makes its own.
func requireOwn(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.True(t, ownDir(fi), "%s: %v", path, fi.Mode())
}
