package statefile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadTakesNoTerminal: a state file's name may be a link to a
// terminal, which any command the daemon runs can put there; refused, it
// is opened all the same, and opening a terminal made it the controlling
// terminal of a daemon that leads its session (as in a container), whose
// hangup then stopped the daemon. The read runs in a child that leads a
// session of its own, which reports its controlling terminal.
func TestReadTakesNoTerminal(t *testing.T) {
	if path := os.Getenv("STATEFILE_TEST_READ"); path != "" {
		_, err := Read(path)
		stat, serr := os.ReadFile("/proc/self/stat")
		require.NoError(t, serr)
		// tty_nr, the 7th field, after the command's name in parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		os.Stdout.WriteString("tty_nr " + fields[4] + "\n")
		require.Error(t, err)
		return
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no terminal: %v", err)
	}
	defer ptmx.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "daemon.json")
	require.NoError(t, os.Symlink("/dev/pts/"+strconv.Itoa(n), link))

	cmd := exec.Command(os.Args[0], "-test.run", "^TestReadTakesNoTerminal$")
	cmd.Env = append(os.Environ(), "STATEFILE_TEST_READ="+link)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "tty_nr 0\n", "the reader took the terminal as its own")
}
