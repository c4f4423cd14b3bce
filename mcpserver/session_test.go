package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/mcpserver"
)

// TestSlowSessionHoldsNoOtherCall creates a code context whose interpreter
// takes seconds to start (its sitecustomize sleeps): list and a run in
// another session are answered meanwhile, where the creation held the
// server's lock, and every other call with it, until it was done.
func TestSlowSessionHoldsNoOtherCall(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	dir := t.TempDir()
	started, done := filepath.Join(dir, "started"), filepath.Join(dir, "done")
	site := fmt.Sprintf("import pathlib, time\npathlib.Path(%q).touch()\ntime.sleep(6)\npathlib.Path(%q).touch()\n", started, done)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte(site), 0o644))
	c := startMCP(t, append(env, "PYTHONPATH="+dir))
	defer c.close()
	c.run(map[string]any{"command": "true"}) // the session main exists
	slow := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run",
			Arguments: map[string]any{"command": "1+1", "session": "py", "language": "python"}})
		slow <- err
	}()
	waitFile(t, started)
	var l mcpserver.ListOutput
	c.ok("list", nil, &l)
	r, _ := c.run(map[string]any{"command": "echo fast"})
	require.Equal(t, "fast\n", r.Output)
	_, err := os.Stat(done)
	require.True(t, os.IsNotExist(err), "list and a run in another session waited for a session's creation")
	require.NoError(t, <-slow)
	r, _ = c.run(map[string]any{"command": "6*7", "session": "py"})
	require.Equal(t, "42\n", r.Output)
}
