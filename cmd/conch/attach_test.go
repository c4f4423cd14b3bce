package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/daemontest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// conchBinary returns a path that runs this test binary as conch (see
// testscript.Main).
func conchBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "conch")
	require.NoError(t, os.Symlink(self, bin))
	return bin
}

// serve runs a daemon in this process until the test ends.
func serve(t *testing.T) *client.Client {
	t.Helper()
	return daemontest.Start(t, server.Options{}).Client
}

// terminal is conch running on a pseudo-terminal, as a user runs it.
type terminal struct {
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func runOnTerminal(t *testing.T, c *client.Client, args ...string) *terminal {
	t.Helper()
	return runOnTerminalOf(t, c.URL(), daemontest.Token, args...)
}

// runOnTerminalOf is runOnTerminal against the daemon at url with token.
func runOnTerminalOf(t *testing.T, url, token string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(conchBinary(t), args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+url, client.EnvToken+"="+token)
	return startOnTerminal(t, cmd)
}

// startOnTerminal starts cmd on a pseudo-terminal of its own.
func startOnTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	require.NoError(t, err)
	term := &terminal{cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tty.Close()
		<-term.done
	})
	return term
}

// expect waits until the terminal has shown want.
func (term *terminal) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		term.mu.Lock()
		got := term.out.String()
		term.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	term.mu.Lock()
	defer term.mu.Unlock()
	t.Fatalf("terminal did not show %q; it shows %q", want, term.out.String())
}

// exitCode waits for conch to exit and returns its status.
func (term *terminal) exitCode(t *testing.T) int {
	t.Helper()
	return term.wait(t).ExitCode()
}

// wait waits for conch to end and returns how it did.
func (term *terminal) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- term.cmd.Wait() }()
	select {
	case err := <-errc:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			require.NoError(t, err)
		}
		return term.cmd.ProcessState
	case <-time.After(20 * time.Second):
		t.Fatal("conch did not exit")
		return nil
	}
}

func TestAttachTerminal(t *testing.T) {
	t.Parallel()
	c := serve(t)
	ctx := t.Context()
	p, err := c.Start(ctx, client.StartOptions{
		Kind: process.KindPTY,
		Cmd:  `read a; stty size; read b; stty size; echo "got:$b"; exit 4`,
	})
	require.NoError(t, err)

	term := runOnTerminal(t, c, "attach", p.ID)
	// conch sent its terminal's size before any input.
	_, err = term.tty.Write([]byte("x\r"))
	require.NoError(t, err)
	term.expect(t, "30 100")

	// A resize of conch's terminal (SIGWINCH) reaches the process.
	require.NoError(t, pty.Setsize(term.tty, &pty.Winsize{Cols: 120, Rows: 40}))
	require.Eventually(t, func() bool {
		got, err := c.Get(ctx, p.ID)
		return err == nil && got.Terminal != nil && got.Terminal.Cols == 120
	}, 20*time.Second, 10*time.Millisecond)
	_, err = term.tty.Write([]byte("hello\r"))
	require.NoError(t, err)
	term.expect(t, "40 120")
	term.expect(t, "got:hello")
	require.Equal(t, 4, term.exitCode(t), "conch attach exits with the process's status")
}

func TestAttachDetach(t *testing.T) {
	t.Parallel()
	c := serve(t)
	ctx := t.Context()
	p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY, Cmd: "echo ready; sleep 30"})
	require.NoError(t, err)
	term := runOnTerminal(t, c, "attach", p.ID)
	term.expect(t, "ready")
	term.expect(t, "attached to "+p.ID+"; Ctrl-] detaches") // said on attach
	_, err = term.tty.Write([]byte{detachKey})
	require.NoError(t, err)
	require.Equal(t, 0, term.exitCode(t))
	got, err := c.Get(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, process.Running, got.State, "detaching leaves the process running")
}

