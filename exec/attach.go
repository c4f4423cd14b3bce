package exec

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Attachment is a live duplex onto a PTY process, from [Process.Attach].
// Read returns the terminal's output: first what the log retains, then live
// bytes, then io.EOF once the process has ended and everything was read.
// Write sends input to the terminal. Several attachments can be open at
// once, each with its own reader.
//
// The terminal's output waits for its attached readers: while one of them
// is more than half the log's retention behind, the PTY is not read, so the
// program blocks in its writes as it would on a slow terminal. A reader
// that has read nothing for Options.AttachStall stops holding the output
// back; if it then falls behind what the log retains, its Read returns a
// *GapError, at the point of the gap, saying how many bytes it missed, and
// the next Read goes on from the oldest retained byte. Close detaches.
type Attachment struct {
	p      *Process
	ctx    context.Context // Attach's, ended by Close
	cancel context.CancelFunc
	pieces chan piece    // what the follower hands Read
	done   chan struct{} // closed when the follower has returned
	closed chan struct{} // closed by Close
	once   sync.Once
	end    error  // why the follower returned; read after pieces is closed
	rest   []byte // what Read has not yet returned of the last piece

	// Guarded by the gate's mu.
	offset   int64     // bytes read, and missed, so far
	progress time.Time // when it last read, or, having read all there was, more came
	released bool      // it stalled: the output no longer waits for it
}

// piece is a frame's bytes, or a gap of Bytes bytes.
type piece struct {
	data []byte
	gap  int64
}

// GapError is what Attachment.Read returns where the reader's output has a
// gap: Bytes bytes were dropped before it read them. Reading goes on.
type GapError struct{ Bytes int64 }

func (e *GapError) Error() string {
	return fmt.Sprintf("attach: %d bytes of output were dropped before they were read", e.Bytes)
}

