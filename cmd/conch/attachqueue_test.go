package main

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldWriter is an attachment whose writes wait until the test lets them
// through (release) or closes it, as a connection to a program that does
// not read its input holds them.
type heldWriter struct {
	mu      sync.Mutex
	got     bytes.Buffer
	started chan struct{} // a write began
	release chan struct{} // one send lets one write through
	closed  chan struct{}
	once    sync.Once
}

func newHeldWriter() *heldWriter {
	return &heldWriter{started: make(chan struct{}, 1), release: make(chan struct{}), closed: make(chan struct{})}
}

func (w *heldWriter) Write(p []byte) (int, error) {
	select {
	case w.started <- struct{}{}:
	default:
	}
	select {
	case <-w.release:
	case <-w.closed:
		return 0, errors.New("closed")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got.Write(p)
}

func (w *heldWriter) Close() { w.once.Do(func() { close(w.closed) }) }

func (w *heldWriter) written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got.Len()
}

// pasteReader is a terminal with a long paste on it, then the detach key.
// It counts what conch read of it, and fails the test where conch has read
// more than maxQueuedInput (and one read) ahead of what its writes took.
type pasteReader struct {
	t      *testing.T
	w      *heldWriter
	left   int // bytes of the paste not read yet
	read   int
	ahead  chan struct{} // closed once conch read a full queue ahead
	signal sync.Once
}

func (r *pasteReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		p[0] = detachKey
		return 1, nil
	}
	n := min(len(p), r.left)
	for i := range n {
		p[i] = 'x'
	}
	r.left -= n
	r.read += n
	// A write under way holds at most what was read before it.
	if inQueue := r.read - r.w.written(); inQueue > 2*maxQueuedInput+len(p) {
		r.t.Errorf("conch read %d bytes of the terminal while its writes took %d: it queues without bound", r.read, r.w.written())
		return 0, io.ErrUnexpectedEOF
	}
	if r.read-r.w.written() >= maxQueuedInput {
		r.signal.Do(func() { close(r.ahead) })
	}
	return n, nil
}

// TestAttachInputQueueBounded: input typed or pasted while a write to the
// attachment waits (a program that does not read its terminal) was queued
// without bound, and a long paste grew conch's memory with it. conch now
// stops reading the terminal once maxQueuedInput bytes wait, as a pipe
// stops its writer, and reads on as writes take them: none is dropped.
func TestAttachInputQueueBounded(t *testing.T) {
	t.Parallel()
	w := newHeldWriter()
	defer w.Close()
	const paste = 16 << 20
	r := &pasteReader{t: t, w: w, left: paste, ahead: make(chan struct{})}
	detached := make(chan bool, 1)
	go func() { detached <- copyUntilDetach(w, r) }()
	// Writes go through only once conch has read a full queue ahead of
	// them: it then reads on only as they take what it queued.
	go func() {
		<-r.ahead
		for {
			select {
			case w.release <- struct{}{}:
			case <-w.closed:
				return
			}
		}
	}()
	select {
	case d := <-detached:
		require.True(t, d, "the detach key after the paste detaches")
	case <-time.After(60 * time.Second):
		t.Fatal("conch did not detach")
	}
	require.Equal(t, paste, w.written(), "every byte of the paste was written, in turn")
}

// TestAttachDetachWaitsForWriteUnderWay: a Ctrl-] read while a write was
// under way dropped the input read before it, even when the write then
// went through a moment later. It is now sent after that write, as when no
// write was under way.
func TestAttachDetachWaitsForWriteUnderWay(t *testing.T) {
	t.Parallel()
	w := newHeldWriter()
	defer w.Close()
	q := newInputQueue()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		q.send(w)
	}()
	require.True(t, q.push([]byte("abc"), false))
	<-w.started
	// The write of "abc" waits; it goes through once the detach began.
	go func() {
		for !q.isEnded() {
			time.Sleep(time.Millisecond)
		}
		for {
			select {
			case w.release <- struct{}{}:
			case <-w.closed:
				return
			}
		}
	}()
	q.detach([]byte("def"))
	w.Close()
	<-sent
	require.Equal(t, "abcdef", w.got.String(), "what was typed before the Ctrl-] was sent")
}

// TestAttachDetachWriteStuck: a Ctrl-] read while no write was under way
// waited for the write of the input before it, and one to a program that
// does not read its terminal never ended: conch hung attached. Detach now
// gives up once no write has gone through for detachStall, as it does when
// the Ctrl-] comes while the write waits.
func TestAttachDetachWriteStuck(t *testing.T) {
	t.Parallel()
	w := newHeldWriter()
	q := newInputQueue()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		q.send(w)
	}()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		q.detach([]byte("abc"))
	}()
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("detach waits for a write that does not end")
	}
	w.Close() // as the attachment's Close ends a write that waits on
	<-sent
	require.Zero(t, w.written())
}

// isEnded says whether the input ended (detach was called).
func (q *inputQueue) isEnded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ended
}