// TestAttachDetachBehindPaste: a Ctrl-] behind megabytes of pasted input
// that the program does not read yet detaches once the program reads, and
// the whole paste reached it. conch read the terminal on without bound
// while its writes waited, saw the Ctrl-] at once, and dropped what it had
// read and not sent. Now it holds back the terminal once maxQueuedInput
// bytes wait (the paste's writer waits too), and sends all before the
// Ctrl-] as the program takes it.
func TestAttachDetachBehindPaste(t *testing.T) {
	t.Parallel()
	c := serve(t)
	ctx := t.Context()
	const paste = 16 << 20
	start := filepath.Join(t.TempDir(), "start")
	p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY, Cmd: fmt.Sprintf(
		`stty raw -echo; echo ready; until [ -e %s ]; do sleep 0.05; done; head -c %d >/dev/null; exit 7`, start, paste)})
	require.NoError(t, err)
	term := runOnTerminal(t, c, "attach", p.ID)
	term.expect(t, "ready")
	term.expect(t, "Ctrl-] detaches") // said once the terminal is raw
	// Far more than conch, the daemon's input queue and the sockets between hold.
	pasted := make(chan error, 1)
	go func() {
		_, err := term.tty.Write(append(bytes.Repeat([]byte("x"), paste), detachKey))
		pasted <- err
	}()
	// The program reads once conch had time to read ahead (and, unbounded,
	// to see the Ctrl-] and detach): the test holds with any delay.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = term.cmd.Wait()
	}()
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
	}
	require.NoError(t, os.WriteFile(start, nil, 0o600))
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("conch did not exit")
	}
	require.Equal(t, 0, term.cmd.ProcessState.ExitCode(), "conch detached")
	select {
	case err := <-pasted:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the paste is still being written")
	}
	w, _, err := c.Wait(ctx, p.ID, 30*time.Second)
	require.NoError(t, err)
	require.NotNil(t, w, "the program is still waiting for the paste")
	require.NotNil(t, w.ExitCode)
	require.Equal(t, 7, *w.ExitCode, "the program read the whole paste")
}

// TestAttachDetachSendsWhatCameBefore: input read with the Ctrl-] that
// detaches, before it, still reaches a program that reads it.
func TestAttachDetachSendsWhatCameBefore(t *testing.T) {
	t.Parallel()
	c := serve(t)
	ctx := t.Context()
	p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY,
		Cmd: `stty -echo; echo ready; read line; [ "$line" = hello ] && exit 7; exit 1`})
	require.NoError(t, err)
	term := runOnTerminal(t, c, "attach", p.ID)
	term.expect(t, "ready")
	term.expect(t, "Ctrl-] detaches")
	_, err = term.tty.Write([]byte("hello\r\x1d"))
	require.NoError(t, err)
	require.Equal(t, 0, term.exitCode(t), "conch detached")
	w, _, err := c.Wait(ctx, p.ID, 20*time.Second)
	require.NoError(t, err)
	require.NotNil(t, w)
	require.NotNil(t, w.ExitCode)
	require.Equal(t, 7, *w.ExitCode, "the program read the line typed before the Ctrl-]")
}

// TestAttachDetachRestoresModes: a full-screen program leaves the
// terminal in its alternate screen, with its cursor hidden and mouse reports
// on; detaching put none of it back, and the shell conch returned to was a
// blank screen with no cursor that printed escape sequences at each click.
func TestAttachDetachRestoresModes(t *testing.T) {
	t.Parallel()
	c := serve(t)
	ctx := t.Context()
	p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY,
		Cmd: `printf '\033[?1049h\033[?25l\033[?1000;1006hfull screen\n'; sleep 30`})
	require.NoError(t, err)
	term := runOnTerminal(t, c, "attach", p.ID)
	term.expect(t, "full screen")
	_, err = term.tty.Write([]byte{detachKey})
	require.NoError(t, err)
	require.Equal(t, 0, term.exitCode(t))
	term.expect(t, "full screen\r\n\x1b[?1000l\x1b[?1006l\x1b[?25h\x1b[?1049l")
}

