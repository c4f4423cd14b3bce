package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// TestErrorMessageSaysCodeOnce: the code says what kind of error it is, so
// the message does not say it again; clients that print both (the CLI, the
// MCP tools) say each thing once.
func TestErrorMessageSaysCodeOnce(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	_, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "true", Cwd: "relative/dir"})
	var ae *client.Error
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, client.CodeInvalidArgument, ae.Code)
	require.Contains(t, ae.Message, `cwd "relative/dir" is not an absolute path`)
	require.False(t, strings.HasPrefix(ae.Message, "invalid argument"), "message %q repeats the code", ae.Message)

	status, body := d.raw(t, "POST", "/v1/processes", `{"cmd":"true","shell":"fish"}`, authed())
	require.Equal(t, http.StatusBadRequest, status, body)
	require.NotContains(t, body, `"message":"invalid argument`)
}

// TestErrorMessagesClipHugeValues: a cwd, shell, language or field name of
// megabytes is refused with a message that quotes its start only. The whole
// value was quoted: the answer was megabytes long, over what the client
// reads of an error, and it said the daemon answered something not its own
// rather than invalid_argument.
func TestErrorMessagesClipHugeValues(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	huge := strings.Repeat("y", 2<<20)
	refused := func(what string, err error) {
		t.Helper()
		var ae *client.Error
		require.True(t, errors.As(err, &ae), "%s: %.300v", what, err)
		require.Equal(t, client.CodeInvalidArgument, ae.Code, "%s: %.300s", what, ae.Message)
		require.Less(t, len(ae.Message), 1024, "%s: %.300s", what, ae.Message)
		require.Contains(t, ae.Message, `yyyy"...`, what)
	}
	_, err := d.c.CreateSession(ctx(t), client.SessionOptions{Cwd: "/" + huge})
	refused("session cwd", err)
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Cwd: huge})
	refused("session relative cwd", err)
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Shell: huge})
	refused("session shell", err)
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Shell: "/" + huge + "/bash"})
	refused("session shell path", err)
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Language: huge})
	refused("session language", err)
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Language: "python", Cwd: "/" + huge})
	refused("code context cwd", err)
	_, err = d.c.Start(ctx(t), client.StartOptions{Cmd: "true", Cwd: "/" + huge})
	refused("process cwd", err)
	status, body := d.raw(t, "POST", "/v1/sessions", `{"`+huge+`":1}`, authed())
	require.Equal(t, http.StatusBadRequest, status, "%.300s", body)
	require.Less(t, len(body), 1024, "%.300s", body)
}
