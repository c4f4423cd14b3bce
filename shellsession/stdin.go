package shellsession

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/process"
)

// stdinBuffer holds what is written to a command's open stdin until the
// shell opens the command's stdin FIFO and the feeder writes it there.
type stdinBuffer struct {
	mu     sync.Mutex // guards the fields below
	cond   *sync.Cond
	chunks [][]byte
	eof    bool // CloseStdin was called
	closed bool // the command ended: nothing more is written
	input  stdinInput
}

func (b *stdinBuffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// WriteStdin queues p for the command's stdin. It fails with
// process.ErrStdinNotOpen unless the command was submitted with stdin open,
// and with process.ErrUnsupported after CloseStdin or the command's end.
func (c *Command) WriteStdin(p []byte) error {
	if c.opts.Stdin != process.StdinOpen {
		return process.ErrStdinNotOpen
	}
	b := &c.stdin
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eof || b.closed {
		return fmt.Errorf("%w: stdin is closed", process.ErrUnsupported)
	}
	if len(p) > 0 {
		b.chunks = append(b.chunks, append([]byte(nil), p...))
		b.cond.Broadcast()
	}
	return nil
}

// CloseStdin gives the command end-of-file once what was written is read.
func (c *Command) CloseStdin() error {
	if c.opts.Stdin != process.StdinOpen {
		return process.ErrStdinNotOpen
	}
	b := &c.stdin
	b.mu.Lock()
	b.eof = true
	b.mu.Unlock()
	b.cond.Broadcast()
	return nil
}

// feedStdin opens the command's stdin FIFO (once the shell opens it to read)
// and writes the queued bytes to it, closing it at end-of-file.
func (c *Command) feedStdin(path string) {
	defer c.s.wg.Done()
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_CLOEXEC, 0) // returns once the shell opens it to read
	close(c.stdinOpened)
	if err != nil {
		return
	}
	defer f.Close()
	c.stdin.setInput(f)
	if !c.s.addDrain(f) {
		return
	}
	defer c.s.dropDrain(f)
	b := &c.stdin
	for {
		b.mu.Lock()
		for len(b.chunks) == 0 && !b.eof && !b.closed {
			b.cond.Wait()
		}
		chunks := b.chunks
		b.chunks = nil
		stop := b.closed || (b.eof && len(chunks) == 0)
		b.input.writing = !stop
		b.mu.Unlock()
		if stop {
			return
		}
		for _, p := range chunks {
			if _, err := f.Write(p); err != nil {
				return
			}
		}
		b.written()
	}
}

// unblockStdin releases the feeder's open still waiting for a shell that
// died before it opened the command's stdin: opening the other end without
// blocking lets it return. An open that has not begun yet cannot be released,
// so this repeats until the feeder's open has returned.
func (c *Command) unblockStdin(path string) {
	deadline := time.After(drainAfterExit)
	for {
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		select {
		case <-c.stdinOpened:
			return
		case <-deadline:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
