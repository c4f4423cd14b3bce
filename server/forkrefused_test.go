package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
)

// TestForkRefusedIsExhaustion: a session or code context whose interpreter
// the kernel refused to fork (EAGAIN under a pids cgroup's limit, seen as
// "500 internal: start /usr/bin/bash: fork/exec /usr/bin/bash: resource
// temporarily unavailable") is 429 resource_exhausted, which a client
// retries, as the daemon's other limits are. Errors that only look alike
// stay internal.
func TestForkRefusedIsExhaustion(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EAGAIN, syscall.ENOMEM} {
		err := fmt.Errorf("start /usr/bin/bash: %w", &os.PathError{Op: "fork/exec", Path: "/usr/bin/bash", Err: errno})
		e := apiError(err)
		require.Equal(t, http.StatusTooManyRequests, e.Status, "%v", err)
		require.Equal(t, api.CodeResourceExhausted, e.Code)
		require.Contains(t, e.Message, "limit of processes")
	}
	for _, err := range []error{
		&os.PathError{Op: "read", Path: "/x", Err: syscall.EAGAIN},
		&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.EACCES},
		errors.New("fork/exec: resource temporarily unavailable"),
	} {
		require.Equal(t, http.StatusInternalServerError, apiError(err).Status, "%v", err)
	}
}
