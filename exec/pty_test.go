package exec

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ptyScript reports whether it has a terminal and its size, then waits for a
// line before reporting the size again, then echoes a line it reads.
const ptyScript = `test -t 0 && test -t 1 && echo on-a-tty
echo "size $(stty size)"
read go
echo "size $(stty size)"
read line
echo "got:$line"`

func TestPTY(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: ptyScript, Terminal: &process.TerminalSize{Cols: 100, Rows: 30}})
	info := p.Info()
	require.False(t, info.Kind != process.KindPTY || info.Stdin != process.StdinOpen || *info.Terminal != (process.TerminalSize{Cols: 100, Rows: 30}), "info %+v", info)
	waitOutput(t, p, "size 30 100")
	require.NoError(t, p.Resize(process.TerminalSize{Cols: 120, Rows: 40}))
	require.NoError(t, p.WriteStdin([]byte("\n")))
	waitOutput(t, p, "size 40 120")
	require.NoError(t, p.WriteStdin([]byte("hello\n")))
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	out := logText(p.Log(), logstore.PTY)
	for _, want := range []string{"on-a-tty\r\n", "got:hello\r\n"} {
		assert.Contains(t, out, want, "output %q lacks %q", out, want)
	}
	got := logText(p.Log(), 0)
	assert.Equal(t, out, got, "frames on channels other than pty: %q", got)
	err := p.Resize(process.TerminalSize{Cols: 80, Rows: 24})
	assert.ErrorIs(t, err, process.ErrUnsupported, "resize after the end")
}

func TestPTYDefaultSizeAndTerm(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `echo "$(stty size) $TERM"`})
	wait(t, p)
	got := logText(p.Log(), 0)
	assert.Equal(t, "24 80 xterm-256color\r\n", got, "output %q", got)
}

// TestPTYSizeAsItIs: a PTY process's Info says its terminal's size as it
// is, also after the program changed it (stty): it kept saying the size
// asked at the start.
func TestPTYSizeAsItIs(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `stty cols 132 rows 50; echo set; sleep 30`})
	defer p.Kill(syscall.SIGKILL, 0, 0)
	require.Eventually(t, func() bool {
		t := p.Info().Terminal
		return t != nil && t.Cols == 132 && t.Rows == 50
	}, 20*time.Second, 10*time.Millisecond, "size %+v", p.Info().Terminal)
	require.NoError(t, p.Resize(process.TerminalSize{Cols: 100, Rows: 30}))
	require.Equal(t, process.TerminalSize{Cols: 100, Rows: 30}, *p.Info().Terminal)
}

// TestPTYOfAnotherUser: a PTY process run as another user gets a terminal
// it can open again by its name, as after login (it was root's, 0600).
func TestPTYOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	p := start(t, Options{Kind: process.KindPTY, User: "nobody", Cwd: "/",
		Cmd: `stat -c '%U %a' "$(tty)"; exec 3<>"$(tty)" && echo reopened; stty -F "$(tty)" size`})
	r := wait(t, p)
	out := logText(p.Log(), 0)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s, output %q", show(r), out)
	require.Regexp(t, `^nobody 6[02]0\r\nreopened\r\n24 80\r\n$`, out)
}

// TestPTYSizeZero: a size of 0 a program set (stty cols 0 rows 0, which
// some do to say "unknown") is the size as it is too; the record kept
// saying the size before it.
func TestPTYSizeZero(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `stty cols 0 rows 0; echo set; sleep 30`})
	defer p.Kill(syscall.SIGKILL, 0, 0)
	waitOutput(t, p, "set")
	require.Equal(t, process.TerminalSize{}, *p.Info().Terminal)
}

// TestPTYReopenedTerminal: a program that closes every descriptor of its
// terminal and opens it again by name (exec >/dev/tty) has what it writes
// then in its output. The master read EIO as soon as the terminal was
// closed, which ended the copy of its output for good: "back" was lost.
func TestPTYReopenedTerminal(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY,
		Cmd: `echo before; exec </dev/null >/dev/null 2>&1; sleep 1; exec >/dev/tty; echo back; exit 5`})
	r := wait(t, p)
	out := logText(p.Log(), 0)
	require.True(t, sameResult(r, process.ExitedWith(5)), "result %s, output %q", show(r), out)
	require.Equal(t, "before\r\nback\r\n", out)
}

