package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/server"
)

// blockingLogin returns the options of a login session of shell whose
// profile says "profile blocks" and runs sleep 1000, and a func that waits
// for the sleep to start and returns it; the sleep is killed at the test's
// end whatever happens.
func blockingLogin(t *testing.T, shell string) (client.SessionOptions, func() proctree.Ident) {
	t.Helper()
	home := t.TempDir()
	profile := processtest.LoginProfile[shell]
	text := "echo profile blocks >&2; sh -c 'echo $$ >\"$HOME/sleeper\"; exec sleep 1000'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, profile), []byte(text), 0o644))
	opts := client.SessionOptions{Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true}
	return opts, func() proctree.Ident {
		t.Helper()
		var b []byte
		require.Eventually(t, func() bool {
			var err error
			b, err = os.ReadFile(filepath.Join(home, "sleeper"))
			return err == nil && strings.HasSuffix(string(b), "\n")
		}, 20*time.Second, 10*time.Millisecond, "the profile's sleep did not start")
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err, "%q", b)
		sleeper := proctree.IdentOf(pid)
		t.Cleanup(func() {
			if sleeper.Alive() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		return sleeper
	}
}

// A login session whose profile blocks (sleep 1000) is answered 400
// invalid_argument once the daemon's ReadyWithin has passed, saying that
// the shell did not become ready within it and that its login profile may
// block; the sleep is killed with the shell, and no session is left. The
// request waited for the client to give up.
func TestLoginProfileThatBlocks(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{ReadyWithin: time.Second})
	for _, shell := range allShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			opts, sleeper := blockingLogin(t, shell)
			c, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			_, err := d.c.CreateSession(c, opts)
			requireCode(t, err, client.CodeInvalidArgument)
			require.ErrorContains(t, err, "the shell did not become ready within 1s (its login profile may block)")
			require.ErrorContains(t, err, "profile blocks")
			requireGone(t, sleeper())
			list, err := d.c.Sessions(c) // none of the daemon's starts came up
			require.NoError(t, err)
			require.Empty(t, list, "a session refused is listed")
		})
	}
}

// A start that waits for a shell's login profile does not hold the drain
// past the start's bound: the start is answered 400 at its bound, and the
// drain ends then, well within its own.
func TestDrainNotHeldByStart(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{ReadyWithin: 2 * time.Second})
	opts, sleeper := blockingLogin(t, "bash")
	created := make(chan error, 1)
	go func() {
		_, err := d.c.CreateSession(ctx(t), opts)
		created <- err
	}()
	left := sleeper()
	c, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	require.NoError(t, d.srv.Drain(c), "the drain waited for the start past its bound")
	requireCode(t, <-created, client.CodeInvalidArgument)
	requireGone(t, left)
}

// A client that goes away while its session's shell reads a login profile
// that blocks leaves nothing behind: the shell and the profile's sleep are
// killed, no session or process is listed, and a drain finds no request
// owed an answer.
func TestCreateGivenUp(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	opts, sleeper := blockingLogin(t, "bash")
	c, cancel := context.WithCancel(ctx(t))
	created := make(chan error, 1)
	go func() {
		_, err := d.c.CreateSession(c, opts)
		created <- err
	}()
	left := sleeper()
	cancel()
	require.ErrorIs(t, <-created, context.Canceled)
	requireGone(t, left)
	list, err := d.c.List(ctx(t), client.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "a process is left")
	sessions, err := d.c.Sessions(ctx(t))
	require.NoError(t, err)
	require.Empty(t, sessions, "a session is left")
	dc, dcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer dcancel()
	require.NoError(t, d.srv.Drain(dc), "the start given up is still owed an answer")
}
