package resident

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// fifo makes a FIFO and returns its engine's end, opened read-write so
// that the open never blocks, as a code context opens a cell's stdin.
func fifo(t *testing.T) (path string, f *os.File) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "in")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	return path, f
}

// fifoEnds makes a FIFO and opens its two ends: r, a command's, which reads
// (closed at the test's end unless the test closes it first), and w, the
// engine's, with flags (O_WRONLY for a session's, O_RDWR for a context's).
func fifoEnds(t *testing.T, flags int) (path string, r, w *os.File) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "in")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // opens with no writer yet
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	w, err = os.OpenFile(path, flags, 0)
	require.NoError(t, err)
	return path, r, w
}

// feed runs b's feeder on f and returns a channel closed when it returns.
func feed(b *Stdin, f *os.File) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Feed(f)
	}()
	return done
}

func returns(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// TestStdinGated: with the gate, end-of-file waits for the reader's open,
// so that what was written is not lost with the feeder's descriptor, the
// only writer until then; the reader then gets every byte and end-of-file.
func TestStdinGated(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(true, true)
	path, f := fifo(t)
	done := feed(&b, f)
	require.NoError(t, b.Write([]byte("one ")))
	require.NoError(t, b.Write([]byte("two")))
	require.NoError(t, b.CloseWrite())
	require.ErrorIs(t, b.Write([]byte("x")), process.ErrUnsupported)
	select {
	case <-done:
		t.Fatal("the feeder closed the FIFO before its reader opened it")
	case <-time.After(100 * time.Millisecond):
	}
	r, err := os.Open(path)
	require.NoError(t, err)
	defer r.Close()
	b.Opened()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, "one two", string(got))
	returns(t, done, "the feeder")
}

// TestStdinWaitable: the FIFO is offered to the input watcher only while no
// written byte is on its way and stdin is still open.
func TestStdinWaitable(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(true, false)
	_, ok := b.Waitable()
	require.False(t, ok, "before the feeder has the FIFO")
	path, f := fifo(t)
	done := feed(&b, f)
	require.Eventually(t, func() bool { _, ok := b.Waitable(); return ok }, 10*time.Second, time.Millisecond)
	require.NoError(t, b.Write([]byte("x")))
	r, err := os.Open(path)
	require.NoError(t, err)
	defer r.Close()
	buf := make([]byte, 1)
	_, err = r.Read(buf)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := b.Waitable(); return ok }, 10*time.Second, time.Millisecond)
	require.NoError(t, b.CloseWrite())
	_, ok = b.Waitable()
	require.False(t, ok, "after end-of-file")
	returns(t, done, "the feeder")
}

// TestStdinCloseUnblocks: the command's end stops a feeder blocked writing
// to a full FIFO nobody reads.
func TestStdinCloseUnblocks(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(true, false)
	_, f := fifo(t)
	done := feed(&b, f)
	require.NoError(t, b.Write(make([]byte, 1<<20))) // more than a FIFO holds
	var once sync.Once
	time.AfterFunc(100*time.Millisecond, func() { once.Do(b.Close) })
	returns(t, done, "the feeder blocked on a full FIFO")
}

// TestStdinNotOpen: a command without open stdin refuses input.
func TestStdinNotOpen(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(false, false)
	require.True(t, errors.Is(b.Write([]byte("x")), process.ErrStdinNotOpen))
	require.True(t, errors.Is(b.CloseWrite(), process.ErrStdinNotOpen))
	_, ok := b.Waitable()
	require.False(t, ok)
}

// TestStdinClosedSaysWhy: input after stdin was closed is refused saying
// why: its end of file was sent, or the command has ended (an agent read
// "stdin is closed" of an ended command as one that still runs).
func TestStdinClosedSaysWhy(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(true, false)
	require.NoError(t, b.CloseWrite())
	err := b.Write([]byte("x"))
	require.ErrorIs(t, err, process.ErrUnsupported)
	require.EqualError(t, err, "unsupported operation: stdin is closed: its end of file was sent")
	b.Close()
	require.EqualError(t, b.Write([]byte("x")), "unsupported operation: stdin is closed: the command has ended")
}

// TestStdinReaderGoneCountsFIFO: a command that read a little of its stdin
// and closed it left the rest in the FIFO, never to be read: that counts as
// dropped with what was still queued, also when the feeder stopped on its
// failed write before the command's end (it was counted as none).
func TestStdinReaderGoneCountsFIFO(t *testing.T) {
	t.Parallel()
	var b Stdin
	b.Init(true, false)
	_, r, w := fifoEnds(t, os.O_WRONLY)
	done := feed(&b, w)
	const total = 500_000 // more than the FIFO holds
	require.NoError(t, b.Write(make([]byte, total)))
	_, err := io.ReadFull(r, make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	returns(t, done, "the feeder, its reader gone") // its write failed
	b.Close()
	require.Equal(t, int64(total-10), b.Dropped())
}

// TestStdinEOFCountsFIFO: what a command left unread in the FIFO after
// end-of-file counts as dropped, though the feeder closed its end then
// (it was counted as none), with the FIFO's engine end opened write-only
// (a session's) or read-write (a code context's); what it read never
// does, and no descriptor of the FIFO's is left once the command ended.
func TestStdinEOFCountsFIFO(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags int
		read  int
	}{
		{"write-only", os.O_WRONLY, 10},
		{"read-write", os.O_RDWR, 10},
		{"all read", os.O_WRONLY, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b Stdin
			b.Init(true, false)
			path, r, w := fifoEnds(t, tc.flags)
			done := feed(&b, w)
			const total = 1000 // what the FIFO holds
			require.NoError(t, b.Write(make([]byte, total)))
			require.NoError(t, b.CloseWrite())
			returns(t, done, "the feeder at end-of-file")
			_, err := io.ReadFull(r, make([]byte, tc.read))
			require.NoError(t, err)
			b.Close()
			require.Equal(t, int64(total-tc.read), b.Dropped())
			require.Equal(t, 1, opens(t, path), "only the reader's descriptor is left")
		})
	}
}

// TestStdinEOFThenCloseAtOnce: a command that ends as its feeder stops at
// end-of-file leaves no descriptor of its FIFO's, whichever comes first.
func TestStdinEOFThenCloseAtOnce(t *testing.T) {
	t.Parallel()
	for range 50 {
		var b Stdin
		b.Init(true, false)
		path, f := fifo(t)
		done := feed(&b, f)
		require.NoError(t, b.Write([]byte("x")))
		require.NoError(t, b.CloseWrite())
		b.Close()
		returns(t, done, "the feeder")
		require.Equal(t, 0, opens(t, path))
	}
}

// opens counts the descriptors of this process's open on path.
func opens(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && target == path {
			n++
		}
	}
	return n
}
