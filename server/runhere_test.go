package server_test

import (
	"bytes"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// goroutines returns the stacks of the test binary's goroutines, one by
// one.
func goroutines(t *testing.T) []string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 2))
	return strings.Split(b.String(), "\n\n")
}

// watchers returns the stacks of the server's watchers (Server.watch). One
// started and not yet run shows the function its go statement wraps
// instead: track's gowrap.
func watchers(stacks []string) []string {
	var out []string
	for _, s := range stacks {
		if strings.Contains(s, "server.(*Server).watch(") || strings.Contains(s, "server.(*Server).track.gowrap") {
			out = append(out, s)
		}
	}
	return out
}

// with returns the stacks that hold every one of the frames.
func with(stacks []string, frames ...string) []string {
	var out []string
	for _, s := range stacks {
		if !slices.ContainsFunc(frames, func(f string) bool { return !strings.Contains(s, f) }) {
			out = append(out, s)
		}
	}
	return out
}

// A command run over HTTP in an idle session runs on the goroutine of its
// request: neither the session's queue worker nor a watcher starts for it.
// Not parallel, so that no other test runs commands meanwhile.
func TestRunOnTheRequestsGoroutine(t *testing.T) {
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // its check that a shell starts has ended
		status, _ := d.raw(t, "GET", "/readyz", "", nil)
		return status == 200
	}, 10*time.Second, 10*time.Millisecond)
	before := len(watchers(goroutines(t)))
	type answer struct {
		r   *client.RunResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "sleep 1; echo ran"}})
		answered <- answer{r, err}
	}()
	var stacks []string
	require.Eventually(t, func() bool {
		stacks = goroutines(t)
		return len(with(stacks, "shellsession.(*Command).runHere")) > 0
	}, 10*time.Second, 5*time.Millisecond, "the command never ran on a request's goroutine")
	require.Len(t, with(stacks, "shellsession.(*Command).runHere", "server.(*Server).runCommand"), 1,
		"the command runs on the goroutine of its request")
	require.Empty(t, with(stacks, "shellsession.(*Command).Run("), "a queue worker runs a command")
	require.Len(t, watchers(stacks), before, "a watcher started for the command")
	a := <-answered
	require.NoError(t, a.err)
	require.Equal(t, "ran\n", a.r.Stdout)

	// Its end was accounted for as a watcher would have: the record is
	// listed as ended, and the session takes the next command at once.
	got, err := d.c.Get(c, a.r.ProcessID)
	require.NoError(t, err)
	require.Equal(t, process.Terminal, got.State)
	require.Equal(t, "x\n", d.runIn(t, s.ID, "echo x").Stdout)
}

// A command that runs on its request's goroutine and comes back early — a
// wait timeout, an idle timeout — runs on to its end without it, and is
// watched to its end.
func TestRunOnTheRequestsGoroutineComesBackEarly(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	for _, o := range []client.CommandRunOptions{
		{CommandOptions: client.CommandOptions{Cmd: "echo a; sleep 0.5; echo b"}, Timeout: client.Millis(200 * time.Millisecond)},
		{CommandOptions: client.CommandOptions{Cmd: "echo a; sleep 0.5; echo b"}, IdleTimeout: client.Millis(200 * time.Millisecond)},
	} {
		r, p, err := d.c.RunCommand(c, s.ID, o)
		require.NoError(t, err)
		require.NotNil(t, p, "answered as ended")
		require.Equal(t, process.Running, p.State)
		require.Equal(t, "a\n", r.Stdout)
		w, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, 0, exitCode(t, *w))
		got, err := d.c.Get(c, p.ID)
		require.NoError(t, err)
		require.Equal(t, process.Terminal, got.State)
		require.Equal(t, "x\n", d.runIn(t, s.ID, "echo x").Stdout)
	}
}
