package server_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// do sends a request with the test token and header, and returns the
// answer, its body read.
func (d *daemon) do(t *testing.T, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	h := authed()
	for k, v := range header {
		h[k] = v
	}
	return d.send(t, method, path, "", h)
}

func TestWrongMethod(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	tests := []struct{ method, path, allow string }{
		{"PUT", "/v1/processes", "GET, HEAD, POST"},
		{"DELETE", "/v1/processes", "GET, HEAD, POST"},
		{"PUT", "/v1/processes/run", "GET, HEAD, POST, DELETE"},
		{"POST", "/v1/processes/p1", "GET, HEAD, DELETE"},
		{"PATCH", "/v1/processes/p1/kill", "POST"},
		{"POST", "/v1/processes/p1/wait", "GET, HEAD"},
		{"DELETE", "/v1/processes/p1/logs/stream", "GET, HEAD"},
		{"GET", "/v1/processes/p1/stdin", "POST"},
		{"POST", "/v1/processes/p1/attach", "GET, HEAD"},
		{"PUT", "/v1/sessions/s1", "GET, HEAD, DELETE"},
		{"GET", "/v1/sessions/s1/commands", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			resp, body := d.do(t, tt.method, tt.path, nil)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
			require.Equal(t, tt.allow, resp.Header.Get("Allow"))
			require.Equal(t, client.CodeUnsupportedOperation, errorCode(t, body))
		})
	}
	t.Run("no such path", func(t *testing.T) {
		t.Parallel()
		resp, body := d.do(t, "PUT", "/v1/nothing", nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
		require.Empty(t, resp.Header.Get("Allow"))
		require.Equal(t, client.CodeNotFound, errorCode(t, body))
	})
}

// TestEmptySegment: a path with an id left empty, or a "." or ".."
// segment, is no route, answered as the API answers one (404 JSON) rather
// than redirected to the path cleaned, with an HTML body.
func TestEmptySegment(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/processes//wait"},
		{"GET", "/v1/processes//logs"},
		{"POST", "/v1/processes//kill"},
		{"DELETE", "/v1/sessions//"},
		{"POST", "/v1/sessions//commands"},
		{"GET", "/v1/processes/./p1"},
		{"GET", "/v1/sessions/../processes"},
		{"GET", "//healthz"},
	} {
		resp, body := d.do(t, tt.method, tt.path, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s: %s", tt.method, tt.path, body)
		require.Empty(t, resp.Header.Get("Location"))
		require.Equal(t, client.CodeNotFound, errorCode(t, body), "%s %s", tt.method, tt.path)
	}
	resp, body := d.send(t, "GET", "/v1/processes//wait", "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token is asked for first: %s", body)
}

func TestListBadCursor(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	d.run(t, client.StartOptions{Cmd: "true"})
	for _, cursor := range []string{"garbage", "zzzzzz", "99999999"} {
		resp, body := d.do(t, "GET", "/v1/processes?cursor="+cursor, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", cursor, body)
		require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
	}
	list, err := d.c.List(ctx(t), client.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	_, err = d.c.List(ctx(t), client.ListOptions{Cursor: "0"})
	require.NoError(t, err, "a cursor from before the first process is one")
}

func TestAttachWithoutUpgrade(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Kind: process.KindPTY, Cmd: "sleep 300"})
	require.NoError(t, err)
	path := "/v1/processes/" + p.ID + "/attach"

	resp, body := d.do(t, "GET", path, nil)
	require.Equal(t, http.StatusUpgradeRequired, resp.StatusCode, body)
	require.Equal(t, "websocket", resp.Header.Get("Upgrade"))
	require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))

	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}
	resp, body = d.do(t, "GET", path, upgrade)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Equal(t, "13", resp.Header.Get("Sec-WebSocket-Version"))
	require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))

	upgrade.Set("Sec-WebSocket-Version", "13")
	upgrade.Set("Sec-WebSocket-Key", "short")
	resp, body = d.do(t, "GET", path, upgrade)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
}

// TestAttachPings pins that an idle attachment is pinged, and that a client
// that does not answer is let go rather than held forever.
func TestAttachPings(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetHeartbeat(d.srv, 20*time.Millisecond)
	p, err := d.c.Start(ctx(t), client.StartOptions{Kind: process.KindPTY, Cmd: "sleep 300"})
	require.NoError(t, err)

	conn := d.dial(t)
	fmt.Fprintf(conn, "GET /v1/processes/%s/attach HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", p.ID, d.addr, testToken)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)

	// The client never answers: a ping comes, then the server closes.
	var ops []byte
	for {
		op, err := readFrame(br)
		if err != nil {
			require.ErrorIs(t, err, io.EOF, "the server ends the connection")
			break
		}
		ops = append(ops, op)
		if op == 0x8 {
			break // close
		}
	}
	require.Contains(t, ops, byte(0x9), "opcodes seen: %v", ops)
}

// readFrame reads one unmasked WebSocket frame and returns its opcode.
func readFrame(br *bufio.Reader) (byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
		return 0, err
	}
	return h[0] & 0x0f, nil
}

// TestContentEncodingRefused: a body sent with a content coding is 415,
// since the daemon decodes none: a gzipped stdin write reached the
// process as the compressed bytes, and a JSON body labelled gzip ran as
// the daemon read it, not as a proxy that decodes it would. identity is
// no coding.
func TestContentEncodingRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "cat", Stdin: process.StdinOpen})
	require.NoError(t, err)
	gzip := func() http.Header {
		h := authed()
		h.Set("Content-Encoding", "gzip")
		return h
	}
	status, body := d.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin", "as sent\n", gzip())
	require.Equal(t, http.StatusUnsupportedMediaType, status, body)
	require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
	status, body = d.raw(t, "POST", "/v1/processes", `{"cmd":"true","name":"gzipped"}`, gzip())
	require.Equal(t, http.StatusUnsupportedMediaType, status, body)

	identity := authed()
	identity.Set("Content-Encoding", "identity")
	status, body = d.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin?eof=true", "plain\n", identity)
	require.Equal(t, http.StatusNoContent, status, body)
	_, _, err = d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
	require.NoError(t, err)
	var out string
	for _, f := range page.Items {
		out += f.Data
	}
	require.Equal(t, "plain\n", out, "only the write without a coding reached stdin")
	list, err := d.c.List(c, client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "the gzipped start started nothing")

	// A route that takes no body reads none, and never refuses one: a
	// GET sent a body with a coding is answered, a DELETE of an unknown
	// id is 404.
	status, body = d.raw(t, "GET", "/v1/sessions", "xx", gzip())
	require.Equal(t, http.StatusOK, status, body)
	status, body = d.raw(t, "DELETE", "/v1/processes/nonexistent", "xx", gzip())
	require.Equal(t, http.StatusNotFound, status, body)
}
