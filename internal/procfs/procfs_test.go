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

// A command name may hold spaces and parentheses; fields count from the last ')'.
func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "42 (a b) (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n"
	s, ok := ParseStat(42, []byte(line))
	require.True(t, ok, "ParseStat refused a well-formed line")
	require.Equal(t, Stat{PID: 42, PPID: 7, PGID: 42, SID: 42, State: 'S', Flags: 4194560, Start: 12345}, s)
	for _, bad := range []string{"", "42 (x", "42 (x) S 1 2 3"} {
		_, ok := ParseStat(42, []byte(bad))
		require.False(t, ok, "ParseStat(%q) accepted it", bad)
	}
}

// TasksOf counts the threads of this user's processes, this one's among
// them, and none for a uid no process has.
func TestTasksOf(t *testing.T) {
	t.Parallel()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	own := statusField(status, "Threads:")
	require.Len(t, own, 1)
	threads, err := strconv.Atoi(string(own[0]))
	require.NoError(t, err)
	n, err := TasksOf(os.Getuid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, threads)
	n, err = TasksOf(1<<31 - 2)
	require.NoError(t, err)
	require.Zero(t, n)
}