// TestAttachSignalRestoresTerminal: a signal to conch attach (kill, or
// SIGHUP as its terminal closes) ended it in raw mode, and the shell after
// it had a terminal that echoed nothing and took no line, still in the
// program's alternate screen. Now it detaches as Ctrl-] does, puts the
// terminal back, and then ends by the signal.
func TestAttachSignalRestoresTerminal(t *testing.T) {
	t.Parallel()
	c := serve(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM} {
		t.Run(process.SignalName(sig), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY,
				Cmd: `printf '\033[?1049hfull screen\n'; sleep 60`})
			require.NoError(t, err)
			term := runOnTerminal(t, c, "attach", p.ID)
			term.expect(t, "full screen")
			term.expect(t, "Ctrl-] detaches") // said once the terminal is raw
			raw, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
			require.NoError(t, err)
			require.Zero(t, raw.Lflag&(unix.ECHO|unix.ICANON), "attached, the terminal is raw")

			require.NoError(t, term.cmd.Process.Signal(sig))
			st := term.wait(t)
			if sig == syscall.SIGQUIT {
				require.Equal(t, 128+int(sig), st.ExitCode())
			} else {
				ws := st.Sys().(syscall.WaitStatus)
				require.True(t, ws.Signaled() && ws.Signal() == sig, "conch ends by the signal, as uncaught: %v", st)
			}
			got, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
			require.NoError(t, err)
			require.Equal(t, uint32(unix.ECHO|unix.ICANON), got.Lflag&(unix.ECHO|unix.ICANON), "the terminal echoes and takes lines again")
			term.expect(t, "\x1b[?1049l")
			term.expect(t, "detached from "+p.ID)
			got2, err := c.Get(ctx, p.ID)
			require.NoError(t, err)
			require.Equal(t, process.Running, got2.State, "the process runs on")
		})
	}
}

// TestAttachSaysGap: attaching after output was dropped, conch attach says
// on stderr how many bytes are missing, writes the rest, and exits as the
// process did.
func TestAttachSaysGap(t *testing.T) {
	t.Parallel()
	c := daemontest.Start(t, server.Options{LogRetention: 64 << 10}).Client
	ctx := t.Context()
	p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY, Cmd: "seq 1 100000; exit 3"})
	require.NoError(t, err)
	_, _, err = c.Wait(ctx, p.ID, 20*time.Second)
	require.NoError(t, err)
	stdout, stderr := attachOffTerminal(t, c, p.ID, 3)
	require.Contains(t, stderr, "bytes of output were dropped")
	require.True(t, strings.HasSuffix(stdout, "\r\n100000\r\n"), "stdout ends %q", stdout[max(0, len(stdout)-40):])
}

// attachOffTerminal runs conch attach id of c's daemon, its stdin not a
// terminal, wants it to exit with code, and returns its stdout and stderr.
func attachOffTerminal(t *testing.T, c *client.Client, id string, code int) (string, string) {
	t.Helper()
	cmd := exec.Command(conchBinary(t), "attach", id)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+c.URL(), client.EnvToken+"="+daemontest.Token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "conch attach: %v; stderr %q", err, stderr.String())
	require.Equal(t, code, ee.ExitCode(), "stderr %q", stderr.String())
	return stdout.String(), stderr.String()
}

// TestFinishAttachConnectionReset: an attachment whose connection was reset
// (a daemon killed with input of it unread) ends as one whose connection
// closed: conch attach asks the daemon how the program ended and, with no
// daemon there, says that nothing tells. It failed with the reset's own
// words ("failed to get reader: ... connection reset by peer"), seen now
// and then in TestAttachDaemonGone.
func TestFinishAttachConnectionReset(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // no daemon there any more
	c, err := client.New(gone, "t")
	require.NoError(t, err)
	reset := fmt.Errorf("failed to get reader: failed to read frame header: %w",
		&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
	var stderr strings.Builder
	code := finishAttach(t.Context(), &env{stderr: &stderr}, c, "someid", make(chan struct{}), reset)
	require.Equal(t, exitOwn, code, "stderr %q", stderr.String())
	require.Contains(t, stderr.String(), "conch: the attachment to someid ended, and the daemon does not say how the program did:\n")
}

// TestAttachDaemonGone kills the daemon under an attachment: conch attach
// says that nothing tells how the program ended and exits 125. It exited
// 0, as for a program that ended well. It says so once the terminal is
// back: said before, the words went to the program's alternate screen,
// which the shell's screen then replaced.
func TestAttachDaemonGone(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Kind: process.KindPTY,
		Cmd: `printf '\033[?1049hready\n'; sleep 60`})
	require.NoError(t, err)
	term := runOnTerminalOf(t, s.url, s.token, "attach", p.ID)
	term.expect(t, "ready")
	s.kill(t)
	require.Equal(t, exitOwn, term.exitCode(t))
	// After the alternate screen's end, and with the terminal's own
	// line ends (\r\n), not raw mode's bare \n.
	term.expect(t, "\x1b[?1049lconch: the attachment to "+p.ID+" ended, and the daemon does not say how the program did:\r\n")
}

