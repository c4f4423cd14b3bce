package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
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

// TestBodyValuesNameTheirField: a value of the wrong JSON type, or out of
// its field's range, is refused naming the field by its path, in every
// body and at every depth. A duration the API types decode themselves
// (api.Millis) was refused as "milliseconds out of range: -1", and an
// argv or env element as "Go struct field StartOptions.argv", neither
// saying which value was wrong.
func TestBodyValuesNameTheirField(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	proc, cmds, kill := "/v1/processes/"+s.ID, "/v1/sessions/"+s.ID+"/commands", "/v1/processes/"+s.ID+"/kill"
	tests := []struct {
		path, body string
		want       string // the error message's end
	}{
		{"/v1/processes/run", `{"cmd":"true","executionTimeout":"5s"}`, `field "executionTimeout": want a number of milliseconds, got a string`},
		{"/v1/processes/run", `{"cmd":"true","idleTimeout":-1}`, `field "idleTimeout": want a number of milliseconds from 0 to 9223372036854, got -1`},
		{"/v1/processes/run", `{"cmd":"true","timeout":1e300}`, `field "timeout": want a number of milliseconds from 0 to 9223372036854, got 1e300`},
		{"/v1/processes/run", `{"cmd":"true","timeout":1e400}`, `field "timeout": want a number of milliseconds from 0 to 9223372036854, got 1e400`},
		{"/v1/processes/run", `{"cmd":"true","timeout":{"ms":5}}`, `field "timeout": want a number of milliseconds, got an object`},
		{"/v1/processes/run", `{"cmd":"true","timeout":1` + strings.Repeat("0", 100) + `}`, `got 1000000000000000000000000000000000000000...`},
		{"/v1/processes", `{"cmd":"true","executionTimeout":true}`, `field "executionTimeout": want a number of milliseconds, got a boolean`},
		{"/v1/processes/run", `{"cmd":true}`, `field "cmd": want a string, got true`},
		{"/v1/processes/run", `{"cmd":"true","plain":"yes"}`, `field "plain": want true or false, got a string`},
		{"/v1/processes/run", `{"cmd":"true","outputLimit":1.5}`, `field "outputLimit": want an integer, got 1.5`},
		{"/v1/processes", `{"cmd":"true","keepLogs":5}`, `field "keepLogs": want a string, got a number`},
		{"/v1/processes", `{"cmd":"true","stdin":{}}`, `field "stdin": want a string, got an object`},
		{"/v1/processes", `{"kind":"pty","terminal":{"cols":80,"rows":"24"}}`, `field "terminal.rows": want an integer, got a string`},
		{"/v1/processes", `{"kind":"pty","terminal":{"cols":70000,"rows":24}}`, `field "terminal.cols": want an integer from 0 to 65535, got 70000`},
		{"/v1/processes", `{"kind":"pty","terminal":[80,24]}`, `field "terminal": want an object, got an array`},
		{"/v1/processes", `{"kind":"pty","terminal":{"cols":80}}`, `terminal size 80x0: cols and rows must be positive`},
		{"/v1/processes", `{"kind":"pty","terminal":{}}`, `terminal size 0x0: cols and rows must be positive`},
		{"/v1/processes", `{"argv":"true"}`, `field "argv": want an array, got a string`},
		{"/v1/processes", `{"argv":["true",1]}`, `field "argv[1]": want a string, got a number`},
		{"/v1/processes", `{"cmd":"true","env":{"A":"1","B":null,"C":false}}`, `field "env.C": want a string, got false`},
		{"/v1/processes", `{"cmd":"true","limits":{"pids":"5"}}`, `field "limits.pids": want an integer, got a string`},
		{"/v1/processes", `[]`, `want an object, got an array`},
		{"/v1/sessions", `{"leasePort":"yes"}`, `field "leasePort": want true or false, got a string`},
		{"/v1/sessions", `{"env":{"X":1}}`, `field "env.X": want a string, got a number`},
		// null is an absent field, not an absent element: encoding/json
		// made it an empty argument.
		{"/v1/processes", `{"argv":["echo",null]}`, `field "argv[1]": want a string, got null`},
		{"/v1/sessions", `{"limits":{"memoryBytes":-1e3}}`, `field "limits.memoryBytes": want an integer, got -1e3`},
		{cmds, `{"cmd":"true","executionTimeout":"5s"}`, `field "executionTimeout": want a number of milliseconds, got a string`},
		{cmds, `{"cmd":["true"]}`, `field "cmd": want a string, got an array`},
		{cmds + "/run", `{"cmd":"true","timeout":-1}`, `field "timeout": want a number of milliseconds from 0 to 9223372036854, got -1`},
		{cmds + "/run", `{"cmd":"true","idleTimeout":"1s"}`, `field "idleTimeout": want a number of milliseconds, got a string`},
		{kill, `{"escalateAfter":"1s"}`, `field "escalateAfter": want a number of milliseconds, got a string`},
		{kill, `{"signal":9}`, `field "signal": want a string, got a number`},
		{proc + "/interact", `{"timeout":"1s"}`, `field "timeout": want a number of milliseconds, got a string`},
		{proc + "/interact", `{"eof":"yes"}`, `field "eof": want true or false, got a string`},
		{proc + "/resize", `{"cols":-1,"rows":24}`, `field "cols": want an integer from 0 to 65535, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.body, func(t *testing.T) {
			t.Parallel()
			status, body := d.raw(t, "POST", tt.path, tt.body, authed())
			require.Equal(t, http.StatusBadRequest, status, body)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
			require.True(t, strings.HasSuffix(errorMessage(t, body), tt.want), "message %q, want it to end %q", errorMessage(t, body), tt.want)
		})
	}
	// What encoding/json takes is still taken: null for any field, a
	// fraction of a millisecond, -0.
	for _, tt := range []struct{ path, body string }{
		{"/v1/processes/run", `{"cmd":"true","executionTimeout":null,"idleTimeout":null,"argv":null,"env":null,"limits":null,"plain":null,"outputLimit":null,"kind":null,"stdin":null}`},
		{"/v1/processes/run", `{"cmd":"true","executionTimeout":60000.5,"timeout":30000,"outputLimit":-0}`},
		{"/v1/processes/run", `{"cmd":"true","env":{"A":null},"limits":{"pids":null}}`},
		{cmds + "/run", `{"cmd":"true","executionTimeout":null,"timeout":0.5e5}`},
	} {
		t.Run("taken "+tt.path+" "+tt.body, func(t *testing.T) {
			status, body := d.raw(t, "POST", tt.path, tt.body, authed())
			require.Equal(t, http.StatusOK, status, body)
		})
	}
}
