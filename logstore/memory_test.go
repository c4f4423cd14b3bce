package logstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/conchsh/conch/internal/heaptest"
)

// TestMemoryStaysBounded passes 1 GiB through a log with the default
// retention and checks the live heap stays within retention plus a small
// constant. It does not run in parallel: it measures the whole heap.
func TestMemoryStaysBounded(t *testing.T) {
	const (
		total = 1 << 30
		write = 64 << 10
		slack = 4 << 20
	)
	l := New(Options{})
	data := bytes.Repeat([]byte("memory test line, with é and 😀 in it\n"), write/40)
	var base, ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	var peak uint64
	for written := 0; written < total; written += len(data) {
		data[0] = byte(written)
		l.Write(Stdout, data)
		if written%(64<<20) == 0 || written+len(data) >= total {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, base.HeapAlloc))
		}
	}
	runtime.KeepAlive(l)
	t.Logf("live heap growth at most %.1f MiB for a retention of %d MiB", float64(peak)/(1<<20), DefaultRetention>>20)
	assert.LessOrEqual(t, peak, uint64(DefaultRetention+slack), "live heap grew by %d bytes, over retention %d + %d", peak, DefaultRetention, slack)
	p := l.Page(0, 0)
	assert.False(t, !p.TruncatedHead || len(p.Frames) == 0, "after 1 GiB: truncatedHead %v, %d frames", p.TruncatedHead, len(p.Frames))
}

// TestClosedLogsAreCompact checks that a closed log with small writes holds
// about its bytes, not the unused rest of its last arena chunk: many
// processes' logs stay around after they end. It measures the whole heap, so
// it does not run in parallel.
func TestClosedLogsAreCompact(t *testing.T) {
	const (
		logs    = 200
		perLog  = 40_000
		write   = 1000
		allowed = 1.5 // heap per byte of output
	)
	line := bytes.Repeat([]byte("y"), write)
	kept := make([]*Log, logs)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range kept {
		l := New(Options{})
		for range perLog / write {
			l.Write(Stdout, line)
		}
		l.Close()
		kept[i] = l
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perByte := float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc)) / (logs * perLog)
	t.Logf("%.2f bytes of heap per byte of output", perByte)
	assert.LessOrEqual(t, perByte, allowed, "closed logs take %.2f bytes of heap per byte of output, want at most %.1f", perByte, allowed)
	runtime.KeepAlive(kept)
}

// TestFloodReusesMemory checks that output flooding through a full log that
// no reader looks at reuses the buffers of the frames it drops, even when the
// writes vary in size, rather than leaving them all to the garbage collector
// (which lets the heap grow to twice what is live). It measures the whole
// heap, so it does not run in parallel.
func TestFloodReusesMemory(t *testing.T) {
	l := New(Options{})
	sizes := []int{64 << 10, 60 << 10, 64 << 10, 63 << 10, 5 << 10, 64 << 10, 62 << 10}
	data := make([]byte, 64<<10)
	write := func(total int) {
		for i, n := 0, 0; n < total; i++ {
			size := sizes[i%len(sizes)]
			l.Write(Stdout, data[:size])
			n += size
		}
	}
	const flood = 64 << 20
	allocated := floodAllocates(t, write, flood)
	assert.LessOrEqual(t, allocated, uint64(flood/8), "%d bytes allocated while %d went through a full log", allocated, flood)
}

// floodAllocates fills a log through write, then returns the bytes the heap
// allocated while write put flood more bytes through it.
func floodAllocates(t *testing.T, write func(total int), flood int) uint64 {
	t.Helper()
	write(2 * DefaultRetention)
	allocated := heaptest.Allocated(func() { write(flood) })
	t.Logf("%d KiB allocated while %d MiB went through", allocated>>10, flood>>20)
	return allocated
}

// TestFloodOfAnySizeReusesBlocks checks that output of writes of every size
// flooding through a full log reuses the blocks retention frees, so that it
// allocates next to nothing: buffers of varying sizes would be garbage the
// heap grows by (P5b). It measures the whole heap, so it does not run in
// parallel.
func TestFloodOfAnySizeReusesBlocks(t *testing.T) {
	l := New(Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, MaxFrame)
	write := func(total int) {
		for n := 0; n < total; {
			size := bigFrame + rng.IntN(MaxFrame-bigFrame+1)
			l.Write(Stdout, data[:size])
			n += size
		}
	}
	const flood = 64 << 20
	allocated := floodAllocates(t, write, flood)
	assert.LessOrEqual(t, allocated, uint64(flood/64), "%d bytes allocated while %d went through a full log", allocated, flood)
}

