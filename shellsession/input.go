package shellsession

import (
	"os"
	"time"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/process"
)

// stdinInput is what the input watcher needs of a command's open stdin.
// Guarded by the stdinBuffer's mu.
type stdinInput struct {
	in      inputwait.Input // the stdin FIFO, once the feeder opened it
	known   bool
	writing bool // the feeder took bytes it has not written yet
}

func (b *stdinBuffer) setInput(f *os.File) {
	in, err := inputwait.InputOf(f)
	b.mu.Lock()
	b.input.in, b.input.known = in, err == nil
	b.mu.Unlock()
}

func (b *stdinBuffer) written() {
	b.mu.Lock()
	b.input.writing = false
	b.mu.Unlock()
}

// InputTree returns the command's processes — the shell itself, which runs
// it (and is the reader of a read builtin), and the processes started by
// it — and the stdin FIFO they would wait on. ok is false when the command
// does not run with stdin open, when its stdin was closed, or while input
// written to it has not reached the FIFO yet: it cannot be waiting then.
func (c *Command) InputTree() (pids []int, in inputwait.Input, ok bool) {
	if c.opts.Stdin != process.StdinOpen {
		return nil, in, false
	}
	b := &c.stdin
	b.mu.Lock()
	in = b.input.in
	ok = b.input.known && !b.input.writing && len(b.chunks) == 0 && !b.eof && !b.closed
	b.mu.Unlock()
	c.mu.Lock()
	running := c.st == process.Running
	c.mu.Unlock()
	if !ok || !running {
		return nil, in, false
	}
	return append([]int{c.s.cmd.Process.Pid}, c.own(inputwatch.Descendants(c.s.cmd.Process.Pid))...), in, true
}

// own keeps of the shell's descendants those that are the command's, as
// processes does, from a list found more cheaply than by its scan of
// every process.
func (c *Command) own(descendants []int) []int {
	c.mu.Lock()
	started, last := c.startedAt, c.lastPID
	c.mu.Unlock()
	since := started.Add(-20 * time.Millisecond)
	boot := bootTime()
	var out []int
	for _, pid := range descendants {
		if st, ok := startTime(pid, boot); ok && !st.Before(since) && pidAfter(pid, last) {
			out = append(out, pid)
		}
	}
	return out
}

// Tree returns the processes the command started that are still alive,
// background jobs included, also after it ended: those the shell started
// between its start and its end. Later commands' processes are told apart by
// their pids, handed out after it ended.
func (c *Command) Tree() []int {
	c.mu.Lock()
	ended, end := c.st == process.Terminal, c.endPID
	c.mu.Unlock()
	var out []int
	for _, pid := range c.processes() {
		if !ended || end < 0 || !pidAfter(pid, end) {
			out = append(out, pid)
		}
	}
	return out
}
