package mcpserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/mcpserver"
)

// TestCharacterSplitAcrossFrames prints a character's first bytes, then
// its last one once a gate opens: the daemon sends the first bytes in a
// frame of their own meanwhile. run, interact and read_output, while the
// command runs, hold them back as they hold back an unfinished escape
// sequence, and the answers joined read the character whole. They once
// answered a U+FFFD for its first bytes and another for its rest.
func TestCharacterSplitAcrossFrames(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	g := newGate(t)
	r, _ := c.run(map[string]any{"command": `printf 'x\342\202'; ` + g.wait() + `; printf '\254y\n'`, "timeout": 0.3})
	require.True(t, r.Running, "%+v", r)
	// The daemon holds the character's first bytes back a while, then
	// sends them: wait until it has.
	ctx, cancel := contextWithGuard(t)
	defer cancel()
	for n := 0; n < 3; time.Sleep(20 * time.Millisecond) {
		require.NoError(t, ctx.Err(), "the daemon has the output before the gate")
		page, err := d.Logs(ctx, r.ID, client.LogsOptions{})
		require.NoError(t, err)
		n = 0
		for _, f := range page.Items {
			b, err := f.Bytes()
			require.NoError(t, err)
			n += len(b)
		}
	}
	var w mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "cursor": r.Next, "idleTimeout": 0.1}, &w)
	require.True(t, w.Running, "%+v", w)
	got := r.Output + w.Output
	require.Equal(t, "x", got, "no piece of the character shows while it is unfinished")

	var page mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID}, &page)
	require.True(t, page.Running, "%+v", page)
	require.Equal(t, "x", page.Output)
	require.EqualValues(t, 1, page.Bytes)

	g.open(t)
	var rest mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "cursor": w.Next, "timeout": 60}, &rest)
	require.False(t, rest.Running)
	require.Equal(t, "x€y\n", got+rest.Output, "the answers joined")

	var after mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": page.Next}, &after)
	require.Equal(t, "€y\n", after.Output, "read on from %q", page.Next)
	require.Equal(t, "x€y\n", page.Output+after.Output, "the pages joined")
}
