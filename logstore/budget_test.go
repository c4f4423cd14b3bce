package logstore

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// writeKiB writes n KiB to l, one frame per KiB.
func writeKiB(l *Log, n int) {
	for range n {
		writeFrame(l, Stdout, bytes.Repeat([]byte("x"), 1<<10))
	}
}

// held returns what l holds in memory, as a budget must count it: the bytes
// of its frames, and its frame table.
func held(l *Log) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.size + len(l.frames.buf)*int(unsafe.Sizeof(Frame{})))
}

func retained(l *Log) int {
	n := 0
	for _, f := range l.Page(0, 0).Frames {
		n += len(f.Data)
	}
	return n
}

// TestBudgetDropsOldestEnded checks that over its limit a budget drops the
// whole logs of the processes that ended first, and that their pages and
// followers say so.
func TestBudgetDropsOldestEnded(t *testing.T) {
	t.Parallel()
	b := NewBudget(100 << 10)
	logs := make([]*Log, 5)
	for i := range logs {
		logs[i] = New(Options{})
		b.Add(logs[i])
		writeKiB(logs[i], 40)
		logs[i].Close()
	}
	for i, l := range logs {
		p := l.Page(0, 0)
		dropped := i < 3
		assert.False(t, dropped != (len(p.Frames) == 0) || dropped != p.TruncatedHead, "log %d (closed %d of 5): %d frames, truncatedHead %v", i, i+1, len(p.Frames), p.TruncatedHead)
	}
	used, want := b.Used(), held(logs[3])+held(logs[4])
	assert.Equal(t, want, used, "budget uses %d bytes, logs hold %d", used, want)
	assert.Equal(t, int64(retained(logs[3])+retained(logs[4])), b.Retained(), "the output the budget says is retained")
	assert.Equal(t, int64(80<<10), b.Retained(), "the output of the two logs kept")
	assert.Equal(t, int64(120<<10), b.Evicted(), "the bytes of the three logs dropped")
	var warning string
	_ = logs[0].Follow(hangGuard(t, 20*time.Second), 0, func(e Event) bool {
		if e.Warning != nil {
			warning = e.Warning.Message
		}
		return e.Warning == nil
	})
	assert.Contains(t, warning, "log budget", "a follower of a dropped log is warned %q", warning)
}

// TestBudgetLevelsOpenLogs checks that when open logs alone are over the
// budget, the largest lose their oldest frames down to a common level, and
// smaller ones keep everything.
func TestBudgetLevelsOpenLogs(t *testing.T) {
	t.Parallel()
	b := NewBudget(100 << 10)
	big, mid, small := New(Options{}), New(Options{}), New(Options{})
	for _, l := range []*Log{big, mid, small} {
		b.Add(l)
	}
	writeKiB(big, 60)
	writeKiB(mid, 30)
	writeKiB(small, 20)
	assert.Equal(t, 50<<10, retained(mid)+retained(small), "the smaller logs retain less than all 50 KiB")
	p := big.Page(0, 0)
	// Leveled down, the largest log still holds as much as the next one,
	// which lost nothing.
	assert.False(t, !p.TruncatedHead || held(big) < held(mid) || retained(big) > 50<<10, "the largest log retains %d bytes (holds %d, the next %d), truncatedHead %v", retained(big), held(big), held(mid), p.TruncatedHead)
	used := b.Used()
	assert.False(t, used > b.Limit() || used != held(big)+held(mid)+held(small), "budget uses %d bytes of %d", used, b.Limit())
	assert.Equal(t, int64(retained(big)+retained(mid)+retained(small)), b.Retained(), "output retained")
	assert.Equal(t, int64(110<<10)-b.Retained(), b.Evicted(), "what was written and is no longer retained was evicted")
	b.Remove(big)
	smaller := held(mid) + held(small)
	assert.Equal(t, smaller, b.Used(), "budget used after Remove")
	writeKiB(big, 80)
	assert.Equal(t, smaller, b.Used(), "a removed log no longer counts")
}

// TestBudgetConcurrentWriters checks the budget's count and limit while
// many logs are written, closed and followed at once.
func TestBudgetConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(hangGuard(t, 60*time.Second))
	defer cancel()
	b := NewBudget(256 << 10)
	logs := make([]*Log, 8)
	var wg, followers sync.WaitGroup
	for i := range logs {
		l := New(Options{Retention: 128 << 10})
		logs[i] = l
		b.Add(l)
		wg.Go(func() {
			data := bytes.Repeat([]byte("y"), 100+i*300)
			for range 2000 {
				l.Write(Channel(1+i%2), data)
			}
			if i%2 == 0 {
				l.Close()
			}
		})
		followers.Go(func() {
			_ = l.Follow(ctx, 0, func(Event) bool { return true })
		})
	}
	wg.Wait()
	sum := int64(0)
	for _, l := range logs {
		sum += held(l)
	}
	used := b.Used()
	assert.False(t, used != sum || used > b.Limit(), "budget counts %d bytes, logs hold %d, limit %d", used, sum, b.Limit())
	cancel()
	followers.Wait()
}
