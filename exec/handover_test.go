package exec

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/process"
)

// readState returns how many read system calls process pid has made, and
// whether it is asleep in one now.
func readState(t *testing.T, pid int) (reads int, asleepInRead bool) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	io, err := os.ReadFile(dir + "io")
	require.NoError(t, err)
	for line := range strings.Lines(string(io)) {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			reads, err = strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
		}
	}
	call, _ := os.ReadFile(dir + "syscall")
	stat, _ := os.ReadFile(dir + "stat")
	_, st, _ := strings.Cut(string(stat), ") ")
	nr, _, _ := strings.Cut(string(call), " ")
	return reads, nr == strconv.Itoa(unix.SYS_READ) && strings.HasPrefix(st, "S")
}

// TestPTYInputHandedOver: once a line written to a PTY program has left
// the queue (StdinQueued is 0), the program reading its terminal has been
// woken by it: it is not asleep in the read it was in. The kernel hands
// what is written to a terminal's master over to the reader later, and the
// program slept on for tens of milliseconds on a busy machine (a quarter of
// the lines at all), with nothing queued, long enough to be said to wait for
// input it had been given.
func TestPTYInputHandedOver(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: "stty -echo; while read line; do :; done"})
	pid := p.Info().PID
	for i := range 100 {
		var before int
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // a hang guard
			var asleep bool
			if before, asleep = readState(t, pid); asleep {
				break
			}
			require.True(t, time.Now().Before(end), "line %d: never asleep in a read", i)
		}
		require.NoError(t, p.WriteStdin([]byte("x\n")))
		for end := time.Now().Add(10 * time.Second); p.StdinQueued() > 0; time.Sleep(50 * time.Microsecond) { // a hang guard
			require.True(t, time.Now().Before(end), "line %d: never left the queue", i)
		}
		reads, asleep := readState(t, pid)
		require.False(t, asleep && reads == before, "line %d: the program still sleeps in the read its line ends", i)
	}
}
