package shellsession

import (
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
)

// newlineHold writes a command's stderr to its log, except for the newline
// interactive zsh writes there when it reaps a program killed by SIGINT: at
// a terminal it moves the prompt off the line of the ^C, and with no
// terminal zsh writes it to its fd 2, which is then the command's stderr.
// After an interrupt the engine sent, a lone newline read by itself is held
// back: bytes that follow send it on, the end marker drops it. A program that
// writes a lone newline as its last word on an interrupt, and then exits
// rather than die of SIGINT, loses it.
type newlineHold struct {
	c    *Command
	held bool
}

var newline = []byte{'\n'}

// stderrHold returns what holds back the newline of the command's stderr,
// in h's room when it has one, or nil for a shell other than zsh.
func (c *Command) stderrHold(h *newlineHold) *newlineHold {
	if c.s.sh.Family != shells.Zsh {
		return nil
	}
	if h == nil {
		h = &newlineHold{}
	}
	*h = newlineHold{c: c}
	return h
}

func (h *newlineHold) write(b []byte) {
	if h.held {
		h.held = false
		h.c.log.Write(logstore.Stderr, newline)
	}
	if len(b) == 1 && b[0] == '\n' && h.c.wasInterrupted() {
		h.held = true
		return
	}
	h.c.log.Write(logstore.Stderr, b)
}

// flush writes a newline still held: the stream ended without its marker.
func (h *newlineHold) flush() {
	if h != nil && h.held {
		h.held = false
		h.c.log.Write(logstore.Stderr, newline)
	}
}

func (c *Command) wasInterrupted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupted || c.timedOut
}
