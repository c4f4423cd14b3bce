package shellsession

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readCalls returns how many read calls the process pid has made (syscr in
// /proc/PID/io).
func readCalls(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no syscr in /proc/%d/io: %q", pid, b)
	return 0
}

// TestFrameReadCalls: the shell reads a command's frame and end line in
// fewer read calls than half their bytes, not one per byte. A shell must not
// read past a line's end from input a command could read next, so zsh, mksh
// and ksh93 read a pipe one byte a call: a frame and end line of a kilobyte
// cost them a thousand calls. Only builtins run, so every read is the
// shell's own.
func TestFrameReadCalls(t *testing.T) {
	t.Parallel()
	const cmds = 20
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			run(t, s, CommandOptions{Cmd: "true"})
			pid := s.Info().PID
			before := readCalls(t, pid)
			var c *Command
			for range cmds {
				var err error
				c, err = s.Submit(CommandOptions{Cmd: "true"})
				require.NoError(t, err)
				require.Equal(t, 0, code(wait(t, c)))
			}
			per := float64(readCalls(t, pid)-before) / cmds
			c.mu.Lock()
			f := c.frame
			c.mu.Unlock()
			size := len(f.Text) + len(f.End) + len(f.FrameText) + len(f.EndText)
			t.Logf("%s: %.1f read calls per command, whose frame and end line hold %d bytes", shell, per, size)
			require.Less(t, per, float64(size)/2, "read calls per command")
		})
	}
}

// TestNoHistoryFile: a session's shell keeps no history file: the lines the
// engine sends it are not appended to the user's ~/.sh_history, which every
// session and the user's own shells would share (ksh93 opens one as it
// starts), whatever a command does with history. ksh93, whose HISTFILE the
// engine unset, fell back to ~/.sh_history as soon as a command asked for
// its history (fc -l); a login ksh93 wrote the engine's first line there.
func TestNoHistoryFile(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, login := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/login=%v", shell, login), func(t *testing.T) {
				t.Parallel()
				checkNoHistoryFile(t, shell, login)
			})
		}
	}
}

func checkNoHistoryFile(t *testing.T, shell string, login bool) {
	home := t.TempDir()
	s := newSession(t, Options{Shell: shell, Login: login, Env: map[string]string{"HOME": home}})
	for _, cmd := range []string{"true", "fc -l >/dev/null 2>&1; history >/dev/null 2>&1; true", "echo a; return 3"} {
		run(t, s, CommandOptions{Cmd: cmd})
	}
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "%s was written", filepath.Join(home, e.Name()))
	}
}

// TestShellStdoutClosed: between commands mksh's own stdout is closed (the
// other shells keep theirs, see closeOwn), so that a command's stdout and
// its end marker are redirections of a closed descriptor, which a shell
// need not save and restore; the commands' output is whole all the same.
func TestShellStdoutClosed(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			for range 3 {
				r, out, errs := run(t, s, CommandOptions{Cmd: "echo out; echo err >&2"})
				require.Equal(t, 0, code(r))
				require.Equal(t, "out\n", out)
				require.Equal(t, "err\n", errs)
			}
			// The end line closes the last stream just after its marker.
			fd1 := "/proc/" + strconv.Itoa(s.Info().PID) + "/fd/1"
			require.Eventually(t, s.atPrompt, deadline, 10*time.Millisecond)
			_, err := os.Readlink(fd1)
			if shell != "mksh" {
				require.NoError(t, err, "the shell's stdout")
				return
			}
			require.ErrorIs(t, err, fs.ErrNotExist, "the shell's stdout is open")
		})
	}
}

// TestOutputAfterStreamsReopened: a command that closes its stdout and
// stderr, leaving their streams with no writer of the shell's for a while,
// and then opens them again by path and writes on, has all of its output,
// and the next command only its own. The engine's own write end of each
// stream (its keeper, see resident.Stream) is what keeps the reader from
// taking the moment with no other writer for the end: without it, the
// end-of-file read there ended the output on every shell.
func TestOutputAfterStreamsReopened(t *testing.T) {
	t.Parallel()
	// The paths are read before the close (stdout's through a copy: ksh93
	// runs $(...) in the shell, its stdout the substitution's); the sleep
	// lets the engine wake to the closes and read before the opens.
	const cmd = `exec 3>&1; o=$(readlink /proc/$$/fd/3); exec 3>&-; e=$(readlink /proc/$$/fd/2); echo a; echo x >&2; ` +
		`exec 1>&- 2>&-; sleep 0.2; exec 1>"$o" 2>"$e"; echo b; echo y >&2`
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			for range 2 { // the second with the streams from the pool
				r, out, errOut := run(t, s, CommandOptions{Cmd: cmd})
				require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
				require.Equal(t, "a\nb\n", out)
				require.Equal(t, "x\ny\n", errOut)
				expectRun(t, s, "echo next", 0, "next\n")
			}
		})
	}
}
