package main

import (
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
	b := &logBuffer{w: w, after: time.Hour}
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
	require.Len(t, w.get(), 2, "written at once past the bound")

	b = &logBuffer{w: w, after: time.Millisecond}
	b.Write([]byte("by itself\n"))
	require.Eventually(t, func() bool { return len(w.get()) == 3 }, 10*time.Second, time.Millisecond)
	require.Equal(t, "by itself\n", w.get()[2])
}