func TestNotPTY(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "exit 0"})
	err := p.Resize(process.TerminalSize{Cols: 80, Rows: 24})
	assert.ErrorIs(t, err, process.ErrNotPTY, "Resize")
	_, err = p.Attach(t.Context())
	assert.ErrorIs(t, err, process.ErrNotPTY, "Attach")
	wait(t, p)
}

// readUntil reads a until what it read holds s, at most 20 s.
func readUntil(t *testing.T, a *Attachment, s string) string {
	t.Helper()
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), s) {
			n, err := a.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "read %q, want %q", got.String(), s)
	case <-time.After(20 * time.Second):
		a.Close() // ends the reader
		<-done
		t.Fatalf("read %q in 20 s; want %q", got.String(), s)
	}
	return got.String()
}

func TestAttach(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `echo before; while read line; do echo "echo:$line"; done; echo bye`})
	waitOutput(t, p, "before")

	// Two clients at once: both get the replay first, then live output.
	a1, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer a1.Close()
	a2, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer a2.Close()
	for _, a := range []*Attachment{a1, a2} {
		got := readUntil(t, a, "before\r\n")
		assert.True(t, strings.HasPrefix(got, "before\r\n"), "replay %q does not start with the retained output", got)
	}
	// Input from one client reaches the PTY; its output reaches both.
	_, err = a1.Write([]byte("one\n"))
	require.NoError(t, err)
	readUntil(t, a1, "echo:one")
	readUntil(t, a2, "echo:one")
	require.NoError(t, a2.Resize(process.TerminalSize{Cols: 90, Rows: 20}))
	// A client that detaches leaves the process running.
	a2.Close()
	_, err = a1.Write([]byte("two\n"))
	require.NoError(t, err)
	readUntil(t, a1, "echo:two")

	// The end: Ctrl-D ends the read loop; the reader gets the rest, then EOF.
	require.NoError(t, p.CloseStdin())
	readUntil(t, a1, "bye")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); a1.Close() }()
	rest, err := io.ReadAll(a1)
	assert.NoError(t, err, "after bye: %q; want io.EOF", rest)
	r := wait(t, p)
	assert.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	// Attaching to an ended process replays what it retained, then EOF.
	a3, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer a3.Close()
	all, err := io.ReadAll(a3)
	assert.False(t, err != nil || !strings.HasPrefix(string(all), "before\r\n") || !strings.HasSuffix(string(all), "bye\r\n"), "attach after the end: %q, %v", all, err)
}

// TestPTYEndOfFileAfterAPartialLine: CloseStdin after input that does not
// end its line gives a program reading lines end-of-file all the same, as
// Ctrl-D pressed twice does at a terminal. A single Ctrl-D only handed cat
// the partial line, and cat waited on for more.
func TestPTYEndOfFileAfterAPartialLine(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Argv: []string{"cat"}})
	require.NoError(t, p.WriteStdin([]byte("abc")))
	require.NoError(t, p.CloseStdin())
	r := wait(t, p)
	out := logText(p.Log(), 0)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s, output %q", show(r), out)
	require.Equal(t, "abcabc", out, "the echo, then what cat read")
}

// TestPTYEndOfFileAfterALine: after a whole line, or in raw mode, the
// end-of-file is one Ctrl-D: a second would be a second end-of-file, read
// by what reads the terminal next.
func TestPTYEndOfFileAfterALine(t *testing.T) {
	t.Parallel()
	// The shell reads its second line after cat's end-of-file: a second
	// Ctrl-D would end that read, and "more" would be empty.
	p := start(t, Options{Kind: process.KindPTY, Cmd: `cat; read -r more; echo "more:$more"`})
	require.NoError(t, p.WriteStdin([]byte("abc\n")))
	require.NoError(t, p.CloseStdin())
	waitOutput(t, p, "abc\r\nabc\r\n")
	require.NoError(t, p.WriteStdin([]byte("x\n")))
	r := wait(t, p)
	out := logText(p.Log(), 0)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s, output %q", show(r), out)
	require.Contains(t, out, "more:x\r\n")

	// Raw mode: the program reads every byte as it comes, so there is
	// no partial line, and Ctrl-D is one byte of input.
	p = start(t, Options{Kind: process.KindPTY, Cmd: `stty raw -echo; echo ready; head -c 4 | od -An -c; stty sane`})
	waitOutput(t, p, "ready")
	require.NoError(t, p.WriteStdin([]byte("abc")))
	require.NoError(t, p.CloseStdin())
	r = wait(t, p)
	out = logText(p.Log(), 0)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s, output %q", show(r), out)
	require.Contains(t, out, `a   b   c 004`)
}

