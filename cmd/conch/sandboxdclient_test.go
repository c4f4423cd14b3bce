package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// The requests of agent-sandbox's Go client (clients/go/sandbox) in its
// sandboxd mode, made as it makes them: every byte of a path but letters,
// digits and -_.~ percent-encoded, "/" too ("." and ".." whole), raw bytes
// PUT as application/octet-stream, HEAD for existence, recursive=true for
// a recursive delete, and Run as Execute of /bin/sh -c. The client module
// is not served by the module proxy these tests can reach, so its requests
// are rebuilt here.

// clientPath encodes a path as the client does.
func clientPath(p string) string {
	var b strings.Builder
	for i := range len(p) {
		c := p[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	switch b.String() {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return b.String()
}

type agentClient struct {
	t    *testing.T
	base string
	http *http.Client
	grpc sandboxdpb.ProcessServiceClient
}

func (c *agentClient) do(method, path, query string, body []byte) (int, []byte) {
	c.t.Helper()
	u := c.base + "/v1/files/" + clientPath(path)
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

// list decodes a listing as the client does.
func (c *agentClient) list(path string) []string {
	c.t.Helper()
	code, body := c.do("GET", path, "", nil)
	require.Equal(c.t, 200, code, "%s", body)
	var l struct {
		Entries []struct {
			Name, Type, Mode string
			Size             int64
			ModifiedAt       string `json:"modified_at"`
		}
	}
	require.NoError(c.t, json.Unmarshal(body, &l))
	var names []string
	for _, e := range l.Entries {
		_, err := time.Parse(time.RFC3339Nano, e.ModifiedAt)
		require.NoError(c.t, err)
		require.Contains(c.t, []string{"file", "directory"}, e.Type)
		names = append(names, e.Name+":"+e.Type+":"+e.Mode)
	}
	return names
}

func (c *agentClient) run(ctx context.Context, command string) (*sandboxdpb.ExecuteResponse, error) {
	return c.grpc.Execute(ctx, &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"/bin/sh", "-c", command}}})
}

func TestSandboxdAsAgentSandboxClient(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := startSandboxd(t, root, nil)
	c := &agentClient{t: t, base: "http://" + p.rest, http: &http.Client{Timeout: 30 * time.Second}, grpc: p.client(t)}
	defer c.http.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// Write, with parents created; Read; Exists.
	code, body := c.do("PUT", "src/notes dir/hello world.txt", "", []byte("hello\n"))
	require.Equal(t, 204, code, "%s", body)
	require.FileExists(t, filepath.Join(root, "src", "notes dir", "hello world.txt"))
	code, body = c.do("GET", "src/notes dir/hello world.txt", "", nil)
	require.Equal(t, 200, code)
	require.Equal(t, "hello\n", string(body))
	code, _ = c.do("HEAD", "src/notes dir/hello world.txt", "", nil)
	require.Equal(t, 200, code)
	code, _ = c.do("HEAD", "src/absent", "", nil)
	require.Equal(t, 404, code)

	// List, the root as "." too.
	require.Equal(t, []string{"hello world.txt:file:0644"}, c.list("src/notes dir"))
	require.Equal(t, []string{"src:directory:0755"}, c.list("."))

	// Run reads what Write wrote and writes what Read reads.
	resp, err := c.run(ctx, `cat "src/notes dir/hello world.txt"; echo made > src/made.txt; echo warn >&2; exit 4`)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(resp.GetStdout()))
	require.Equal(t, "warn\n", string(resp.GetStderr()))
	require.Equal(t, int32(4), resp.GetExitCode())
	code, body = c.do("GET", "src/made.txt", "", nil)
	require.Equal(t, 200, code)
	require.Equal(t, "made\n", string(body))

	// The errors the client decodes: {code, message}.
	for _, e := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "../etc/passwd", 403, "PERMISSION_DENIED"},
		{"GET", "..", 403, "PERMISSION_DENIED"},
		{"GET", "src/absent", 404, "NOT_FOUND"},
		{"DELETE", "src", 409, "CONFLICT"},
	} {
		code, body := c.do(e.method, e.path, "", nil)
		require.Equal(t, e.status, code, "%s %s: %s", e.method, e.path, body)
		var apiErr struct{ Code, Message string }
		require.NoError(t, json.Unmarshal(body, &apiErr))
		require.Equal(t, e.code, apiErr.Code)
		require.NotEmpty(t, apiErr.Message)
	}

	// Delete, recursive.
	code, _ = c.do("DELETE", "src", "recursive=true", nil)
	require.Equal(t, 204, code)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries)

	// A gRPC error carries its code, which the client prints.
	_, err = c.grpc.Execute(ctx, &sandboxdpb.ExecuteRequest{Config: &sandboxdpb.ProcessConfig{Command: []string{"definitely-not-a-binary"}}})
	require.Equal(t, codes.NotFound, status.Code(err))
}
