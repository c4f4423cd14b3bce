package exec

import (
	"slices"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/proctree"
)

// InputTree returns the process and its descendants, and the input they
// would wait on: its stdin pipe or its terminal. ok is false when the
// process has no open input or has ended; then nothing needs watching.
func (p *Process) InputTree() (pids []int, in inputwait.Input, ok bool) {
	p.mu.Lock()
	f := p.in
	if p.pty != nil {
		f = p.pty
	}
	closed := p.exited || f == nil || (p.pty == nil && p.stdinClosed)
	pid := p.info.PID
	p.mu.Unlock()
	if closed || (p.feed != nil && p.feed.pending()) {
		// Input still queued reaches the process before it could wait.
		return nil, inputwait.Input{}, false
	}
	in, err := inputwait.InputOf(f)
	if err != nil { // closed under us: the process ended
		return nil, inputwait.Input{}, false
	}
	return append([]int{pid}, proctree.Descendants(pid)...), in, true
}

// Tree returns the processes of the process, running or left behind: itself
// while it runs, its descendants and the processes that carry its tag.
func (p *Process) Tree() []int {
	p.mu.Lock()
	pid, exited := p.info.PID, p.exited
	p.mu.Unlock()
	var pids []int
	if !exited && pid > 0 {
		pids = append(pids, pid)
		pids = append(pids, proctree.Descendants(pid)...)
	}
	for _, t := range proctree.Tagged(p.id) {
		if !slices.Contains(pids, t) {
			pids = append(pids, t)
		}
	}
	return pids
}
