package shellsession

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCwdPastPathMax: in a directory whose path is longer than PATH_MAX,
// where neither a stat of $PWD nor a readlink of /proc/PID/cwd can be
// made, the reported cwd is still $PWD only when the shell is there, and
// otherwise the shell's own directory: a command that sets PWD=/etc, or
// cuts $PWD mid-name (as ksh93 itself does past 4,096 bytes), does not make it
// the cwd. The tree is made and removed with relative steps, none of
// which names the whole path. dash, mksh and busybox refuse to cd that
// deep (File name too long): they never get there.
func TestCwdPastPathMax(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "ksh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			testCwdPastPathMax(t, shell)
		})
	}
}

func testCwdPastPathMax(t *testing.T, shell string) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	name := strings.Repeat("d", 99)
	const depth = 50 // 5,000 bytes below base
	deep := base + strings.Repeat("/"+name, depth)
	s := newSession(t, Options{Shell: shell, Cwd: base})
	// rm -rf from the top, which goes down step by step (as does the
	// os.RemoveAll of t.TempDir), while the session still runs.
	defer run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + " && rm -rf " + name + " l"})

	steps := "for i in $(seq 50); do mkdir " + name + " && cd " + name + " || exit 1; done"
	r, _, errOut := run(t, s, CommandOptions{Cmd: steps})
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, deep, r.Cwd, "down the tree (ksh93 cuts its $PWD)")

	r, _, _ = run(t, s, CommandOptions{Cmd: "PWD=/etc"})
	require.Equal(t, deep, r.Cwd, "PWD=/etc")
	r, _, _ = run(t, s, CommandOptions{Cmd: "cd ..; PWD=/etc"})
	// ksh93 takes cd .. from the $PWD it cut: where it goes is its own,
	// and the cwd reported must be it.
	require.True(t, isShellsDirectory(t, s, r.Cwd), "cd .. and PWD=/etc: %s", r.Cwd)
	if shell == "ksh" {
		return
	}
	require.Equal(t, strings.TrimSuffix(deep, "/"+name), r.Cwd, "cd .. and PWD=/etc")
	r, _, _ = run(t, s, CommandOptions{Cmd: "cd " + name + "; PWD=$(printf %.4096s \"$PWD\")"})
	require.Equal(t, deep, r.Cwd, "$PWD cut mid-name")

	// A $PWD through a symbolic link that names the shell's directory is
	// the cwd, links and all (bash itself makes $PWD the physical path
	// past PATH_MAX: the command sets it).
	link := filepath.Join(base, "l")
	viaLink := link + strings.Repeat("/"+name, depth-1)
	r, _, errOut = run(t, s, CommandOptions{Cmd: "ln -s " + name + " " + shQuote(link) + " && PWD=" + shQuote(viaLink)})
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, viaLink, r.Cwd, "through a link")
}

// isShellsDirectory reports whether the directory at path, looked at one
// name at a time, is the one s's shell is in.
func isShellsDirectory(t *testing.T, s *Session, path string) bool {
	var there unix.Stat_t
	require.NoError(t, unix.Stat("/proc/"+strconv.Itoa(s.cmd.Process.Pid)+"/cwd", &there))
	at, err := statByNames(path)
	return err == nil && sameFile(&at, &there)
}

// TestCwdPastBound: a command in a directory whose path is longer than
// the engine reports (sentinel.MaxCwd; a command can make it as long as it
// likes) still reports its exit status, with no cwd and an error saying
// why, as does one that sets PWD there, whose directory is named by
// walking up from it, or one refused for its syntax; a cd back to a
// shorter path has the cwd reported again.
func TestCwdPastBound(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "ksh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			testCwdPastBound(t, shell)
		})
	}
}

func testCwdPastBound(t *testing.T, shell string) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	name := strings.Repeat("d", 250)
	steps := sentinel.MaxCwd/251 + 20 // 5,020 bytes past the bound below base
	s := newSession(t, Options{Shell: shell, Cwd: base})
	defer run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + " && rm -rf " + name})

	r, _, errOut := run(t, s, CommandOptions{Cmd: "for i in $(seq " + strconv.Itoa(steps) + "); do mkdir " + name + " && cd " + name + " || exit 1; done; (exit 7)"})
	require.Equal(t, 7, code(r), "%s %q, stderr %q", r.Reason, r.Error, errOut)
	require.Zero(t, len(r.Cwd), "bytes of cwd")
	require.Equal(t, sentinel.CwdTooLong, r.Error)
	require.Zero(t, len(s.Cwd()), "bytes of the session's cwd")

	r, _, _ = run(t, s, CommandOptions{Cmd: "PWD=/etc; (exit 3)"})
	require.Equal(t, 3, code(r), "%s %q", r.Reason, r.Error)
	require.Zero(t, len(r.Cwd), "PWD=/etc: bytes of cwd")
	require.Equal(t, sentinel.CwdTooLong, r.Error, "PWD=/etc")

	// A command that ends with no end line of its own (a syntax error,
	// refused before it reaches the shell) says so too.
	r, _, errOut = run(t, s, CommandOptions{Cmd: "if then"})
	require.Equal(t, 2, code(r), "%s %q, stderr %q", r.Reason, r.Error, errOut)
	require.Zero(t, len(r.Cwd), "a syntax error: bytes of cwd")
	require.Equal(t, sentinel.CwdTooLong, r.Error, "a syntax error")

	r, _, _ = run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + "; (exit 5)"})
	require.Equal(t, 5, code(r), "%s %q", r.Reason, r.Error)
	require.Equal(t, base, r.Cwd)
	require.Empty(t, r.Error)
	require.Equal(t, base, s.Cwd())
}
