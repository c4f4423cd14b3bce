package localsandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkedSession is a session in base/sbx, which holds c ("INSIDE") and dl,
// a symbolic link to base/outside/deep; base/outside holds c ("OUTSIDE").
func linkedSession(t *testing.T) (s *Session, dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "sbx"), filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "deep"), 0o755))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "c"), []byte("OUTSIDE"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c"), []byte("INSIDE"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "deep"), filepath.Join(dir, "dl")))
	s, err := New(dir)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s, dir, outside
}

// A ".." after a symbolic link goes up from where the link leads, as the
// kernel, and so a command in the session, takes it: the helpers cleaned
// "dl/../c" to c and read and wrote the file beside the link instead.
func TestDotDotAfterASymlinkIsTheKernels(t *testing.T) {
	t.Parallel()
	s, dir, outside := linkedSession(t)
	res, err := s.Run(hangGuard(t), RunOptions{Command: "cat dl/../c"})
	require.NoError(t, err)
	require.Equal(t, "OUTSIDE", res.Stdout, "the command's own view")
	for name, sb := range map[string]Sandbox{"session": s, "restricted": s.Restricted()} {
		text, ok, err := sb.ReadTextFile("dl/../c")
		assert.False(t, err != nil || !ok || text != "OUTSIDE", "%s: ReadTextFile(dl/../c) = %q, %v, %v, want OUTSIDE", name, text, ok, err)
	}
	res, err = s.Run(hangGuard(t), RunOptions{Command: "cat c", WorkingDirectory: "dl/.."})
	require.NoError(t, err)
	assert.Equal(t, "OUTSIDE", res.Stdout, "cat c in WorkingDirectory dl/..")

	require.NoError(t, s.WriteTextFile("dl/../c", "REPLACED"))
	require.NoError(t, s.Restricted().WriteTextFile("dl/../new", "NEW"))
	for path, want := range map[string]string{
		filepath.Join(outside, "c"): "REPLACED", filepath.Join(dir, "c"): "INSIDE",
		filepath.Join(outside, "new"): "NEW",
	} {
		got, err := os.ReadFile(path)
		assert.False(t, err != nil || string(got) != want, "%s: %q, %v, want %q", path, got, err, want)
	}
	_, err = os.Lstat(filepath.Join(dir, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist, "new was made beside the link")
	// No file left from the writes, beside either.
	for d, want := range map[string][]string{outside: {"c", "deep", "new"}, dir: {"c", "dl"}} {
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		assert.Equal(t, want, names, "in %s", d)
	}
}

// A path whose last element is "." or ".." names a directory, as one ending
// in "/" does: WriteFile("newdir/.") made a file newdir, and
// ReadFile("c/.") read the file c, which the kernel refuses (ENOTDIR).
func TestDotNamesADirectory(t *testing.T) {
	t.Parallel()
	s, dir, _ := linkedSession(t)
	for _, path := range []string{"newdir/.", "newdir/..", "c/.", "."} {
		err := s.WriteTextFile(path, "x")
		assert.ErrorIs(t, err, ErrNotRegularFile, "WriteTextFile(%s)", path)
	}
	_, err := os.Lstat(filepath.Join(dir, "newdir"))
	assert.ErrorIs(t, err, os.ErrNotExist, "something was made at newdir")
	got, err := os.ReadFile(filepath.Join(dir, "c"))
	require.NoError(t, err)
	assert.Equal(t, "INSIDE", string(got))

	text, ok, err := s.ReadTextFile("c/.")
	assert.False(t, ok || text != "", "ReadTextFile(c/.) = %q, %v, want nothing", text, ok)
	assert.ErrorIs(t, err, syscall.ENOTDIR, "ReadTextFile(c/.)")
	_, _, err = s.ReadTextFile("dl/..")
	assert.ErrorIs(t, err, ErrNotRegularFile, "ReadTextFile(dl/..)")
}

// A ".." after a name that does not exist fails as the kernel fails it
// (ENOENT): ReadFile("nodir/../c") read c. WriteFile makes the missing
// directory first, as mkdir -p would, and then writes the file.
func TestDotDotAfterAMissingName(t *testing.T) {
	t.Parallel()
	s, dir, _ := linkedSession(t)
	text, ok, err := s.ReadTextFile("nodir/../c")
	assert.False(t, err != nil || ok || text != "", "ReadTextFile(nodir/../c) = %q, %v, %v, want absent", text, ok, err)
	require.NoError(t, s.WriteTextFile("nodir2/../g", "G"))
	fi, err := os.Stat(filepath.Join(dir, "nodir2"))
	require.NoError(t, err, "the missing directory was not made")
	assert.True(t, fi.IsDir())
	got, err := os.ReadFile(filepath.Join(dir, "g"))
	assert.False(t, err != nil || string(got) != "G", "g: %q, %v", got, err)
}
