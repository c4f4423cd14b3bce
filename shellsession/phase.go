package shellsession

import (
	"fmt"

	"github.com/conchsh/conch/process"
)

// phase is where a command is in its life. It only moves forward, along the
// transitions of phaseNext; any other move is an error (see advanceLocked).
type phase uint8

const (
	// phaseQueued: in the session's queue, nothing of it has reached the shell.
	phaseQueued phase = iota
	// phaseAnnounced: the engine has taken the command up and sent its frame
	// (or settled it without the shell: empty text, a syntax error); the
	// shell has not said that it runs it.
	phaseAnnounced
	// phaseRunning: the shell runs it (its start marker came, or the shell
	// announces nothing).
	phaseRunning
	// phaseEnding: its end is known — its stdout's end marker came and its
	// stderr was read to the end with it, or the marker was given up — and
	// its result is about to be set.
	phaseEnding
	// phaseEnded: terminal; its result is set and Done is closed.
	phaseEnded
)

var phaseNames = [...]string{"queued", "announced", "running", "ending", "ended"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// phaseNext lists the legal moves out of each phase. A command may end from
// any phase (it is deleted while queued, the shell dies under it), and may end
// before the shell is seen to run it (its start marker comes after its end).
var phaseNext = [...][]phase{
	phaseQueued:    {phaseAnnounced, phaseEnded},
	phaseAnnounced: {phaseRunning, phaseEnding, phaseEnded},
	phaseRunning:   {phaseEnding, phaseEnded},
	phaseEnding:    {phaseEnded},
	phaseEnded:     nil,
}

func (p phase) canMoveTo(to phase) bool {
	if int(p) >= len(phaseNext) {
		return false
	}
	for _, n := range phaseNext[p] {
		if n == to {
			return true
		}
	}
	return false
}

// state is the process state a phase shows as.
func (p phase) state() process.State {
	switch p {
	case phaseQueued:
		return process.Starting
	case phaseEnded:
		return process.Terminal
	}
	return process.Running
}

// phaseError is a move between two phases of a command that its life does
// not allow, such as running a command that has ended. It is a bug in the
// engine, or a command ended (deleted) at the moment it was taken up.
type phaseError struct {
	ID       string
	From, To string
}

func (e *phaseError) Error() string {
	return fmt.Sprintf("command %s: cannot move from %s to %s", e.ID, e.From, e.To)
}

// advanceLocked moves the command to phase to, or returns a *phaseError and
// leaves it where it is. c.mu is held.
func (c *Command) advanceLocked(to phase) error {
	if !c.phase.canMoveTo(to) {
		return &phaseError{ID: c.id, From: c.phase.String(), To: to.String()}
	}
	c.phase = to
	return nil
}
