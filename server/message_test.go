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
