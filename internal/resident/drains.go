package resident

import (
	"os"

	"github.com/conchsh/conch/process"
)

// AddDrain records f as a stream still read, perhaps after its command
// ended, so that the session's end closes it and its reader returns. It
// returns false when the session has ended: the caller closes f itself.
func (h *Host) AddDrain(f *os.File) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing && h.state == process.Terminal {
		return false
	}
	h.drains[f] = true
	return true
}

// DropDrain forgets f, which its reader is done with.
func (h *Host) DropDrain(f *os.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.drains, f)
}

// release stops reading the streams that children still hold, then lets
// the embedder close what it keeps.
func (h *Host) release() {
	h.mu.Lock()
	fs := h.drains
	h.drains = make(map[*os.File]bool)
	h.mu.Unlock()
	for f := range fs {
		f.Close()
	}
	if h.cfg.Release != nil {
		h.cfg.Release()
	}
}
