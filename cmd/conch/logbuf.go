package main

import (
	"cmp"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/condwait"
)

// The bounds of a logBuffer: a line may wait logFlushAfter before it is
// written, or less once logBufferMax waits; while stderr is not read, at
// most logPendingMax waits and later lines are dropped; Flush waits at most
// logFlushWait for a stderr that is not read.
const (
	logFlushAfter = 50 * time.Millisecond
	logBufferMax  = 64 << 10
	logPendingMax = 4 << 20
	logFlushWait  = 2 * time.Second
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
//
// No Write waits for stderr. A stderr that is not read (a terminal held by
// Ctrl-S, a log reader that stalled) blocks only the write under way:
// lines gather meanwhile, up to logPendingMax, and past it are dropped, and
// counted in a line written once stderr is read again. Writing from the
// caller, under the lock every line takes, a full pipe once stopped every
// request that logged.
type logBuffer struct {
	w     io.Writer
	after time.Duration // zero means logFlushAfter

	mu      sync.Mutex
	written *sync.Cond // signalled when a write under way ends
	buf     []byte     // what waits
	spare   []byte     // the buffer last written, for reuse
	dropped int        // bytes dropped since the last write
	timer   *time.Timer
	writing bool // a goroutine writes (writeOut)

	dropNote func(w io.Writer, n int) // writes the line that says n bytes were dropped
}

func newLogBuffer(w io.Writer, after time.Duration) *logBuffer {
	b := &logBuffer{w: w, after: after, dropNote: func(w io.Writer, n int) {
		fmt.Fprintf(w, "conch: %d bytes of the log were dropped: stderr was not read\n", n)
	}}
	b.written = sync.NewCond(&b.mu)
	return b
}

// setDropNote replaces the line that says how many bytes were dropped.
func (b *logBuffer) setDropNote(f func(w io.Writer, n int)) {
	b.mu.Lock()
	b.dropNote = f
	b.mu.Unlock()
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > logPendingMax {
		b.dropped += len(p)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	switch {
	case b.writing: // the write under way takes it next
	case len(b.buf) >= logBufferMax:
		b.startWriting()
	case b.timer == nil:
		b.timer = time.AfterFunc(cmp.Or(b.after, logFlushAfter), b.flushWaiting)
	}
	return len(p), nil
}

// gatherStderr returns e with its stderr gathered by a logBuffer, which the
// caller flushes when the daemon stops; the daemon's log and its own lines
// stay in the order they were written.
func gatherStderr(e *env) (*env, *logBuffer) {
	lb := newLogBuffer(e.stderr, 0)
	return &env{stdin: e.stdin, stdout: e.stdout, stderr: lb}, lb
}

// Flush writes what waits now, and returns once it is written, or after
// logFlushWait when stderr is not read.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.writing {
		b.startWriting()
	}
	condwait.Wait(b.written, logFlushWait, func() bool { return !b.writing })
}

// flushWaiting writes what waited logFlushAfter, on the timer's goroutine.
func (b *logBuffer) flushWaiting() {
	b.mu.Lock()
	write := !b.writing && b.claimWrite()
	b.mu.Unlock()
	if write {
		b.writeOut()
	}
}

// startWriting starts a goroutine that writes what waits, if anything does.
// b.mu is held and no write is under way.
func (b *logBuffer) startWriting() {
	if b.claimWrite() {
		go b.writeOut()
	}
}

// claimWrite stops the timer and, when something waits, marks a write under
// way and reports true: the caller then writes it (writeOut). b.mu is held
// and no write is under way.
func (b *logBuffer) claimWrite() bool {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.writing = len(b.buf) > 0 || b.dropped > 0
	return b.writing
}

// writeOut writes what waits until nothing does, then ends the write under
// way. What gathers while a write is under way is written next.
func (b *logBuffer) writeOut() {
	b.mu.Lock()
	for len(b.buf) > 0 || b.dropped > 0 {
		out, dropped, note := b.buf, b.dropped, b.dropNote
		b.buf, b.spare, b.dropped = b.spare[:0], nil, 0
		b.mu.Unlock()
		if len(out) > 0 {
			b.w.Write(out) // stderr: nowhere to say that it failed
		}
		if dropped > 0 {
			note(b.w, dropped)
		}
		b.mu.Lock()
		if cap(out) <= logBufferMax {
			b.spare = out[:0]
		}
	}
	b.writing = false
	b.written.Broadcast()
	b.mu.Unlock()
}