// Attach attaches to a PTY process. It ends when ctx is done or Close is
// called. ErrNotPTY for an exec process.
func (p *Process) Attach(ctx context.Context) (*Attachment, error) {
	if p.pty == nil {
		return nil, process.ErrNotPTY
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &Attachment{
		p: p, ctx: ctx, cancel: cancel, pieces: make(chan piece),
		done: make(chan struct{}), closed: make(chan struct{}),
	}
	p.gate.add(a)
	go func() {
		defer close(a.done)
		err := p.log.Follow(ctx, 0, func(ev logstore.Event) bool {
			var pc piece
			switch {
			case ev.Frame != nil:
				pc.data = ev.Frame.Data
			case ev.Warning != nil && ev.Warning.Bytes != 0:
				pc.gap = ev.Warning.Bytes
			default:
				return true
			}
			select {
			case a.pieces <- pc:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if err == nil {
			err = io.EOF
		}
		a.end = err
		close(a.pieces)
	}()
	return a, nil
}

// Read reads the terminal's output. Where the output has a gap it returns
// 0 and a *GapError; later calls go on after the gap. It is not safe to
// call from several goroutines at once.
func (a *Attachment) Read(b []byte) (int, error) {
	for len(a.rest) == 0 {
		select {
		case pc, ok := <-a.pieces:
			if !ok {
				return 0, a.end
			}
			if pc.gap != 0 {
				if pc.gap > 0 {
					a.p.gate.advance(a, pc.gap)
				}
				return 0, &GapError{Bytes: pc.gap}
			}
			a.rest = pc.data
		case <-a.closed:
			return 0, io.ErrClosedPipe
		}
	}
	n := copy(b, a.rest)
	a.rest = a.rest[n:]
	a.p.gate.advance(a, int64(n))
	return n, nil
}

// Write sends b to the terminal as typed input. Unlike WriteStdin, it
// waits while the input queue is full, as a terminal's writer would, until
// the program reads, the process ends, Close is called or Attach's ctx is
// done; then it returns how many of b's first bytes were queued. After
// Close it sends nothing and returns io.ErrClosedPipe, as Read does.
func (a *Attachment) Write(b []byte) (int, error) {
	if err := a.ended(); err != nil {
		return 0, err
	}
	n, err := a.p.WriteStdinWait(a.ctx, b)
	if err != nil && a.ctx.Err() != nil {
		// The attachment ended (Close, or its client went away): the
		// rest of the input is not the program's to wait for.
		err = a.ended()
	}
	return n, err
}

// ended returns io.ErrClosedPipe once Close was called (which ends ctx
// too), ctx's error once ctx is done, and nil while the attachment lives.
func (a *Attachment) ended() error {
	select {
	case <-a.closed:
		return io.ErrClosedPipe
	default:
	}
	return a.ctx.Err()
}

// Resize changes the terminal's size; see [Process.Resize].
func (a *Attachment) Resize(size process.TerminalSize) error { return a.p.Resize(size) }

// Close detaches and waits until the attachment has stopped reading the
// log. It never ends the process.
func (a *Attachment) Close() error {
	a.once.Do(func() {
		close(a.closed) // first: a Write that sees ctx end says it was closed
		a.cancel()
		<-a.done
		a.p.gate.remove(a)
	})
	return nil
}

// gate holds a PTY's output back while an attached reader is behind: the
// goroutine that copies the PTY into the log waits before each read.
type gate struct {
	bound int64         // how far behind the output a reader may be
	stall time.Duration // how long the output waits for a reader that reads nothing

	mu       sync.Mutex
	written  int64 // bytes copied into the log
	attached map[*Attachment]bool
	open     bool          // the output no longer waits: the process has ended
	wake     chan struct{} // closed and cleared when a reader reads, leaves, or the gate opens
}

// add makes the output wait for a, which reads from the start: the
// retained output first.
func (g *gate) add(a *Attachment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.attached == nil {
		g.attached = make(map[*Attachment]bool)
	}
	a.progress = time.Now()
	g.attached[a] = true
	g.wakeLocked()
}

func (g *gate) remove(a *Attachment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.attached, a)
	g.wakeLocked()
}

// advance records that a has read (or missed) n more bytes. A reader that
// had stalled holds the output back again once it is within half the bound.
func (g *gate) advance(a *Attachment, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a.offset += n
	a.progress = time.Now()
	if a.released && g.written-a.offset <= g.bound/2 {
		a.released = false
	}
	g.wakeLocked()
}

func (g *gate) wakeLocked() {
	if g.wake != nil {
		close(g.wake)
		g.wake = nil
	}
}

// wrote records n more bytes copied into the log. A reader that had read
// all there was begins its stall's time now, at its first byte unread:
// waiting for output is no stall, and one that had kept up while another
// held the output back was otherwise left behind at once, its last read
// long past, as soon as the first bytes after put it past the bound.
func (g *gate) wrote(n int) {
	g.mu.Lock()
	if len(g.attached) > 0 {
		now := time.Now()
		for a := range g.attached {
			if a.offset >= g.written {
				a.progress = now
			}
		}
	}
	g.written += int64(n)
	g.mu.Unlock()
}

// release opens the gate for good: the output is drained without waiting.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	g.wakeLocked()
}

// wait returns once no attached reader is more than the bound behind,
// leaving behind a reader that has read nothing for the stall time.
func (g *gate) wait() {
	for {
		g.mu.Lock()
		if g.open {
			g.mu.Unlock()
			return
		}
		now := time.Now()
		var until time.Time
		for a := range g.attached {
			if a.released || g.written-a.offset <= g.bound {
				continue
			}
			t := a.progress.Add(g.stall)
			if !now.Before(t) {
				a.released = true
				continue
			}
			if until.IsZero() || t.Before(until) {
				until = t
			}
		}
		if until.IsZero() {
			g.mu.Unlock()
			return
		}
		if g.wake == nil {
			g.wake = make(chan struct{})
		}
		wake := g.wake
		g.mu.Unlock()
		timer := time.NewTimer(time.Until(until))
		select {
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}
