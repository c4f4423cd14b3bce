package exec

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawWriter is a PTY program that puts its terminal in raw mode (so its
// bytes reach the log unchanged), says R, waits for a line, then writes n
// bytes.
func rawWriter(n int) string {
	return fmt.Sprintf("stty raw -echo; printf R; read go; head -c %d /dev/urandom", n)
}

// drained is what one attachment read: the digest and count of its bytes,
// and the bytes its gaps said it missed.
type drained struct {
	sum        [32]byte
	got, gaps  int64
	gapReports int
	err        error
}

// drain reads a to its end; pause, if not nil, is called after the first
// read and before the rest.
func drain(a *Attachment, pause func()) drained {
	h := sha256.New()
	var d drained
	buf := make([]byte, 32<<10)
	for {
		n, err := a.Read(buf)
		h.Write(buf[:n])
		d.got += int64(n)
		if pause != nil && d.got > 0 {
			pause()
			pause = nil
		}
		var gap *GapError
		switch {
		case errors.As(err, &gap):
			d.gaps += gap.Bytes
			d.gapReports++
		case errors.Is(err, io.EOF):
			copy(d.sum[:], h.Sum(nil))
			return d
		case err != nil:
			d.err = err
			return d
		}
	}
}

// TestAttachManyReaders: readers attached to a PTY that writes far more
// than its log retains each get every byte: the terminal's output waits for
// the slowest of them rather than dropping what it has not read.
func TestAttachManyReaders(t *testing.T) {
	t.Parallel()
	const total = 8 << 20
	p := start(t, Options{Kind: process.KindPTY, Cmd: rawWriter(total), Retention: 256 << 10})
	waitOutput(t, p, "R")
	const readers = 8
	results := make([]drained, readers)
	var wg sync.WaitGroup
	for i := range readers {
		a, err := p.Attach(t.Context())
		require.NoError(t, err)
		defer a.Close()
		wg.Go(func() { results[i] = drain(a, nil) })
	}
	require.NoError(t, p.WriteStdin([]byte("\n")))
	wg.Wait()
	for i, d := range results {
		require.NoError(t, d.err, "reader %d", i)
		assert.Equal(t, int64(total+1), d.got, "reader %d's bytes", i)
		assert.Zero(t, d.gapReports, "reader %d's gaps", i)
		assert.Equal(t, results[0].sum, d.sum, "reader %d's digest", i)
	}
	require.True(t, sameResult(wait(t, p), process.ExitedWith(0)))
}

// TestAttachStalledReader: a reader that stops reading for longer than the
// output waits for it (AttachStall) no longer holds the terminal back; it
// is told, where its output has a gap, exactly how many bytes it missed,
// while a reader that keeps up gets every byte.
func TestAttachStalledReader(t *testing.T) {
	t.Parallel()
	const total = 4 << 20
	// A stall long enough that the reader that keeps up is never taken for
	// stalled on a loaded machine under -race.
	p := start(t, Options{Kind: process.KindPTY, Cmd: rawWriter(total), Retention: 256 << 10, AttachStall: time.Second})
	waitOutput(t, p, "R")
	slow, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer slow.Close()
	fast, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer fast.Close()
	var ds [2]drained
	var wg sync.WaitGroup
	wg.Go(func() { ds[0] = drain(slow, func() { <-p.Done() }) })
	wg.Go(func() { ds[1] = drain(fast, nil) })
	require.NoError(t, p.WriteStdin([]byte("\n")))
	wg.Wait()
	for i, d := range ds {
		require.NoError(t, d.err, "reader %d", i)
		assert.Equal(t, int64(total+1), d.got+d.gaps, "reader %d: bytes read and missed", i)
	}
	assert.NotZero(t, ds[0].gapReports, "the stalled reader was told of no gap")
	assert.Zero(t, ds[1].gapReports, "the reader that kept up")
}

// TestAttachWriteAfterClose: a closed attachment sends no input, as it
// reads none: Write after Close returns io.ErrClosedPipe, and the program
// never gets the line. It went through.
func TestAttachWriteAfterClose(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: "stty -echo; printf R; read line; echo got-$line"})
	waitOutput(t, p, "R")
	a, err := p.Attach(t.Context())
	require.NoError(t, err)
	require.NoError(t, a.Close())
	n, err := a.Write([]byte("late\n"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
	require.Zero(t, n)
	// The line that follows is the first the program reads.
	require.NoError(t, p.WriteStdin([]byte("direct\n")))
	waitOutput(t, p, "got-direct")
	require.NotContains(t, logText(p.Log(), 0), "late")
	require.True(t, sameResult(wait(t, p), process.ExitedWith(0)))
}

// TestAttachWriteEndsWithContext: a Write that waits for a program that does
// not read its input returns once the attachment's context ends, saying how
// much was queued: the attachment's end is not held by the program.
func TestAttachWriteEndsWithContext(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: "stty raw -echo; printf R; exec sleep 600"})
	t.Cleanup(func() { p.Kill(9, 0, 0) })
	waitOutput(t, p, "R")
	ctx, cancel := context.WithCancel(t.Context())
	a, err := p.Attach(ctx)
	require.NoError(t, err)
	defer a.Close()
	type wrote struct {
		n   int
		err error
	}
	done := make(chan wrote, 1)
	go func() {
		n, err := a.Write(make([]byte, 2*process.StdinQueueLimit))
		done <- wrote{n, err}
	}()
	eventually(t, "the input queue fills", func() bool { return p.feed.queued() == process.StdinQueueLimit })
	cancel()
	select {
	case w := <-done:
		require.ErrorIs(t, w.err, context.Canceled)
		require.GreaterOrEqual(t, w.n, process.StdinQueueLimit)
		require.Less(t, w.n, 2*process.StdinQueueLimit)
	case <-time.After(10 * time.Second):
		t.Fatal("Write still waits for the program after the attachment's context ended")
	}
}

