package mcpserver_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/mcpserver"
)

// TestOutputThatFitsComesWhole: output of as many bytes as the outputLimit,
// or a few fewer, comes whole, from run and from interact (the room kept
// for the line saying what was omitted cut it).
func TestOutputThatFitsComesWhole(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	for _, n := range []int{12000, 11950} {
		want := strings.Repeat("abcdefghi\n", n/10)
		r, text := c.run(map[string]any{"command": "yes abcdefghi | head -c " + strconv.Itoa(n), "outputLimit": 12000})
		require.Zero(t, r.OmittedBytes, text[:200])
		require.Equal(t, want, r.Output)

		g := newGate(t)
		r, _ = c.run(map[string]any{"command": g.wait() + "; yes abcdefghi | head -c " + strconv.Itoa(n), "timeout": 0.2})
		require.True(t, r.Running)
		g.open(t)
		var done mcpserver.Result
		c.ok("interact", map[string]any{"id": r.ID, "timeout": 60, "outputLimit": 12000}, &done)
		require.False(t, done.Running)
		require.Zero(t, done.OmittedBytes)
		require.Equal(t, want, done.Output)
	}
	// One byte more is cut, within the limit.
	r, _ := c.run(map[string]any{"command": "yes abcdefghi | head -c 12001", "outputLimit": 12000})
	require.NotZero(t, r.OmittedBytes)
	require.LessOrEqual(t, len(r.Output), 12000)
}
