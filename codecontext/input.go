package codecontext

import (
	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

// InputTree returns the processes that may read the cell's stdin — the
// interpreter, which runs it (input(), process.stdin), and the processes
// the cell started — and the stdin FIFO they would wait on. ok is false
// when the cell does not run with stdin open, when its stdin was closed, or
// while input written to it has not reached the FIFO yet: it cannot be
// waiting then. Processes earlier cells left running are not the cell's: a
// sleeping one would make it look busy. They are its kin, though: the
// interpreter's event loop still takes what they write, which is no input
// the cell waits for.
func (cell *Cell) InputTree() (pids []int, in inputwait.Input, ok bool) {
	in, ok = cell.stdin.Waitable()
	if !ok || cell.state() != process.Running {
		return nil, in, false
	}
	// The driver waits for the engine's next message on its sockets: idle.
	in = in.WithQuietPeers(cell.c.connIn, cell.c.intr.quiet())
	pid := cell.c.cmd.Process.Pid
	own, kin := proctree.StartedUnder(pid, cell.own)
	return append([]int{pid}, own...), in.WithKin(kin), true
}
