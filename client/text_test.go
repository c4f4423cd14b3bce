package client

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotTextRefused: a command, argument, environment value or cwd that is
// not UTF-8 is refused before anything is sent, naming where it is; it once
// went out with U+FFFD in place of its bytes (printf '\xff' printed ef bf bd).
func TestNotTextRefused(t *testing.T) {
	t.Parallel()
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"p"}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "t")
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	for _, tt := range []struct {
		opts StartOptions
		at   string
	}{
		{StartOptions{Cmd: "printf '\xff'"}, "cmd"},
		{StartOptions{Argv: []string{"printf", "\xfe"}}, "argv[1]"},
		{StartOptions{Cmd: "true", Env: map[string]string{"V": "a\xffb"}}, "env.V"},
		{StartOptions{Cmd: "true", Cwd: "/tmp/d\xff"}, "cwd"},
		{StartOptions{Cmd: "true", Env: map[string]string{"K\xff": "v"}}, `env."K\xff"`},
		{StartOptions{Cmd: "printf '\ufffd \\ufffd \xff'"}, "cmd"}, // beside U+FFFD and its escape's text
	} {
		_, err := c.Start(t.Context(), tt.opts)
		var ce *Error
		require.ErrorAs(t, err, &ce, tt.at)
		require.Equal(t, CodeInvalidArgument, ce.Code)
		require.Contains(t, ce.Message, tt.at+" is not UTF-8")
	}
	require.Zero(t, sent.Load(), "nothing was sent")
	_, err = c.Start(t.Context(), StartOptions{Cmd: "printf 'é'", Env: map[string]string{"V": "ü"}})
	require.NoError(t, err, "UTF-8 text goes")
	require.Equal(t, int32(1), sent.Load())
	// So do U+FFFD itself and the text of its JSON escape.
	_, err = c.Start(t.Context(), StartOptions{Cmd: "printf '\ufffd \\ufffd'", Env: map[string]string{"\ufffd": "\\ufffd"}})
	require.NoError(t, err, "U+FFFD and \\ufffd go")
	require.Equal(t, int32(2), sent.Load())
}

// TestErrorNotTheDaemons: an error answer that is not the daemon's JSON (a
// proxy's 502 page, an empty 503) says its status, where it said only
// "internal".
func TestErrorNotTheDaemons(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusBadGateway, "<html>bad gateway</html>", "HTTP 502 Bad Gateway, an answer that is not the daemon's: <html>bad gateway</html>"},
		{http.StatusServiceUnavailable, "", "HTTP 503 Service Unavailable, an answer that is not the daemon's"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			w.Write([]byte(tt.body))
		}))
		c, err := New(srv.URL, "t")
		require.NoError(t, err)
		_, err = c.Get(t.Context(), "x")
		require.ErrorContains(t, err, tt.want)
		c.CloseIdleConnections()
		srv.Close()
	}
}
