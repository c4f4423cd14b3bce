package proctree

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fdLimitEnv makes the test binary TestMain_fdLimitHelper.
const fdLimitEnv = "CONCH_PROCTREE_FD_LIMIT_HELPER"

// A start whose child is handed the descriptor at the top of the limit of
// open files fails for want of descriptors (EMFILE, which callers answer
// as a shortage: the daemon's 429), not as a bad descriptor: Go's fork
// reported EBADF, and the daemon counted the process Failed, as if its
// program could not run. A descriptor that is not open still reports
// EBADF. The limit is lowered in a process of the test's own: it is the
// whole process's.
func TestStartAtDescriptorLimit(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "bash", "-c",
		`ulimit -n 64 && exec "$0" -test.run='^TestMain_fdLimitHelper$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), fdLimitEnv+"=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd), "%s", out.String())
	require.Contains(t, out.String(), "--- PASS: TestMain_fdLimitHelper", "%s", out.String())
}

func TestMain_fdLimitHelper(t *testing.T) {
	if os.Getenv(fdLimitEnv) == "" {
		t.Skip("only run as a helper process")
	}
	var rl unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &rl))
	require.Equal(t, uint64(64), rl.Cur)
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	// The child's stdout is the last descriptor the limit allows.
	require.NoError(t, unix.Dup3(int(null.Fd()), int(rl.Cur)-1, unix.O_CLOEXEC))
	top := os.NewFile(uintptr(rl.Cur)-1, "top")
	defer top.Close()
	cmd := exec.Command("true")
	cmd.Stdout = top
	err = Start(cmd)
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.EMFILE)

	// The control: a descriptor closed before the start is a bad one. Its
	// number is one below the top, where no descriptor the start opens
	// (the lowest free numbers) could take it again.
	fd := int(rl.Cur) - 2
	require.NoError(t, unix.Dup3(int(null.Fd()), fd, unix.O_CLOEXEC))
	require.NoError(t, unix.Close(fd))
	cmd = exec.Command("true")
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "closed")}
	err = Start(cmd)
	require.ErrorIs(t, err, syscall.EBADF)
	require.False(t, errors.Is(err, syscall.EMFILE), "%v", err)
}
