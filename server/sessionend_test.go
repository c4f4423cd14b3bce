package server_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// TestDeleteCommandSendsTERM: deleting a running session command sends TERM
// to its processes, as kill does: a program's handler runs.
func TestDeleteCommandSendsTERM(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	dir := t.TempDir()
	s, err := d.c.CreateSession(c, client.SessionOptions{Cwd: dir})
	require.NoError(t, err)
	p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: `sh -c 'trap "echo caught >f; exit 5" TERM; echo ready; sleep 100 & wait'`})
	require.NoError(t, err)
	require.Equal(t, "ready\n", text(collectUntil(t, d, p.ID, 1)))
	require.NoError(t, d.c.Delete(c, p.ID))
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err, "the TERM handler did not run")
	require.Equal(t, "caught\n", string(b))
}

// TestSubmitToDeadShell: a session whose idle shell was killed from outside
// ends; a command submitted to it is refused with 409.
func TestSubmitToDeadShell(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(s.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		got, err := d.c.Session(c, s.ID)
		return err == nil && got.State == process.Terminal
	}, 30*time.Second, 10*time.Millisecond)
	_, err = d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "true"})
	requireCode(t, err, client.CodeUnsupportedOperation)
}