// TestAttachSaysTimedOut: conch attach to a program stopped by its
// execution timeout exits 124 and says why, as conch wait does, on a
// terminal (once the terminal is back) and off one. It exited 124 and said
// nothing, as a program that exits 124 itself does.
func TestAttachSaysTimedOut(t *testing.T) {
	t.Parallel()
	c := serve(t)
	for _, onTerminal := range []bool{false, true} {
		t.Run(fmt.Sprint("terminal=", onTerminal), func(t *testing.T) {
			t.Parallel()
			p, err := c.Start(t.Context(), client.StartOptions{Kind: process.KindPTY,
				Cmd: "echo ready; exec sleep 60", ExecutionTimeout: client.Millis(time.Second)})
			require.NoError(t, err)
			want := "conch: " + p.ID + " timed out: it ran past its execution timeout and was stopped (exit 124)"
			if onTerminal {
				term := runOnTerminal(t, c, "attach", p.ID)
				require.Equal(t, 124, term.exitCode(t))
				term.expect(t, want+"\r\n")
				return
			}
			_, stderr := attachOffTerminal(t, c, p.ID, 124)
			require.Equal(t, want+"\n", stderr)
		})
	}
}

// TestAttachDetachKeyboardModes: a program that turned on the kitty
// keyboard protocol or xterm's modifyOtherKeys has the terminal send Ctrl-]
// as an escape sequence; conch attach did not see it, and could not be
// detached from. It now detaches on it, and turns those modes back off.
func TestAttachDetachKeyboardModes(t *testing.T) {
	t.Parallel()
	c := serve(t)
	for name, key := range map[string]string{"kitty": "\x1b[93;5u", "modifyOtherKeys": "\x1b[27;5;93~"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p, err := c.Start(ctx, client.StartOptions{Kind: process.KindPTY,
				Cmd: `printf '\033[>1u\033[>4;2mready\n'; sleep 30`})
			require.NoError(t, err)
			term := runOnTerminal(t, c, "attach", p.ID)
			term.expect(t, "ready")
			term.expect(t, "Ctrl-] detaches") // said once the terminal is raw
			_, err = term.tty.Write([]byte(key))
			require.NoError(t, err)
			require.Equal(t, 0, term.exitCode(t))
			term.expect(t, "ready\r\n\x1b[<1u\x1b[>4m")
			got, err := c.Get(ctx, p.ID)
			require.NoError(t, err)
			require.Equal(t, process.Running, got.State, "detaching leaves the process running")
		})
	}
}

// Under the kitty keyboard protocol's flag that reports keys let go, the
// release of the Ctrl-] that detached came after conch had left, and what
// read the terminal next got it: the shell, or the program of the next
// conch attach. conch reads it before it puts the terminal back.
func TestAttachDetachReadsKeyRelease(t *testing.T) {
	t.Parallel()
	c := serve(t)
	p, err := c.Start(t.Context(), client.StartOptions{Kind: process.KindPTY,
		Cmd: `printf '\033[>3uready\n'; sleep 30`})
	require.NoError(t, err)
	// What reads the terminal after conch: cat -v shows what it gets.
	cmd := exec.Command("sh", "-c", conchBinary(t)+" attach "+p.ID+"; echo left; exec cat -v")
	cmd.Env = append(os.Environ(), client.EnvURL+"="+c.URL(), client.EnvToken+"="+daemontest.Token)
	term := startOnTerminal(t, cmd)
	term.expect(t, "ready")
	term.expect(t, "Ctrl-] detaches")
	_, err = term.tty.Write([]byte("\x1b[93;5u")) // pressed
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)               // as a finger lets go, a moment later
	_, err = term.tty.Write([]byte("\x1b[93;5:3u")) // let go
	require.NoError(t, err)
	term.expect(t, "left\r\n")
	_, err = term.tty.Write([]byte("end\n"))
	require.NoError(t, err)
	term.expect(t, "end\r\nend\r\n") // echoed, then printed by cat
	term.mu.Lock()
	defer term.mu.Unlock()
	shown := term.out.String()
	require.NotContains(t, shown[strings.Index(shown, "left"):], "93;5:3u", "the release reached what read the terminal next")
}
