package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/mcpserver"
)

// TestReadPagesThatDoNotMoveOn: read_output over logs pages that name as
// next a cursor asked for already (frames of a byte, so that the limit is
// reached only after many) ends with an error that says so: it once paged
// for ever (with frames of no bytes).
func TestReadPagesThatDoNotMoveOn(t *testing.T) {
	t.Parallel()
	text := readOutputOf(t, func() string {
		return `{"items":[{"cursor":"1","channel":"stdout","data":"x"}],"next":"1"}`
	})
	require.Contains(t, text, "do not move on")
}

// TestReadPagesOfNewCursors: read_output over logs pages that each name a
// new cursor, their frames with no bytes (so that the limit is never
// reached), ends with an error that says so: it once paged for ever.
func TestReadPagesOfNewCursors(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	text := readOutputOf(t, func() string {
		at := strconv.FormatInt(n.Add(1), 10)
		return `{"items":[{"cursor":"` + at + `","channel":"stdout","data":""}],"next":"` + at + `"}`
	})
	require.Contains(t, text, "not the daemon's answer")
}

// readOutputOf calls read_output on a running process of a stub daemon
// that answers each logs page with page(), and returns the error it ends
// with, within a hang guard.
func readOutputOf(t *testing.T, page func() string) string {
	t.Helper()
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/processes/p":
			io.WriteString(w, `{"id":"p","kind":"exec","state":"running"}`)
		case "/v1/processes/p/logs":
			io.WriteString(w, page())
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()
	c, err := client.New(fake.URL, "token")
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(c, "test").MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_output", Arguments: map[string]any{"id": "p"}})
	require.NoError(t, err)
	require.NoError(t, ctx.Err())
	require.True(t, res.IsError)
	return res.Content[0].(*mcp.TextContent).Text
}
