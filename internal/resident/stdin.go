package resident

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/process"
)

// Stdin holds what is written to a command's open stdin until its feeder
// writes it to the command's stdin FIFO, and knows what the input watcher
// needs: the FIFO, and whether bytes written have not reached it yet.
type Stdin struct {
	open  bool // the command was submitted with stdin open
	gated bool // end-of-file waits for Opened

	mu      sync.Mutex // guards the fields below
	cond    sync.Cond
	chunks  [][]byte
	queue   process.StdinQueue // bytes in chunks and those the feeder has not written yet
	dropped int64              // what was queued, or in the FIFO unread, once Close was first called
	unread  int64              // what the FIFO held unread when the feeder stopped at the command's end, or as its reader closed it
	eof     bool               // CloseWrite was called
	closed  bool               // the command ended: nothing more is written
	opened  bool               // the reader has opened the FIFO
	f       *os.File           // the FIFO, once the feeder has it
	kept    *os.File           // a reader of the FIFO that never reads, kept from end-of-file to the command's end (see rawcall.Keep)

	in      inputwait.Input
	known   bool          // in is the FIFO
	writing bool          // the feeder took bytes it has not written yet
	fed     chan struct{} // closed once the feeder has stopped; nil until it starts
}

// Init prepares b for a command whose stdin is open or not. With gated
// set, end-of-file is given only once Opened is called: the feeder's
// descriptor is the FIFO's only writer until the reader opens it, and what
// was written would go with it.
func (b *Stdin) Init(open, gated bool) {
	b.cond.L = &b.mu
	b.open, b.gated = open, gated
}

// Write queues p for the command's stdin; it never waits for the command
// to read. It fails with process.ErrStdinNotOpen unless the command was
// submitted with stdin open, with process.ErrUnsupported after CloseWrite
// or the command's end, and with a *process.StdinFullError when p does not
// fit in the queue (its first Accepted bytes were queued).
func (b *Stdin) Write(p []byte) error {
	if !b.open {
		return process.ErrStdinNotOpen
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return fmt.Errorf("%w: stdin is closed: the command has ended", process.ErrUnsupported)
	case b.eof:
		return fmt.Errorf("%w: stdin is closed: its end of file was sent", process.ErrUnsupported)
	}
	n, err := b.queue.Admit(len(p))
	if n > 0 {
		b.chunks = append(b.chunks, append([]byte(nil), p[:n]...))
		b.cond.Broadcast()
	}
	return err
}

// Queued returns the bytes written and not yet taken by the command: none
// once it ended, when what is left is dropped.
func (b *Stdin) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0
	}
	return b.queue.Queued
}

// Dropped returns the bytes that were written and still queued when the
// command ended, not taken by its FIFO: zero before its end.
func (b *Stdin) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// CloseWrite gives the command end-of-file once what was written is read.
// It fails with process.ErrStdinNotOpen unless stdin is open.
func (b *Stdin) CloseWrite() error {
	if !b.open {
		return process.ErrStdinNotOpen
	}
	b.mu.Lock()
	b.eof = true
	b.mu.Unlock()
	b.cond.Broadcast()
	return nil
}

// Opened records that the command's side has opened the FIFO.
func (b *Stdin) Opened() {
	b.mu.Lock()
	b.opened = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// Close stops the feeder at the command's end, also one blocked writing to
// a full FIFO.
//
// What was dropped is what the feeder had not written to the FIFO once it
// stopped, and what the FIFO then held, unread, also after end-of-file,
// when the feeder has closed its end (a reader kept tells): counted at
// once, a line
// the command had read and ended on was counted when the feeder had written
// it and not yet said so. The feeder, whose write the deadline cuts short,
// is waited for briefly (a job the command left may hold the FIFO open and
// keep a write of its waiting).
func (b *Stdin) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	if b.f != nil && b.f.SetWriteDeadline(time.Now()) != nil {
		b.f.Close() // not in the poller: the close ends a write
	}
	fed := b.fed
	b.mu.Unlock()
	b.cond.Broadcast()
	if fed != nil {
		select {
		case <-fed:
		case <-time.After(feederWait):
		}
	}
	b.mu.Lock()
	if b.kept != nil {
		b.unread = rawcall.Unread(b.kept)
		b.kept.Close()
		b.kept = nil
	}
	b.dropped = int64(b.queue.Queued) + b.unread
	b.mu.Unlock()
}

// feederWait bounds how long Close waits for the feeder to stop.
const feederWait = 100 * time.Millisecond

// Feed writes the queued bytes to f, the command's stdin FIFO, until
// end-of-file or the command's end, and closes f.
func (b *Stdin) Feed(f *os.File) {
	defer f.Close()
	in, err := inputwait.InputOf(f)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.f, b.in, b.known = f, in, err == nil
	fed := make(chan struct{})
	b.fed = fed
	b.mu.Unlock()
	var werr error
	var kept *os.File // at end-of-file
	defer func() {
		b.mu.Lock()
		if b.closed || errors.Is(werr, syscall.EPIPE) {
			// Never read: dropped too (see Close). With its reader
			// gone (the command closed its stdin), what the FIFO holds
			// goes with the close below, before the command's end.
			b.unread = rawcall.Unread(f)
			if kept != nil {
				kept.Close()
			}
		} else {
			// Closed at end-of-file: what the FIFO still holds at the
			// command's end was not read, and only a reader of the
			// FIFO's can tell then (see Close).
			b.kept = kept
		}
		b.mu.Unlock()
		close(fed)
	}()
	for {
		b.mu.Lock()
		for len(b.chunks) == 0 && !(b.eof && (b.opened || !b.gated)) && !b.closed {
			b.cond.Wait()
		}
		chunks := b.chunks
		b.chunks = nil
		stop := b.closed || (b.eof && len(chunks) == 0)
		eof := stop && !b.closed
		b.writing = !stop
		b.mu.Unlock()
		if stop {
			if eof {
				kept = rawcall.Keep(f)
			}
			return
		}
		for _, p := range chunks {
			n, err := f.Write(p)
			b.mu.Lock()
			b.queue.Queued -= n
			b.mu.Unlock()
			if err != nil {
				werr = err
				return
			}
		}
		b.mu.Lock()
		b.writing = false
		b.mu.Unlock()
	}
}

// Waitable returns the FIFO a command reading its stdin would wait on. ok
// is false once stdin was closed, and while bytes written to it have not
// reached the FIFO: the command cannot be waiting for input then.
func (b *Stdin) Waitable() (in inputwait.Input, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in, b.open && b.known && !b.writing && len(b.chunks) == 0 && !b.eof && !b.closed
}
