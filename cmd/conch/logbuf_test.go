package main

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writes records each Write it gets.
type writes struct {
	mu    sync.Mutex
	calls []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func (w *writes) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// TestLogBufferGathersLines: lines written to the daemon's stderr reach it
// in one write, in order, not one write a line; what waits is written by
// itself after the delay, or at once by Flush, or at once past the bound.
func TestLogBufferGathersLines(t *testing.T) {
	t.Parallel()
	w := &writes{}
	b := newLogBuffer(w, time.Hour)
	for i := range 100 {
		b.Write([]byte("line " + strings.Repeat("x", i%7) + "\n"))
	}
	require.Empty(t, w.get(), "written before the delay")
	b.Flush()
	got := w.get()
	require.Len(t, got, 1, "one write for the lines")
	require.Equal(t, 100, strings.Count(got[0], "\n"))
	require.True(t, strings.HasPrefix(got[0], "line \nline x\nline xx\n"), "in order: %q", got[0][:30])
	b.Flush()
	require.Len(t, w.get(), 1, "nothing left to write")

	b.Write(make([]byte, logBufferMax))
	require.Eventually(t, func() bool { return len(w.get()) == 2 }, 10*time.Second, time.Millisecond,
		"written past the bound, not after the delay")

	b = newLogBuffer(w, time.Millisecond)
	b.Write([]byte("by itself\n"))
	require.Eventually(t, func() bool { return len(w.get()) == 3 }, 10*time.Second, time.Millisecond)
	require.Equal(t, "by itself\n", w.get()[2])
}

// stalled is a stderr that nobody reads: its first Write blocks until
// released.
type stalled struct {
	writes
	release chan struct{}
	blocked chan struct{} // closed once a Write blocks
	once    sync.Once
}

func (s *stalled) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.blocked) })
	<-s.release
	return s.writes.Write(p)
}

// TestLogBufferStalledStderr: with stderr not read, no Write waits and
// Flush gives up: lines gather up to logPendingMax, then are dropped and
// counted in a line once stderr is read again. Every request's log line
// once waited for a full pipe under the buffer's lock, and a daemon whose
// stderr was not read answered nothing that logged.
func TestLogBufferStalledStderr(t *testing.T) {
	t.Parallel()
	w := &stalled{release: make(chan struct{}), blocked: make(chan struct{})}
	b := newLogBuffer(w, time.Millisecond)
	b.Write([]byte("first\n"))
	select {
	case <-w.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the first line was not written")
	}

	line := []byte(strings.Repeat("x", 1023) + "\n")
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for range logPendingMax/len(line) + 100 {
			b.Write(line)
		}
		b.Flush()
	}()
	select {
	case <-wrote: // neither Write nor Flush waited for stderr for good
	case <-time.After(30 * time.Second):
		close(w.release)
		t.Fatal("a Write or Flush waits for stderr")
	}

	close(w.release)
	b.Flush()
	got := strings.Join(w.get(), "")
	require.True(t, strings.HasPrefix(got, "first\n"+string(line)), "in order")
	require.Equal(t, logPendingMax/len(line), strings.Count(got, string(line)), "what fitted is written")
	require.True(t, strings.HasSuffix(got, "conch: 102400 bytes of the log were dropped: stderr was not read\n"),
		"the rest is counted: %q", got[max(0, len(got)-100):])
}

// TestDaemonLogJSONDropNote stalls the stderr of a daemon's JSON log past
// what a logBuffer keeps: the line that counts what was dropped is JSON as
// well.
func TestDaemonLogJSONDropNote(t *testing.T) {
	t.Parallel()
	w := &stalled{release: make(chan struct{}), blocked: make(chan struct{})}
	lb := newLogBuffer(w, time.Millisecond)
	dl := newDaemonLog(lb, "json", slog.LevelInfo)
	dl.Info("first")
	<-w.blocked
	for range logPendingMax/100 + 10 {
		dl.Info(strings.Repeat("x", 100))
	}
	close(w.release)
	lb.Flush()
	lines := strings.Split(strings.TrimSuffix(strings.Join(w.get(), ""), "\n"), "\n")
	msgs := jsonLines(t, lines)
	require.Equal(t, "log lines dropped: stderr was not read", msgs[len(msgs)-1])
	require.Contains(t, lines[len(lines)-1], `"level":"WARN"`)
}
