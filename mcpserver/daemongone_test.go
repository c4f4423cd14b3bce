package mcpserver_test

import (
	"net"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/mcpserver"
)

// TestDaemonNotAnswering: a daemon that does not answer (none listens at
// its address) is said so, with what to look at, rather than in the
// dialer's words alone ("dial tcp ...: connection refused").
func TestDaemonNotAnswering(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c, err := client.New("http://"+addr, "token")
	require.NoError(t, err)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(c, "test").MCP().Connect(t.Context(), st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "true"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, text, "the conch daemon does not answer")
	require.Contains(t, text, "--url")
}
