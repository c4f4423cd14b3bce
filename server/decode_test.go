package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// errorMessage decodes the message of an API error body.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &env), "body: %s", body)
	return env.Error.Message
}

// TestStrictBodies pins that a body means one thing: keys match field names
// exactly and no object repeats a key, so that a proxy that checks bodies
// sees the command that runs.
func TestStrictBodies(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	tests := []struct {
		name, method, path, body string
		want                     string // in the error message
	}{
		{"other case beside the field", "POST", "/v1/processes", `{"cmd":"true","CMD":"echo x"}`, `"CMD"`},
		{"other case alone", "POST", "/v1/processes", `{"Cmd":"true"}`, `did you mean "cmd"`},
		{"duplicate field", "POST", "/v1/processes/run", `{"cmd":"true","cmd":"echo x"}`, `duplicate field "cmd"`},
		{"duplicate argv", "POST", "/v1/processes", `{"argv":["true"],"argv":["false"]}`, `duplicate field "argv"`},
		{"embedded field in other case", "POST", "/v1/processes/run", `{"cmd":"true","Timeout":5}`, `"Timeout"`},
		{"nested field in other case", "POST", "/v1/processes", `{"kind":"pty","terminal":{"cols":80,"Rows":24}}`, `"terminal.Rows"`},
		{"nested duplicate", "POST", "/v1/processes", `{"kind":"pty","terminal":{"cols":80,"rows":24,"cols":9}}`, `"terminal.cols"`},
		{"duplicate env key", "POST", "/v1/processes", `{"cmd":"true","env":{"A":"1","A":"2"}}`, `env: duplicate key "A"`},
		{"session field in other case", "POST", "/v1/sessions", `{"Shell":"bash"}`, `"Shell"`},
		{"session duplicate env key", "POST", "/v1/sessions", `{"env":{"X":"1","X":"2"}}`, `env: duplicate key "X"`},
		{"command in other case", "POST", "/v1/sessions/" + s.ID + "/commands", `{"cmd":"true","CMD":"echo x"}`, `"CMD"`},
		{"command duplicate", "POST", "/v1/sessions/" + s.ID + "/commands/run", `{"cmd":"true","cmd":"echo x"}`, `duplicate field "cmd"`},
		{"kill in other case", "POST", "/v1/processes/" + s.ID + "/kill", `{"Signal":"KILL"}`, `"Signal"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := d.raw(t, tt.method, tt.path, tt.body, authed())
			require.Equal(t, http.StatusBadRequest, status, body)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
			require.Contains(t, errorMessage(t, body), tt.want)
		})
	}
	t.Run("env keys that differ in case are two variables", func(t *testing.T) {
		t.Parallel()
		status, body := d.raw(t, "POST", "/v1/processes/run",
			`{"cmd":"echo $conch_v $CONCH_V","env":{"conch_v":"a","CONCH_V":"b"}}`, authed())
		require.Equal(t, http.StatusOK, status, body)
		var r client.RunResult
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		require.Equal(t, "a b\n", r.Stdout)
	})
}
