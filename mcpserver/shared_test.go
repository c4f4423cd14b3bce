package mcpserver_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/mcpserver"
)

// running is the daemon's running sessions called name.
func running(t *testing.T, d *client.Client, name string) []client.Process {
	t.Helper()
	all, err := d.Sessions(t.Context())
	require.NoError(t, err)
	return slices.DeleteFunc(all, func(p client.Process) bool { return p.Name != name || p.Ended() })
}

// sharedPair starts a daemon and two conch mcp --url that drive it, closed
// as the test ends.
func sharedPair(t *testing.T) (d *client.Client, a, b *conn) {
	t.Helper()
	env, stateHome := testEnv(t)
	d = startDaemon(t, env, stateHome)
	a = startMCP(t, env, "--url", d.URL())
	t.Cleanup(a.close)
	b = startMCP(t, env, "--url", d.URL())
	t.Cleanup(b.close)
	return d, a, b
}

// TestSharedNewNameAtOnce: two conch mcp --url asked at the same moment to
// run in one new name make one session of it on the daemon, which both
// run in, where each made its own and the name stood for two.
func TestSharedNewNameAtOnce(t *testing.T) {
	t.Parallel()
	d, a, b := sharedPair(t)
	for i := range 3 {
		name := fmt.Sprintf("new%d", i)
		var got [2]mcpserver.Result
		var wg sync.WaitGroup
		for j, c := range []*conn{a, b} {
			wg.Go(func() {
				got[j], _ = c.run(map[string]any{"command": "echo $$", "session": name})
			})
		}
		wg.Wait()
		require.Len(t, running(t, d, name), 1, "sessions called %s", name)
		require.Equal(t, got[0].Output, got[1].Output, "one shell for %s", name)
	}
}

// TestAdoptedShellNamed: a shell asked of the daemon's running session of a
// name, which runs another, is answered with the shell it runs.
func TestAdoptedShellNamed(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	first := startMCP(t, env, "--url", d.URL())
	first.run(map[string]any{"command": "true", "session": "d", "shell": "dash"})
	first.close()
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	r, text := c.run(map[string]any{"command": "echo $0", "session": "d", "shell": "zsh"})
	require.Equal(t, "dash\n", r.Output, text)
	require.Contains(t, r.Note, "the daemon's running session", text)
	require.Regexp(t, `it runs dash \(/\S*dash\), not zsh`, r.Note, text)
}

// TestAdoptedSessionLimits: the daemon's running session of a name is
// taken with the limits it was made with, which its answer tells, and
// which it is made again with once it has ended, as a session this conch
// mcp made is.
func TestAdoptedSessionLimits(t *testing.T) {
	t.Parallel()
	containmenttest.Limited(t, containment.Limits{Pids: 64}) // skips without cgroups
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	first := startMCP(t, env, "--url", d.URL())
	first.run(map[string]any{"command": "true", "session": "lim", "limits": map[string]any{"pids": 64}})
	first.close()
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	r, text := c.run(map[string]any{"command": "true", "session": "lim"})
	require.Regexp(t, `a bash shell session \(/\S*bash\) with limits pids 64`, r.Note, text)
	c.run(map[string]any{"command": "exit", "session": "lim"})
	c.toolError("run", map[string]any{"command": "true", "session": "lim"}) // told it ended
	r, text = c.run(map[string]any{"command": "true", "session": "lim"})
	require.Equal(t, 0, *r.ExitCode, text)
	again := running(t, d, "lim")
	require.Len(t, again, 1)
	require.Equal(t, &client.Limits{Pids: 64}, again[0].Limits, "made again with its limits")
}

// TestAdoptedSessionCwd: the daemon's running session of a name, once it
// has ended, is made again in the directory it was in when it was taken
// (the API tells no other), as a session this conch mcp made is made again
// in its own: it started in conch mcp's directory.
func TestAdoptedSessionCwd(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	first := startMCP(t, env, "--url", d.URL())
	first.run(map[string]any{"command": "true", "session": "w", "cwd": dir})
	first.close()
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	c.run(map[string]any{"command": "exit", "session": "w"})
	c.toolError("run", map[string]any{"command": "true", "session": "w"}) // told it ended
	r, text := c.run(map[string]any{"command": "pwd", "session": "w"})
	require.Equal(t, dir+"\n", r.Output, text)
}

// TestAdoptedSessionEnv: the daemon's running session of a name, made with
// environment variables and a leased port, is made again once it has ended
// (its shell exited, or it was deleted behind conch mcp's back) with a
// leased port, which the daemon tells, and without the variables, which it
// does not: the tool error and the answer of the run that makes it say so,
// rather than the run going on without them unsaid.
func TestAdoptedSessionEnv(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	made, err := d.CreateSession(t.Context(), client.SessionOptions{Name: "e", Env: map[string]string{"FOO": "bar"}, LeasePort: true})
	require.NoError(t, err)
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	r, text := c.run(map[string]any{"command": "echo FOO=$FOO", "session": "e"})
	require.Equal(t, "FOO=bar\n", r.Output, text)
	require.Contains(t, r.Note, "the daemon's running session", text)
	for i, end := range []func(){
		func() { c.run(map[string]any{"command": "exit", "session": "e"}) },
		func() { require.NoError(t, d.DeleteSession(t.Context(), made.ID)) },
	} {
		if i > 0 {
			// The daemon's session again, taken as the first was.
			c.ok("close_session", map[string]any{"session": "e"}, &mcpserver.CloseOutput{})
			made, err = d.CreateSession(t.Context(), client.SessionOptions{Name: "e", Env: map[string]string{"FOO": "bar"}, LeasePort: true})
			require.NoError(t, err)
			r, text = c.run(map[string]any{"command": "echo FOO=$FOO", "session": "e"})
			require.Equal(t, "FOO=bar\n", r.Output, text)
		}
		end()
		text = c.toolError("run", map[string]any{"command": "true", "session": "e"}) // told it ended
		require.Contains(t, text, "without the environment variables", "ending %d", i)
		r, text = c.run(map[string]any{"command": "echo FOO=$FOO", "session": "e"})
		require.Equal(t, "FOO=\n", r.Output, text)
		require.Contains(t, r.Note, "made again", text)
		require.Contains(t, r.Note, "without the environment variables the daemon's session was created with", text)
		again := running(t, d, "e")
		require.Len(t, again, 1)
		require.Len(t, again[0].Ports, 1, "made again with a leased port")
		// Made again by conch mcp, the session lacks nothing it had: the
		// next one made after it says nothing of variables.
		c.run(map[string]any{"command": "exit", "session": "e"})
		text = c.toolError("run", map[string]any{"command": "true", "session": "e"})
		require.NotContains(t, text, "environment variables")
		r, text = c.run(map[string]any{"command": "true", "session": "e"})
		require.NotContains(t, r.Note, "environment variables", text)
	}
}
