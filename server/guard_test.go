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

// routes lists every route of the API with a path that reaches its handler.
var routes = []struct{ method, path string }{
	{"POST", "/v1/processes"},
	{"POST", "/v1/processes/run"},
	{"GET", "/v1/processes"},
	{"GET", "/v1/processes/p1"},
	{"DELETE", "/v1/processes/p1"},
	{"POST", "/v1/processes/p1/kill"},
	{"GET", "/v1/processes/p1/wait"},
	{"GET", "/v1/processes/p1/logs"},
	{"GET", "/v1/processes/p1/logs/stream"},
	{"POST", "/v1/processes/p1/stdin"},
	{"POST", "/v1/processes/p1/resize"},
	{"GET", "/v1/processes/p1/attach"},
	{"POST", "/v1/sessions"},
	{"GET", "/v1/sessions"},
	{"GET", "/v1/sessions/s1"},
	{"DELETE", "/v1/sessions/s1"},
	{"POST", "/v1/sessions/s1/commands"},
	{"POST", "/v1/sessions/s1/commands/run"},
	{"GET", "/v1/no-such-route"},
}

// errorCode decodes the code of an API error body.
func errorCode(t *testing.T, body string) client.Code {
	t.Helper()
	var env struct {
		Error struct {
			Code    client.Code `json:"code"`
			Message string      `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &env), "body: %s", body)
	require.NotEmpty(t, env.Error.Message, "body: %s", body)
	return env.Error.Code
}

func TestAuthOnEveryRoute(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	headers := map[string]http.Header{
		"none":         {},
		"wrong token":  {"Authorization": {"Bearer " + testToken + "x"}},
		"short token":  {"Authorization": {"Bearer " + testToken[:4]}},
		"other scheme": {"Authorization": {"Basic " + testToken}},
		"bare token":   {"Authorization": {testToken}},
	}
	for _, rt := range routes {
		for name, h := range headers {
			t.Run(rt.method+" "+rt.path+"/"+name, func(t *testing.T) {
				t.Parallel()
				status, body := d.raw(t, rt.method, rt.path, "{}", h)
				require.Equal(t, http.StatusUnauthorized, status, body)
				require.Equal(t, client.CodeUnauthenticated, errorCode(t, body))
			})
		}
	}
	t.Run("healthz needs no token", func(t *testing.T) {
		t.Parallel()
		status, body := d.raw(t, "GET", "/healthz", "", nil)
		require.Equal(t, http.StatusOK, status)
		var h client.Health
		require.NoError(t, json.Unmarshal([]byte(body), &h))
		require.Equal(t, "ok", h.Status)
		require.NotEmpty(t, h.Version)
	})
	t.Run("unknown route with the token", func(t *testing.T) {
		t.Parallel()
		status, body := d.raw(t, "GET", "/v1/no-such-route", "", authed())
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, client.CodeNotFound, errorCode(t, body))
	})
}

func TestHostAndOrigin(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{AllowedHosts: []string{"conch.internal"}})
	_, port, _ := strings.Cut(d.addr, ":")
	tests := []struct {
		name   string
		host   string
		origin string
		status int
	}{
		{"listen address", d.addr, "", http.StatusOK},
		{"localhost", "localhost:" + port, "", http.StatusOK},
		{"localhost without port", "localhost", "", http.StatusOK},
		{"other loopback", "127.0.0.2:" + port, "", http.StatusOK},
		{"ipv6 loopback", "[::1]:" + port, "", http.StatusOK},
		{"allowed host", "conch.internal:" + port, "", http.StatusOK},
		{"rebinding name", "evil.example:" + port, "", http.StatusForbidden},
		{"localhost lookalike", "localhost.evil.example:" + port, "", http.StatusForbidden},
		{"ipv6 loopback without port", "[::1]", "", http.StatusOK},
		{"upper case", "LocalHost:" + port, "", http.StatusOK},
		{"name in the port", "127.0.0.1:7191.evil.com", "", http.StatusForbidden},
		{"name in the port of localhost", "localhost:" + port + ".evil.com", "", http.StatusForbidden},
		{"unclosed bracket", "[::1", "", http.StatusForbidden},
		{"text after the bracket", "[::1]x", "", http.StatusForbidden},
		{"ipv6 without brackets", "::1", "", http.StatusForbidden},
		{"ipv4 in brackets", "[127.0.0.1]:" + port, "", http.StatusForbidden},
		{"empty port", "localhost:", "", http.StatusForbidden},
		{"port too large", "localhost:65536", "", http.StatusForbidden},
		{"port too large behind zeros", "localhost:0065536", "", http.StatusForbidden},
		{"leading zeros", "127.0.0.1:00" + port, "", http.StatusOK},
		{"signed port", "localhost:+80", "", http.StatusForbidden},
		{"two ports", "localhost:80:80", "", http.StatusForbidden},
		{"trailing dot", "localhost.:" + port, "", http.StatusForbidden},
		{"short ipv4", "127.1:" + port, "", http.StatusForbidden},
		{"allowed host in the port", "127.0.0.1:conch.internal", "", http.StatusForbidden},
		{"same origin", d.addr, "http://" + d.addr, http.StatusOK},
		{"foreign origin", d.addr, "http://evil.example", http.StatusForbidden},
		{"origin on another port", d.addr, "http://127.0.0.1:1", http.StatusForbidden},
		{"null origin", d.addr, "null", http.StatusForbidden},
		{"empty origin", d.addr, " ", http.StatusForbidden},
		{"file origin", d.addr, "file://", http.StatusForbidden},
	}
	for _, tt := range tests {
		for _, path := range []string{"/healthz", "/v1/sessions"} {
			t.Run(tt.name+path, func(t *testing.T) {
				t.Parallel()
				h := authed()
				h.Set("Host", tt.host)
				if tt.origin != "" {
					h.Set("Origin", tt.origin)
				}
				status, body := d.raw(t, "GET", path, "", h)
				require.Equal(t, tt.status, status, body)
				if status == http.StatusForbidden {
					require.Equal(t, client.CodePermissionDenied, errorCode(t, body))
				}
			})
		}
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{BodyLimit: 1024})
	big := `{"cmd": "` + strings.Repeat("x", 2048) + `"}`
	for _, path := range []string{"/v1/processes", "/v1/processes/run", "/v1/sessions"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			status, body := d.raw(t, "POST", path, big, authed())
			require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
			require.Equal(t, client.CodePayloadTooLarge, errorCode(t, body))
		})
	}
	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "cat >/dev/null", Stdin: "open"})
		require.NoError(t, err)
		err = d.c.WriteStdin(c, p.ID, []byte(big), false)
		requireCode(t, err, client.CodePayloadTooLarge)
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("small"), true))
		r, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, 0, exitCode(t, *r))
	})
}

func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	bodies := map[string]string{
		"not json":         `cmd=true`,
		"truncated":        `{"cmd": "true"`,
		"unknown field":    `{"cmd": "true", "cmdd": "x"}`,
		"wrong type":       `{"cmd": 3}`,
		"negative timeout": `{"cmd": "true", "executionTimeout": -1}`,
		"two values":       `{"cmd": "true"} {}`,
		"unknown kind":     `{"cmd": "true", "kind": "vm"}`,
		"unknown stdin":    `{"cmd": "true", "stdin": "half"}`,
		"unknown keepLogs": `{"cmd": "true", "keepLogs": "forever"}`,
		"cmd and argv":     `{"cmd": "true", "argv": ["true"]}`,
		"nothing to run":   `{}`,
		"relative cwd":     `{"cmd": "true", "cwd": "no/such/dir"}`,
		"missing cwd":      `{"cmd": "true", "cwd": "/no/such/dir"}`,
		"not a shell":      `{"cmd": "true", "shell": "python3"}`,
		"terminal on exec": `{"cmd": "true", "terminal": {"cols": 80, "rows": 24}}`,
	}
	for name, body := range bodies {
		for _, path := range []string{"/v1/processes", "/v1/processes/run"} {
			t.Run(name+path, func(t *testing.T) {
				t.Parallel()
				status, resp := d.raw(t, "POST", path, body, authed())
				require.Equal(t, http.StatusBadRequest, status, resp)
				require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
			})
		}
	}
	sessionBodies := map[string]string{
		"unknown field": `{"shell": "bash", "leasePorts": true}`,
		"not a shell":   `{"shell": "fish"}`,
		"shell path":    `{"shell": "/usr/bin/python3"}`,
		"missing cwd":   `{"cwd": "/no/such/dir"}`,
		"malformed":     `{"shell": }`,
	}
	for name, body := range sessionBodies {
		t.Run("session "+name, func(t *testing.T) {
			t.Parallel()
			status, resp := d.raw(t, "POST", "/v1/sessions", body, authed())
			require.Equal(t, http.StatusBadRequest, status, resp)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		})
	}
	t.Run("list filters", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{"state=done", "kind=vm", "pid=x", "limit=-1", "cursor=!"} {
			status, resp := d.raw(t, "GET", "/v1/processes?"+q, "", authed())
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", q, resp)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		}
	})
}

func TestUnknownIDs(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, rt := range routes {
		if !strings.Contains(rt.path, "/p1") && !strings.Contains(rt.path, "/s1") {
			continue
		}
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			t.Parallel()
			status, body := d.raw(t, rt.method, rt.path, `{}`, authed())
			require.Equal(t, http.StatusNotFound, status, body)
			require.Equal(t, client.CodeNotFound, errorCode(t, body))
		})
	}
}
