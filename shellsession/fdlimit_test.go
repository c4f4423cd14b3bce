package shellsession

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/reapertest"
	"github.com/stretchr/testify/require"
)

// A session that cannot be started because this process has no
// descriptors left is refused at once, saying so (too many open files,
// which the daemon answers 429), at every count of descriptors left: with
// a few left, the epoll set of the first command's streams could not be
// made, the command was sent all the same, and New waited out its
// readiness limit (30 s) to refuse the session as the shell's fault.
//
// The descriptors are counted out in a process of the test's own: the
// limit applies to the whole process.
func TestNewOutOfDescriptors(t *testing.T) {
	t.Parallel()
	out := reapertest.RunChild(t, "TestNewOutOfDescriptorsChild", "CONCH_TEST_FD_CHILD=1")
	require.Contains(t, out, "started with ", "%s", out)
}

func TestNewOutOfDescriptorsChild(t *testing.T) {
	if os.Getenv("CONCH_TEST_FD_CHILD") == "" {
		t.Skip("run by TestNewOutOfDescriptors")
	}
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	// One session made and closed first: the runtime's own descriptors
	// (its poller's) exist before the count.
	s, err := New(t.Context(), Options{})
	require.NoError(t, err)
	s.Close()
	// open lists this process's descriptors (the listing's own aside).
	open := func() map[string]string {
		d, err := os.Open("/proc/self/fd")
		require.NoError(t, err)
		defer d.Close()
		names, err := d.Readdirnames(-1)
		require.NoError(t, err)
		fds := map[string]string{}
		for _, n := range names {
			if n != strconv.Itoa(int(d.Fd())) {
				fds[n], _ = os.Readlink("/proc/self/fd/" + n)
			}
		}
		return fds
	}
	before := open()
	top := 0
	for n := range before {
		fd, _ := strconv.Atoi(n)
		top = max(top, fd)
	}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(top + 1 + 40), Max: rl.Max}))
	var tried []string
	for free := 0; free <= 40; free++ {
		// Every number under the limit taken, then free of them let go.
		var fill []int
		for {
			fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				break
			}
			fill = append(fill, fd)
		}
		let := min(free, len(fill))
		tried = append(tried, fmt.Sprintf("%d free of %d filled", let, len(fill)))
		for _, fd := range fill[len(fill)-let:] {
			syscall.Close(fd)
		}
		fill = fill[:len(fill)-let]
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
		start := time.Now()
		s, err := New(ctx, Options{})
		took := time.Since(start)
		cancel()
		for _, fd := range fill {
			syscall.Close(fd)
		}
		if err == nil {
			t.Logf("started with %d descriptors free", free)
			s.Close()
			return
		}
		require.Less(t, took, 5*time.Second, "refused after %v: %v", took, err)
		require.True(t, strings.Contains(err.Error(), "too many open files"), "refused for another reason: %v", err)
		// A refused session leaves nothing open.
		for deadline := time.Now().Add(10 * time.Second); ; {
			var extra []string
			for n, what := range open() {
				if _, ok := before[n]; !ok {
					extra = append(extra, n+" "+what)
				}
			}
			if len(extra) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with %d free, a refused session (%v) left descriptors open: %v", free, err, extra)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Fatalf("no session started with 40 descriptors free (limit %d): %v", top+1+40, tried)
}
