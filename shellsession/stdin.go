package shellsession

import (
	"os"
	"syscall"
	"time"
)

// WriteStdin queues p for the command's stdin. It fails with
// process.ErrStdinNotOpen unless the command was submitted with stdin open,
// and with process.ErrUnsupported after CloseStdin or the command's end.
func (c *Command) WriteStdin(p []byte) error { return c.stdin.Write(p) }

// StdinQueued returns the bytes written to the command's stdin that it has
// not taken yet.
func (c *Command) StdinQueued() int { return c.stdin.Queued() }

// CloseStdin gives the command end-of-file once what was written is read.
func (c *Command) CloseStdin() error { return c.stdin.CloseWrite() }

// feedStdin opens the command's stdin FIFO (once the shell opens it to read)
// and writes the queued bytes to it, closing it at end-of-file.
func (c *Command) feedStdin(path string) {
	defer c.s.wg.Done()
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0) // returns once the shell opens it to read
	close(c.stdinOpened)
	if err != nil {
		return
	}
	if !c.s.h.AddDrain(f) {
		f.Close()
		return
	}
	defer c.s.h.DropDrain(f)
	c.stdin.Feed(f)
}

// unblockStdin releases the feeder's open still waiting for a shell that
// died before it opened the command's stdin: opening the other end without
// blocking lets it return. An open that has not begun yet cannot be released,
// so this repeats until the feeder's open has returned.
func (c *Command) unblockStdin(path string) {
	deadline := time.After(c.s.opts.DrainDelay)
	for {
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0); err == nil {
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
