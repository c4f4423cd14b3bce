package server_test

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/server"
)

// A daemon that is not root refuses a process's user (a name or a uid)
// with 400 unsupported_operation, as limits its host cannot apply: no
// state of the daemon's that a later request could find changed makes it
// possible, which the 409 it answered says. Run as root, the daemon runs in
// a process of its own that has become nobody.
func TestUserNeedsRootDaemon(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		userNeedsRoot(t)
		return
	}
	out := reapertest.RunChild(t, "TestUserNeedsRootDaemonChild", "CONCH_TEST_NONROOT_CHILD=1")
	require.Contains(t, out, "--- PASS: TestUserNeedsRootDaemonChild", "%s", out)
}

func TestUserNeedsRootDaemonChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_NONROOT_CHILD") == "" {
		t.Skip("run by TestUserNeedsRootDaemon")
	}
	require.NoError(t, errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)))
	userNeedsRoot(t)
}

// userNeedsRoot checks what a daemon this process serves, which must not
// run as root, answers a user other than its own, and its own.
func userNeedsRoot(t *testing.T) {
	d := start(t, server.Options{})
	for _, user := range []string{"root", "0"} {
		_, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "true", User: user})
		requireCode(t, err, client.CodeUnsupportedOperation)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, http.StatusBadRequest, e.Status, "user %q: %v", user, err)
		require.Contains(t, e.Message, "needs the daemon to run as root")
	}
	own := strconv.Itoa(os.Geteuid())
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "id -u", User: own, Cwd: "/"})
	require.NoError(t, err, "the daemon's own user")
	r, _, err := d.c.Wait(ctx(t), p.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 0, exitCode(t, *r))
}