// TestPTYEndOfFileIsTheTerminals: CloseStdin writes the end-of-file
// character the terminal has, which a program may have changed (stty eof):
// Ctrl-D there is a character of the line like any other, and a program
// reading lines would wait on for its end.
func TestPTYEndOfFileIsTheTerminals(t *testing.T) {
	t.Parallel()
	for _, input := range []string{"abc\n", "abc"} {
		p := start(t, Options{Kind: process.KindPTY, Cmd: `stty eof ^E; echo ready; cat; echo "done:$?"`})
		waitOutput(t, p, "ready")
		require.NoError(t, p.WriteStdin([]byte(input)))
		require.NoError(t, p.CloseStdin())
		r := wait(t, p)
		out := logText(p.Log(), 0)
		require.True(t, sameResult(r, process.ExitedWith(0)), "input %q: result %s, output %q", input, show(r), out)
		require.Contains(t, out, "done:0", "input %q", input)
		require.NotContains(t, out, "^D", "input %q: a Ctrl-D reached cat as a character", input)
	}
}

// TestPTYExitHangsUpTheForeground pins what a PTY process's exit does to
// what it left, as a terminal does when its shell leaves: the kernel sends
// SIGHUP to the terminal's foreground group, so a background job of a shell
// without job control ends with it (on pipes it lives on, see
// TestDrainAfterExit). A job in a group of its own (set -m) lives on and
// keeps the terminal: the end is reported at the exit all the same, and
// Kill of the ended process reaches the job.
func TestPTYExitHangsUpTheForeground(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `sleep 100 & echo $!`})
	r := wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	requireGone(t, proctree.IdentsOf(pids(t, logText(p.Log(), 0))...))

	p = start(t, Options{Kind: process.KindPTY, Cmd: `set -m; sleep 100 & echo $!`})
	r = wait(t, p)
	require.True(t, sameResult(r, process.ExitedWith(0)), "result %s", show(r))
	job := pids(t, logText(p.Log(), 0))
	require.True(t, proctree.Alive(job[0]), "the job in a group of its own is gone")
	require.NoError(t, p.Kill(syscall.SIGTERM, 0, 0))
	requireGone(t, proctree.IdentsOf(job...))
}

// TestPTYEndOfFileAfterLineEditing: whether the line is unfinished when
// CloseStdin comes is what the terminal's line editing left of it, not the
// last byte written. Erased to nothing (erase, kill, word erase), the line
// is empty, and one end-of-file is all: a second would end the next read
// (the shell's, here). A newline escaped (Ctrl-V) is a character of the
// line, which stays unfinished: one end-of-file only hands it to cat.
// Ctrl-C empties the line (cat ignores the interrupt here), and with
// iutf8 an erase takes a whole character.
func TestPTYEndOfFileAfterLineEditing(t *testing.T) {
	t.Parallel()
	for _, input := range []string{"abc\x7f\x7f\x7f", "abc\x15", "ab cd\x17\x17", "x\ny\x15", "abc\x03", "\u00e9\x7f", "abc\x16\n", "abc\x16\x04", "abc\x16"} {
		p := start(t, Options{Kind: process.KindPTY, Cmd: `trap '' INT; stty iutf8; echo ready; cat >/dev/null; echo cat-done; read -r x; echo "read:$?:$x"`})
		waitOutput(t, p, "ready")
		require.NoError(t, p.WriteStdin([]byte(input)))
		require.NoError(t, p.CloseStdin())
		waitOutput(t, p, "cat-done")
		// Fails where a second end-of-file ended the read (and the shell).
		_ = p.WriteStdin([]byte("next\n"))
		r := wait(t, p)
		out := logText(p.Log(), 0)
		assert.True(t, sameResult(r, process.ExitedWith(0)), "input %q: result %s, output %q", input, show(r), out)
		assert.Contains(t, out, "read:0:next\r\n", "input %q: the shell's read", input)
	}
}
