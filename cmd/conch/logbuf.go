package main

import (
	"cmp"
	"io"
	"sync"
	"time"
)

// logFlushAfter is how long a line of the daemon's stderr may wait in a
// logBuffer before it is written; logBufferMax, how much may wait.
const (
	logFlushAfter = 50 * time.Millisecond
	logBufferMax  = 64 << 10
)

// logBuffer gathers what the daemon writes to its stderr and writes it in
// one call at most logFlushAfter after the first of it, off the goroutine
// that wrote it. Each write to stderr is a system call through the Go
// scheduler, and the first after the daemon was idle — as it is while a
// command runs — wakes the runtime's monitor thread: the three lines of a
// session command (process started, process ended, request) cost the daemon
// 170-200 µs of CPU a command, as much as the rest of its work on it. What
// waits is written when the daemon stops (Flush); a crash outside the
// command's goroutine loses at most the last logFlushAfter of it.
type logBuffer struct {
	w     io.Writer
	after time.Duration // zero means logFlushAfter
	mu    sync.Mutex
	buf   []byte
	timer *time.Timer // set while something waits
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferMax {
		b.flushLocked()
	} else if b.timer == nil {
		b.timer = time.AfterFunc(cmp.Or(b.after, logFlushAfter), b.Flush)
	}
	return len(p), nil
}

// gatherStderr returns e with its stderr gathered by a logBuffer, which the
// caller flushes when the daemon stops; the daemon's log and its own lines
// stay in the order they were written.
func gatherStderr(e *env) (*env, *logBuffer) {
	lb := &logBuffer{w: e.stderr}
	return &env{stdin: e.stdin, stdout: e.stdout, stderr: lb}, lb
}

// Flush writes what waits now.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.buf) > 0 {
		b.w.Write(b.buf) // stderr: nowhere to say that it failed
		b.buf = b.buf[:0]
		if cap(b.buf) > logBufferMax {
			b.buf = nil
		}
	}
}
