package procfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// ReadFile reads what os.ReadFile reads, into the buffer it is given and
// past its capacity (a process's maps run to kilobytes).
func TestReadFile(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stat", "environ", "cmdline", "maps"} {
		path := "/proc/self/" + name
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		got, err := ReadFile(path, make([]byte, 0, 16))
		require.NoError(t, err)
		if name == "stat" || name == "maps" { // they change with the process
			require.NotEmpty(t, got, name)
			continue
		}
		require.Equal(t, want, got, name)
	}
	b, err := ReadFile("/proc/self/comm", []byte("before "))
	require.NoError(t, err)
	require.Regexp(t, `^before \S+\n$`, string(b), "appended")
	_, err = ReadFile("/proc/self/no-such-file", nil)
	require.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

func TestReadDir(t *testing.T) {
	t.Parallel()
	names, err := ReadDir("/proc/self/task")
	require.NoError(t, err)
	require.Contains(t, names, strconv.Itoa(os.Getpid()), "the main thread")
	require.NotContains(t, names, ".")
	require.NotContains(t, names, "..")
	all, err := ReadDir("/proc")
	require.NoError(t, err)
	want, err := os.ReadDir("/proc")
	require.NoError(t, err)
	require.Greater(t, len(all), len(want)/2, "the entries of /proc")
	_, err = ReadDir("/proc/self/no-such-dir")
	require.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

func TestReadlink(t *testing.T) {
	t.Parallel()
	want, err := os.Readlink("/proc/self/exe")
	require.NoError(t, err)
	got, err := Readlink("/proc/self/exe")
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// Cwd gives the path of this process's directory, even once it was removed.
func TestCwd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Chdir(dir)
	got, removed, err := Cwd()
	require.NoError(t, err)
	require.Equal(t, dir, got)
	require.False(t, removed)

	require.NoError(t, os.Remove(dir))
	_, err = os.Getwd()
	require.Error(t, err, "getwd fails in a removed directory")
	got, removed, err = Cwd()
	require.NoError(t, err)
	require.Equal(t, dir, got)
	require.True(t, removed)
}
