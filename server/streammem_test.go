package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/server"
)

// TestUnreadStreamsHoldLittle: a log stream whose client reads nothing
// holds a small fixed amount of memory (docs/api.md), counted by no budget:
// the frame it is sending stays the log's own, lent, and its event is
// encoded a piece at a time. Each held 200 to 400 KB: a copy of a frame,
// its JSON, and the next frame already copied. Not parallel: it measures
// the whole heap.
func TestUnreadStreamsHoldLittle(t *testing.T) {
	d := start(t, server.Options{})
	id := bulky(t, d)
	const n = 16
	base := heaptest.Live()
	for range n {
		waitStuck(t, openUnread(t, d.addr, id))
	}
	held := heaptest.Live() - base
	t.Logf("%d unread streams hold %d KiB, %d KiB each", n, held>>10, held/n>>10)
	require.Less(t, held/n, int64(48<<10), "bytes of heap each of %d streams holds while its client reads nothing", n)
}