// TestLentFollowerFloodReusesMemory is TestFloodReusesMemory with a
// FollowLent that keeps up with the output: what it was lent and is done
// with is reused as if nobody had read it. A Follow, which may keep what it
// is handed, leaves every block to the garbage collector instead. It
// measures the whole heap, so it does not run in parallel.
func TestLentFollowerFloodReusesMemory(t *testing.T) {
	const flood = 64 << 20
	lent := followedFloodAllocates(t, (*Log).FollowLent, flood)
	assert.LessOrEqual(t, lent, uint64(flood/8), "%d bytes allocated while %d went through a full log with a lent follower", lent, flood)
	kept := followedFloodAllocates(t, (*Log).Follow, flood)
	assert.GreaterOrEqual(t, kept, uint64(flood), "%d bytes allocated while %d went through a full log with a follower", kept, flood)
}

// followedFloodAllocates is floodAllocates of a log that a follower follows
// with follow, in lockstep with 64 KiB writes.
func followedFloodAllocates(t *testing.T, follow func(*Log, context.Context, Cursor, func(Event) bool) error, flood int) uint64 {
	l := New(Options{})
	write, stop := lockstep(t, l, func(ctx context.Context, after Cursor, yield func(Event) bool) error {
		return follow(l, ctx, after, yield)
	})
	defer stop()
	data := make([]byte, 64<<10)
	return floodAllocates(t, func(total int) {
		for n := 0; n < total; n += len(data) {
			write(data)
		}
	}, flood)
}

// TestBudgetCountsFrames checks that output in tiny writes alternating
// between stdout and stderr, a frame each, keeps the memory of many logs
// within their budget, ended or running: each frame takes a slot of its
// log's frame table (64 bytes) for its one byte of output, and a budget
// that counted the bytes alone let the heap grow to many times its limit.
// It measures the whole heap, so it does not run in parallel.
func TestBudgetCountsFrames(t *testing.T) {
	const (
		ended   = 48
		running = 16
		writes  = 10_000 // a frame each: about 1 MiB of frame table a log
		limit   = 4 << 20
		slack   = 1 << 20 // the logs themselves, and the arena's last chunks
	)
	b := NewBudget(limit)
	x := []byte("x")
	logs := make([]*Log, ended+running)
	before := heaptest.Live()
	for i := range logs {
		l := New(Options{})
		b.Add(l)
		for k := range writes {
			l.Write(Channel(1+k%2), x)
		}
		if i < ended {
			l.Close()
		}
		logs[i] = l
	}
	grown := heaptest.Live() - before
	sum := int64(0)
	for _, l := range logs {
		sum += held(l)
	}
	t.Logf("budget uses %d KiB of %d KiB, the logs hold %d KiB, the live heap grew by %d KiB", b.Used()>>10, limit>>10, sum>>10, grown>>10)
	assert.Equal(t, sum, b.Used(), "the budget counts what the logs hold: their bytes and their frame tables")
	assert.LessOrEqual(t, b.Used(), int64(limit), "budget used")
	assert.LessOrEqual(t, grown, int64(limit+slack), "the live heap grew by %d bytes under a budget of %d", grown, limit)
	runtime.KeepAlive(logs)
}

// TestFrameTableWithinHalfRetention checks that a log of tiny frames, at
// its frame cap, keeps its frame table within half its retention (as
// BytesPerFrame says), whether the retention is a power of two or not: the
// table doubled when the frame over the cap came before the oldest went,
// and a cap past a power of two had it take the retention whole. It
// measures the whole heap, so it does not run in parallel.
func TestFrameTableWithinHalfRetention(t *testing.T) {
	const slack = 1 << 20 // the bytes of the frames, and the log itself
	x := []byte("x")
	for _, retention := range []int{DefaultRetention, 6 << 20} {
		before := heaptest.Live()
		l := New(Options{Retention: retention})
		for k := range 2 * retention / BytesPerFrame {
			l.Write(Channel(1+k%2), x)
		}
		grown := heaptest.Live() - before
		t.Logf("retention %d MiB: %d frames, live heap grew by %d KiB", retention>>20, len(l.Page(0, 0).Frames), grown>>10)
		assert.LessOrEqual(t, grown, int64(retention/2+slack), "a log of retention %d grew the live heap by %d bytes", retention, grown)
		runtime.KeepAlive(l)
	}
}