// TestAttachHeldOutputOutlivesTheProgram: a program whose last bytes wait
// in its terminal's kernel buffer while an attached reader holds the output
// back, and which then exits, loses none of them when the drain delay ends
// the hold: what the master still holds is read into the log, and the
// reader gets every byte, with no gap.
func TestAttachHeldOutputOutlivesTheProgram(t *testing.T) {
	t.Parallel()
	// The reader reads the R, then nothing until the process is done, so
	// the output is held back once it is more than 32 KiB behind: within
	// the program's first 36 KiB. The program writes its last 4 KiB only
	// once the hold is seen, so they are written while it lasts. They, and
	// the under 4 KiB of the first part not read when the hold began, must
	// fit in the terminal's kernel buffers for the program to exit while
	// held (else it waits for the stall); those buffers take 13 to 20 KiB,
	// depending on the sizes of the writes and on when the kernel moves
	// them along. The drain delay, far shorter than the stall, ends the
	// hold.
	const first, last = 36 << 10, 4 << 10
	p := start(t, Options{
		Kind: process.KindPTY, Retention: 64 << 10, AttachStall: time.Minute, DrainDelay: 200 * time.Millisecond,
		Cmd: fmt.Sprintf("%s; read go; head -c %d /dev/urandom", rawWriter(first), last),
	})
	waitOutput(t, p, "R")
	a, err := p.Attach(t.Context())
	require.NoError(t, err)
	defer a.Close()
	read := make(chan drained, 1)
	go func() { read <- drain(a, func() { <-p.Done() }) }()
	require.NoError(t, p.WriteStdin([]byte("\n")))
	eventually(t, "the output is held back for the reader", func() bool {
		p.gate.mu.Lock()
		defer p.gate.mu.Unlock()
		return p.gate.written-a.offset > p.gate.bound
	})
	require.NoError(t, p.WriteStdin([]byte("\n")))
	require.True(t, sameResult(wait(t, p), process.ExitedWith(0)))
	const total = 1 + first + last
	assert.Equal(t, total, len(logText(p.Log(), 0)), "the log's bytes")
	d := <-read
	require.NoError(t, d.err)
	assert.Equal(t, int64(total), d.got, "the reader's bytes")
	assert.Zero(t, d.gapReports, "the reader's gaps")
}

// TestAttachStallCountsFromTheFirstUnreadByte: a reader that has read all
// there is waits for more, which is no stall. Its clock stood still while
// another reader held the output back, and once that one was left behind,
// the first bytes that came put the reader that had kept up more than the
// bound behind, read nothing for longer than the stall time as its clock
// said: it was left behind at once, and missed output (TestAttachStalledReader,
// now and then in CI).
func TestAttachStallCountsFromTheFirstUnreadByte(t *testing.T) {
	t.Parallel()
	g := &gate{bound: 100, stall: time.Hour}
	slow, fast := &Attachment{}, &Attachment{}
	g.add(slow)
	g.add(fast)
	g.wrote(50)
	g.advance(fast, 50) // all there is, read
	g.mu.Lock()
	slow.released = true        // left behind: it read nothing for the stall time
	fast.progress = time.Time{} // long since, as while the slow one held the output
	g.mu.Unlock()
	g.wrote(500) // more than the bound, come at once
	done := make(chan struct{})
	go func() {
		g.wait() // returns once fast has read, or is left behind
		close(done)
	}()
	// The wait waits (its wake channel made) for fast to read, or has
	// returned, having left fast behind.
	waiting := func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.wake != nil
	}
	for returned := false; !returned && !waiting(); {
		select {
		case <-done:
			returned = true
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case <-done:
		t.Fatal("the reader that had read all there was was left behind at once")
	default:
	}
	g.advance(fast, 500)
	<-done
}
