package resident

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeTempDirKeepsWhatIsThere: the base of MakeTempDir is the
// caller's: a missing one is made, a directory or a link to one is used,
// and anything else is refused and left as it was. A file named there was
// removed and a directory put in its place; a link was replaced too.
func TestMakeTempDirKeepsWhatIsThere(t *testing.T) {
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

	for _, base := range []string{file, fifo, filepath.Join(root, "to-file"), filepath.Join(root, "to-nothing")} {
		_, err := MakeTempDir(base, "conch-")
		require.ErrorIs(t, err, syscall.ENOTDIR, "%s", base)
		require.Contains(t, err.Error(), base)
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
	_, err = os.Lstat(filepath.Join(root, "nothing"))
	require.ErrorIs(t, err, os.ErrNotExist, "made where a dangling link points")

	// A link to a directory is followed; a missing base is made.
	made, err := MakeTempDir(filepath.Join(root, "to-dir"), "conch-")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, filepath.Base(made)))
	require.NoError(t, err)
	made, err = MakeTempDir(filepath.Join(root, "gone", "base"), "conch-")
	require.NoError(t, err)
	fi, err = os.Stat(made)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
}
