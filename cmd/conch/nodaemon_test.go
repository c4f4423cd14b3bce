package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/procfs"
)

// asUser is conch with args as this user's client of s: it finds s
// through the state directory's records, as a user's conch does, not
// through $CONCH_URL and $CONCH_TOKEN.
func (s *served) asUser(args ...string) *exec.Cmd {
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+s.state, client.EnvURL+"=", client.EnvToken+"=")
	return cmd
}

// exitOf runs cmd, within a minute (a hang guard), and returns its exit
// code and what it wrote to stderr.
func exitOf(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// A daemon killed with SIGKILL is said to be gone, with how to start one,
// while its pid still names something: its zombie, which its parent has
// not reaped yet, or a later program the kernel gave its pid to. It was
// said to not answer, maybe stuck, with a word to stop it: a user who did
// stopped that other program. A daemon that took its token from
// $CONCH_TOKEN was said to want $CONCH_TOKEN here too.
func TestDeadDaemonIsNotStuck(t *testing.T) {
	t.Parallel()
	for _, tokenFrom := range []string{"", "env"} {
		t.Run("token="+tokenFrom, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, serveSetup{tokenFrom: tokenFrom})
			pid := s.cmd.Process.Pid
			// Killed, and not waited for until the test ends: a zombie.
			s.kill(t)
			deadline := time.Now().Add(30 * time.Second) // a hang guard
			for {
				st, ok := procfs.ReadStat(pid)
				require.True(t, ok, "the killed daemon was reaped: the test tests nothing")
				if st.State == 'Z' {
					break
				}
				require.True(t, time.Now().Before(deadline), "the killed daemon is no zombie 30 s later")
				time.Sleep(10 * time.Millisecond)
			}
			gone := func(what string) {
				t.Helper()
				code, stderr := exitOf(t, s.asUser("ps"))
				require.Equal(t, exitOwn, code, "%s: %s", what, stderr)
				require.Contains(t, stderr, "is no longer running: it was killed or crashed; start one with 'conch serve'", what)
				require.NotContains(t, stderr, "stuck", what)
				require.NotContains(t, stderr, client.EnvToken, what)
			}
			gone("a zombie")

			// Its port taken by another program, which closes every
			// connection before it answers: as when another daemon, or
			// anything else, listens there now.
			u, err := url.Parse(s.url)
			require.NoError(t, err)
			ln := listenAgain(t, u.Host)
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					conn.Close()
				}
			}()
			gone("its port taken")
			ln.Close()

			// The pid given to another program: its record is made to
			// name one, as when pids wrap.
			other := exec.Command("sleep", "60")
			require.NoError(t, other.Start())
			t.Cleanup(func() {
				_ = other.Process.Kill()
				_ = other.Wait()
			})
			dir := filepath.Join(s.state, "conch")
			ep, err := client.ReadEndpoint(dir)
			require.NoError(t, err)
			require.Equal(t, pid, ep.PID)
			ep.PID = other.Process.Pid
			require.NoError(t, client.WriteEndpoint(dir, ep))
			gone("a pid reused")
		})
	}
}

// A daemon that runs and answers, whose token file was removed, is said to
// run, with the file missing named and what to do. It was said to not
// answer, maybe stuck, with a word to stop it: a healthy daemon.
func TestTokenFileMissingSaysSo(t *testing.T) {
	t.Parallel()
	for _, tokenFrom := range []string{"", "new"} { // --token-file, the state directory's
		t.Run("token="+tokenFrom, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, serveSetup{tokenFrom: tokenFrom})
			ep, err := client.ReadEndpoint(filepath.Join(s.state, "conch"))
			require.NoError(t, err)
			require.NoError(t, os.Remove(ep.TokenFile))
			code, stderr := exitOf(t, s.asUser("ps", "-q"))
			require.Equal(t, exitOwn, code, stderr)
			require.Contains(t, stderr, "runs, but its token file "+ep.TokenFile+" is missing")
			require.Contains(t, stderr, client.EnvToken)
			require.NotContains(t, stderr, "does not answer")
			require.NotContains(t, stderr, "stuck")
			// It does run: its token still opens it.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err = s.c.List(ctx, client.ListOptions{})
			require.NoError(t, err)
		})
	}
}

// A daemon that stops, and ends the process that conch run or conch logs
// -f follows as it does (here at once: --drain-timeout 0), is said to
// have stopped, and the process with it. It was said that the process may
// still run, with conch logs -f and conch kill to reach it: the next
// daemon knows nothing of it.
func TestFollowDaemonStoppedSaysSo(t *testing.T) {
	t.Parallel()
	for _, follow := range []string{"run", "logs"} {
		t.Run(follow, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, serveSetup{}, "--drain-timeout", "0")
			// It ignores TERM, so that the daemon cuts the stream
			// before it has ended the process (with KILL).
			const command = "trap '' TERM; echo started; sleep 60"
			args := []string{"run", "--", command}
			if follow == "logs" {
				p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: command})
				require.NoError(t, err)
				args = []string{"logs", "-f", p.ID}
			}
			cmd, _, stderr := s.runUntilLine(t, "started\n", args...)
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
			defer guard.Stop()
			var ee *exec.ExitError
			require.ErrorAs(t, cmd.Wait(), &ee)
			require.Equal(t, exitOwn, ee.ExitCode(), stderr.String())
			require.Contains(t, stderr.String(), "the daemon stopped, or was killed, before", stderr.String())
			require.NotContains(t, stderr.String(), "may still run", stderr.String())
			// The daemon ends the process (KILL, 5 s after the TERM it
			// ignores), then itself and its instance directory: waited
			// for, so that the test's end, which kills a daemon still
			// there 2 s after a second TERM, leaves no directory behind.
			select {
			case <-s.stderr:
			case <-time.After(30 * time.Second):
				t.Fatal("the daemon did not stop within 30 s of its TERM")
			}
		})
	}
}

// listenAgain listens on addr, a port a daemon of the test let go of: the
// kernel may meanwhile have given it to a connection of another test as
// its own end, which holds it until that connection closes.
func listenAgain(t *testing.T, addr string) net.Listener {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		require.ErrorIs(t, err, syscall.EADDRINUSE)
		require.True(t, time.Now().Before(deadline), "%s still taken 30 s later: %v", addr, err)
		time.Sleep(20 * time.Millisecond)
	}
}
