package server_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/server"
)

// TestUnpassableStrings pins that what execve cannot pass as asked is bad
// input, refused before anything starts: not a 500, not a process that
// fails, not an env key that sets another variable.
func TestUnpassableStrings(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	bodies := map[string]string{
		"NUL in cmd":          `{"cmd":"echo a\u0000b"}`,
		"NUL in argv":         `{"argv":["echo","a\u0000b"]}`,
		"NUL in argv[0]":      `{"argv":["ec\u0000ho"]}`,
		"NUL in an env value": `{"cmd":"true","env":{"A":"x\u0000y"}}`,
		"NUL in an env key":   `{"cmd":"true","env":{"A\u0000B":"x"}}`,
		"empty env key":       `{"cmd":"true","env":{"":"x"}}`,
		"= in an env key":     `{"cmd":"echo $PATH","env":{"PATH=/evil:/usr/bin:/bin":"x"}}`,
	}
	sessionBodies := map[string]string{
		"NUL in an env value": `{"env":{"A":"x\u0000y"}}`,
		"empty env key":       `{"env":{"":"x"}}`,
		"= in an env key":     `{"env":{"PATH=/evil:/usr/bin:/bin":"x"}}`,
		// A code context's env was passed on unchecked: "CONCH_DAEMON=evil"
		// replaced the daemon's instance mark, an empty name was taken, and
		// a NUL was 500 internal.
		"code context: NUL in an env value": `{"language":"python","env":{"A":"x\u0000y"}}`,
		"code context: NUL in an env key":   `{"language":"python","env":{"A\u0000B":"x"}}`,
		"code context: empty env key":       `{"language":"python","env":{"":"x"}}`,
		"code context: = in an env key":     `{"language":"python","env":{"CONCH_DAEMON=evil":""}}`,
	}
	t.Run("refused", func(t *testing.T) { refuseAll(t, d, bodies, sessionBodies) })
	list, err := d.c.List(ctx(t), client.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "nothing was started")
}

// refuseAll posts every body, in parallel, and wants each refused as bad
// input.
func refuseAll(t *testing.T, d *daemon, bodies, sessionBodies map[string]string) {
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
	for name, body := range sessionBodies {
		t.Run("session "+name, func(t *testing.T) {
			t.Parallel()
			status, resp := d.raw(t, "POST", "/v1/sessions", body, authed())
			require.Equal(t, http.StatusBadRequest, status, resp)
			require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		})
	}
}

// TestNameBounded: a name over server.MaxNameBytes is refused wherever one
// is given (a process, a run, a session, a command); one at the bound is
// kept whole. Names are held in records and listings outside every budget:
// 20 processes named with 15 MiB each took the daemon from 65 to 474 MB.
func TestNameBounded(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	long, most := strings.Repeat("n", server.MaxNameBytes+1), strings.Repeat("n", server.MaxNameBytes)
	sess, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	for name, call := range map[string]func(name string) error{
		"process": func(name string) error {
			_, err := d.c.Start(c, client.StartOptions{Cmd: "true", Name: name})
			return err
		},
		"run": func(name string) error {
			_, _, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "true", Name: name}})
			return err
		},
		"session": func(name string) error {
			s, err := d.c.CreateSession(c, client.SessionOptions{Name: name})
			if err == nil {
				require.Equal(t, name, s.Name)
				require.NoError(t, d.c.DeleteSession(c, s.ID))
			}
			return err
		},
		"command": func(name string) error {
			_, err := d.c.Submit(c, sess.ID, client.CommandOptions{Cmd: "true", Name: name})
			return err
		},
	} {
		err := call(long)
		var ce *client.Error
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		require.Equal(t, client.CodeInvalidArgument, ce.Code, name)
		require.Contains(t, ce.Message, "name is 1025 bytes", name)
		require.NoError(t, call(most), name)
	}
}

