package shellsession

import (
	"slices"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

// InputTree returns the command's processes — the shell itself, which runs
// it (and is the reader of a read builtin), and the processes started by
// it — and the stdin FIFO they would wait on. ok is false when the command
// does not run with stdin open, when its stdin was closed, or while input
// written to it has not reached the FIFO yet: it cannot be waiting then.
func (c *Command) InputTree() (pids []int, in inputwait.Input, ok bool) {
	in, ok = c.stdin.Waitable()
	c.mu.Lock()
	running := c.phase.state() == process.Running
	c.mu.Unlock()
	if !ok || !running {
		return nil, in, false
	}
	return append([]int{c.s.cmd.Process.Pid}, c.processes()...), in, true
}

// Tree returns the processes the command started that are still alive,
// background jobs included, also after it ended: the shell's children it
// started between its start and its end, and their descendants, whenever
// those started (a server's workers). Later commands' processes are told
// apart by their pids, handed out after it ended.
func (c *Command) Tree() []int {
	c.mu.Lock()
	ended := c.phase == phaseEnded
	if ended && c.endPID == pidNotRead {
		// No command has started since it ended: any pid up to now.
		c.endPID = proctree.LastPID()
	}
	end := c.endPID
	c.mu.Unlock()
	work, _ := proctree.StartedUnder(c.s.cmd.Process.Pid, func(children []int) []int {
		own := c.own(children)
		if !ended || end < 0 {
			return own
		}
		return slices.DeleteFunc(own, func(pid int) bool { return proctree.PIDAfter(pid, end) })
	})
	return work
}
