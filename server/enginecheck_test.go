package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// The engine checks a request's fields and the server maps its
// invalid-argument errors to 400 in one place: each of these reaches the
// engine (no server check stands before it) and comes back as bad input.
func TestEngineChecksAreBadRequests(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for name, body := range map[string]string{
		"argv with shell": `{"argv": ["true"], "shell": "bash"}`,
		"argv with login": `{"argv": ["true"], "login": true}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			status, resp := d.raw(t, "POST", "/v1/processes", body, authed())
			require.Equal(t, http.StatusBadRequest, status, resp)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		})
	}
	t.Run("session relative cwd", func(t *testing.T) {
		t.Parallel()
		status, resp := d.raw(t, "POST", "/v1/sessions", `{"cwd": "."}`, authed())
		require.Equal(t, http.StatusBadRequest, status, resp)
		require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
	})
	t.Run("command fields", func(t *testing.T) {
		t.Parallel()
		status, resp := d.raw(t, "POST", "/v1/sessions", `{}`, authed())
		require.Equal(t, http.StatusCreated, status, resp)
		var sess client.Process
		require.NoError(t, json.Unmarshal([]byte(resp), &sess))
		for _, body := range []string{`{"cmd": "true", "stdin": "half"}`, `{"cmd": "true", "keepLogs": "forever"}`} {
			status, resp := d.raw(t, "POST", "/v1/sessions/"+sess.ID+"/commands", body, authed())
			require.Equal(t, http.StatusBadRequest, status, resp)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		}
	})
}

// A PTY with nothing to run is a terminal on the shell itself: the engine
// resolves the shell once and shows it as the process's argv.
func TestPTYShellItself(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	status, resp := d.raw(t, "POST", "/v1/processes", `{"kind": "pty", "shell": "dash"}`, authed())
	require.Equal(t, http.StatusCreated, status, resp)
	var p client.Process
	require.NoError(t, json.Unmarshal([]byte(resp), &p))
	require.NotEmpty(t, p.Argv)
	require.Contains(t, p.Argv[0], "dash")
	require.Empty(t, p.ShellCommand)
	status, resp = d.raw(t, "DELETE", "/v1/processes/"+p.ID, "", authed())
	require.Equal(t, http.StatusNoContent, status, resp)
}
