package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
)

// olderDaemon stands in front of the daemon d as one of before uniqueName
// would: a session asked for with it is refused as conch serve refused a
// field it did not know (400 invalid_argument, "malformed JSON body:
// unknown field ..."), and every other request goes to d. refused counts
// the refusals.
func olderDaemon(t *testing.T, d *client.Client) (u string, refused *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(d.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	refused = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/sessions" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var fields map[string]json.RawMessage
			if json.Unmarshal(body, &fields) == nil {
				if _, ok := fields["uniqueName"]; ok {
					refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"error":{"code":"invalid_argument","message":"malformed JSON body: unknown field \"uniqueName\""}}`)
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, refused
}

// TestSharedOlderDaemon: conch mcp --url in front of a daemon of before
// uniqueName, which refuses the field as it refused any it did not know,
// makes its sessions without it, as before it, and runs in them.
func TestSharedOlderDaemon(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	u, refused := olderDaemon(t, d)
	c := startMCP(t, append(env, client.EnvToken+"=mcp-test-token"), "--url", u)
	defer c.close()
	r, text := c.run(map[string]any{"command": "echo one", "session": "old"})
	require.Equal(t, "one\n", r.Output, text)
	require.NotZero(t, refused.Load(), "uniqueName was asked for first")
	r, text = c.run(map[string]any{"command": "echo two", "session": "old"})
	require.Equal(t, "two\n", r.Output, text)
	require.Len(t, running(t, d, "old"), 1)
}