// TestEnvOverTheKernelsBound: a session or code context whose environment
// the kernel refuses (E2BIG) is 400 invalid_argument, not 500 internal.
func TestEnvOverTheKernelsBound(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	big := map[string]string{"BIG": strings.Repeat("e", 256<<10)}
	for _, opts := range []client.SessionOptions{{Env: big}, {Env: big, Language: "python"}} {
		_, err := d.c.CreateSession(ctx(t), opts)
		var ce *client.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Equal(t, client.CodeInvalidArgument, ce.Code, "%v", err)
		require.Contains(t, ce.Message, "argument list too long")
	}
}

// TestCommandBodyGivesTheCommand: a session command or cell whose body
// names neither cmd nor code (no body, `{}`, `null`, `"cmd": null`) is
// refused, where it ran as an empty command and answered exit 0; an empty
// cmd, sent on purpose, still runs, from a raw body and from the Go client.
func TestCommandBodyGivesTheCommand(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	sh, py := shellAndPython(t, d)
	for _, s := range []struct{ id, want string }{{sh.ID, "give the command as cmd"}, {py.ID, "give the cell as code"}} {
		for _, route := range []string{"/commands", "/commands/run"} {
			for _, body := range []string{"", " ", "{}", "null", `{"cmd":null}`, `{"code":null}`, `{"name":"n"}`} {
				status, resp := d.raw(t, "POST", "/v1/sessions/"+s.id+route, body, authed())
				require.Equal(t, http.StatusBadRequest, status, "%s %q: %s", route, body, resp)
				require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
				require.Contains(t, resp, s.want)
			}
		}
	}
	status, resp := d.raw(t, "POST", "/v1/sessions/"+sh.ID+"/commands/run", `{"cmd":""}`, authed())
	require.Equal(t, http.StatusOK, status, resp)
	require.Contains(t, resp, `"exitCode":0`)
	status, resp = d.raw(t, "POST", "/v1/sessions/"+py.ID+"/commands/run", `{"code":""}`, authed())
	require.Equal(t, http.StatusOK, status, resp)
	r, _, err := d.c.RunCommand(c, sh.ID, client.CommandRunOptions{})
	require.NoError(t, err, "the Go client's empty command")
	require.Equal(t, 0, *r.ExitCode)
	r, _, err = d.c.RunCommand(c, py.ID, client.CommandRunOptions{})
	require.NoError(t, err, "the Go client's empty cell")
	require.NotNil(t, r.ExitCode)
	list, err := d.c.List(ctx(t), client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 6, "two sessions and four empty commands; nothing from the refused bodies")
}

// TestCommandBodyGivesTheOtherField: a shell session refuses a body that
// gives code, whatever its value, as docs/api.md says of code to a shell
// session: `{"code": ""}` ran an empty command (200, exit 0), and
// `{"cmd": ..., "code": ""}` ran cmd, the field the caller named unread. A
// null code is no field. A code context refuses a cmd that holds a
// command, and takes the empty one the Go client sends beside each cell.
func TestCommandBodyGivesTheOtherField(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	sh, py := shellAndPython(t, d)
	for _, tc := range []struct {
		session, body string
		status        int
	}{
		{sh.ID, `{"code":""}`, http.StatusBadRequest},
		{sh.ID, `{"cmd":"true","code":""}`, http.StatusBadRequest},
		{sh.ID, `{"code":"","cmd":"true"}`, http.StatusBadRequest},
		{sh.ID, `{"cmd":"true","code":"print(1)"}`, http.StatusBadRequest},
		{sh.ID, `{"cmd":"true","code":null}`, http.StatusOK},
		{py.ID, `{"code":"1","cmd":"true"}`, http.StatusBadRequest},
		{py.ID, `{"cmd":"true"}`, http.StatusBadRequest},
		{py.ID, `{"code":"1","cmd":""}`, http.StatusOK},
		{py.ID, `{"code":"1","cmd":null}`, http.StatusOK},
	} {
		for _, route := range []string{"/commands", "/commands/run"} {
			status, resp := d.raw(t, "POST", "/v1/sessions/"+tc.session+route, tc.body, authed())
			want := tc.status
			if want == http.StatusOK && route == "/commands" {
				want = http.StatusCreated
			}
			require.Equal(t, want, status, "%s %s: %s", route, tc.body, resp)
			if want == http.StatusBadRequest {
				require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
				require.Regexp(t, "send a command as cmd|send its cell as code", resp)
			}
		}
	}
}

