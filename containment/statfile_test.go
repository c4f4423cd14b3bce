package containment

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A cgroup made only to be destroyed (as Open does with one left by an
// earlier daemon) opened none of its files, and closes none: its files'
// zero value is no descriptor, not descriptor 0.
func TestDestroyClosesOnlyItsFiles(t *testing.T) {
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	defer unix.Close(p[1])
	// Descriptor 0 is the pipe's read end for the test's length.
	saved, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		saved = -1 // the test's stdin was closed
	}
	require.NoError(t, unix.Dup3(p[0], 0, 0))
	unix.Close(p[0])
	defer func() {
		if saved >= 0 {
			unix.Dup3(saved, 0, 0)
			unix.Close(saved)
		} else {
			unix.Close(0)
		}
	}()
	var before unix.Stat_t
	require.NoError(t, unix.Fstat(0, &before))

	cg := &cgroup{dir: filepath.Join(t.TempDir(), "gone")}
	require.NoError(t, cg.Destroy())

	var after unix.Stat_t
	require.NoError(t, unix.Fstat(0, &after), "descriptor 0 is still open")
	require.Equal(t, before.Ino, after.Ino, "and still the pipe")
}
