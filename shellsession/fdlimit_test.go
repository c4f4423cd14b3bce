package shellsession

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/fdtest"
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
	// One session made and closed first: the runtime's own descriptors
	// (its poller's) exist before the count.
	s, err := New(t.Context(), Options{})
	require.NoError(t, err)
	s.Close()
	before := fdtest.Open(t)
	fdtest.LimitAbove(t, 40)
	var tried []string
	for free := 0; free <= 40; free++ {
		// Every number under the limit taken, then free of them let go.
		fill := fdtest.Fill(t)
		let := min(free, len(fill))
		tried = append(tried, fmt.Sprintf("%d free of %d filled", let, len(fill)))
		fdtest.Close(fill[len(fill)-let:])
		fill = fill[:len(fill)-let]
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
		start := time.Now()
		s, err := New(ctx, Options{})
		took := time.Since(start)
		cancel()
		fdtest.Close(fill)
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
			for n, what := range fdtest.Open(t) {
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
	t.Fatalf("no session started with 40 descriptors free: %v", tried)
}