// TestSessionWhoseShellExitsAsItStarts: a session whose shell exits before
// it is ready is refused as bad input, saying how it ended; it was answered
// 201 running (its end read as its first command's) or 500 (a write to a
// broken pipe), and nothing of it is left.
func TestSessionWhoseShellExitsAsItStarts(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	fake := filepath.Join(t.TempDir(), "zsh")
	processtest.WriteExecutable(t, fake, "#!/bin/sh\nexit 3\n")
	for range 6 {
		status, resp := d.raw(t, "POST", "/v1/sessions", `{"shell":"`+fake+`"}`, authed())
		require.Equal(t, http.StatusBadRequest, status, resp)
		require.Equal(t, client.CodeInvalidArgument, errorCode(t, resp))
		require.Contains(t, resp, "exit status 3")
	}
	list, err := d.c.List(ctx(t), client.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
}

// TestBadValuesSayWhichField: a value the daemon reads after decoding (a
// signal, stdin, a limit) is refused naming the field it came in. A kill
// names two signals and was refused `unknown signal "FOO"` for either;
// limits were refused "limits must not be negative" for any of three; and
// interact with an unknown signal on a session's own id was answered 409
// for the id, before the body was read through.
func TestBadValuesSayWhichField(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	sh, py := shellAndPython(t, d)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "cat", Stdin: "open"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	tests := []struct {
		path, body string
		want       string // in the error message
	}{
		{"/v1/processes/" + p.ID + "/kill", `{"escalateTo":"FOO","escalateAfter":100}`, `escalateTo "FOO": unknown signal`},
		{"/v1/processes/" + p.ID + "/kill", `{"signal":"BAR"}`, `signal "BAR": unknown signal`},
		{"/v1/processes/" + p.ID + "/interact", `{"input":"x\n","signal":"FOO","timeout":1}`, `signal "FOO": unknown signal`},
		{"/v1/processes/" + sh.ID + "/interact", `{"signal":"FOO","timeout":1}`, `signal "FOO": unknown signal`},
		{"/v1/processes", `{"cmd":"true","stdin":"half"}`, `stdin "half": want closed or open`},
		{"/v1/processes/run", `{"cmd":"true","stdin":"half"}`, `stdin "half": want closed or open`},
		{"/v1/sessions/" + sh.ID + "/commands", `{"cmd":"true","stdin":"half"}`, `stdin "half": want closed or open`},
		{"/v1/sessions/" + py.ID + "/commands", `{"code":"1","stdin":"half"}`, `stdin "half": want closed or open`},
		{"/v1/processes", `{"cmd":"true","limits":{"pids":-5}}`, `pids must not be negative`},
		{"/v1/processes", `{"cmd":"true","limits":{"memoryBytes":-1}}`, `memoryBytes must not be negative`},
		{"/v1/sessions", `{"limits":{"cpuMillis":-1}}`, `cpuMillis must not be negative`},
		// 0 is taken (the default): the refusal said "want a positive number".
		{"/v1/processes/run", `{"cmd":"true","outputLimit":-1}`, `outputLimit -1: want a number of bytes, 0 or more`},
		{"/v1/processes/" + p.ID + "/interact", `{"outputLimit":-1,"timeout":1}`, `outputLimit -1: want a number of bytes, 0 or more`},
	}
	for _, tt := range tests {
		status, body := d.raw(t, "POST", tt.path, tt.body, authed())
		require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", tt.path, tt.body, body)
		require.Equal(t, client.CodeInvalidArgument, errorCode(t, body))
		require.Contains(t, errorMessage(t, body), tt.want, tt.body)
	}
	// Nothing reached cat: no signal, no input.
	info, err := d.c.Get(c, p.ID)
	require.NoError(t, err)
	require.Equal(t, "running", string(info.State))
	page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}
