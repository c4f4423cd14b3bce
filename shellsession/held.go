package shellsession

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// heldStreams reads, and discards, what background jobs write to the
// streams of commands that have ended, until each job lets go of them
// (end-of-file), with one epoll set and one goroutine for all of a
// session's commands. A job started with & and no redirection (server &)
// holds its command's stdout and stderr for as long as it runs; each such
// command kept an epoll set and a goroutine of its own, with no bound, and
// at the daemon's limit of open files every later command failed. Now a
// held stream costs its read end, which cannot be closed while the job
// holds the stream: the job's next write would die of SIGPIPE.
type heldStreams struct {
	mu sync.Mutex // guards the fields below, and serializes changes to ep
	ep *epoller   // made at the first command whose streams are held; the session's end closes it
	// readers are the held streams' readers, by their id in ep.
	readers map[int32]*streamReader
	// commands counts, by command, the readers left of it.
	commands map[*Command]int
	running  bool // a goroutine reads ep (see drainHeld)
}

// holdOver leaves the readers still reading after their command's end to
// the session's held streams, out of the command's epoll set, which then
// serves the next commands; l keeps those it could not leave there (the
// set cannot be made, or the session ends), for a goroutine of its own.
// Only readers whose bytes are no command's any more are left so: after
// the command's end marker, or a given-up command's held output.
func (s *Session) holdOver(l *readLoop) {
	if l.err != nil {
		return
	}
	for _, r := range l.rs {
		if r != nil && !r.over && !r.unlinked {
			return // still the command's output (its shell exited under it)
		}
	}
	d := &s.held
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ep == nil {
		ep, err := newEpoller()
		if err != nil {
			return
		}
		if !s.h.AddDrain(ep.f) { // the session ends
			ep.close()
			return
		}
		d.ep = ep
		d.readers, d.commands = map[int32]*streamReader{}, map[*Command]int{}
	}
	for i, r := range l.rs {
		if r == nil {
			continue
		}
		// Into the held set first, then out of the command's: a job's
		// writes would wake the next commands that read with it. The set
		// reports at once what the stream holds now, or that its writers
		// are gone; drainHeld looks the reader up under d.mu, so it finds
		// it even when that report comes before the reader is recorded.
		if err := d.ep.add(r.rc, r.id); err != nil {
			continue
		}
		if l.ep.ctl(unix.EPOLL_CTL_DEL, r.rc, r.id) == nil {
			r.in = nil
		}
		r.ep = d.ep
		d.readers[r.id] = r
		d.commands[l.c]++
		l.rs[i] = nil
		l.live--
	}
	if len(d.readers) > 0 && !d.running {
		d.running = true
		s.wg.Add(1)
		go s.drainHeld()
	}
}

// drainHeld reads the held streams, what comes discarded, until none is
// left or the session's end closes the set.
func (s *Session) drainHeld() {
	defer s.wg.Done()
	d := &s.held
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	for {
		evs, err := d.ep.wait()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			d.ep.f.SetReadDeadline(time.Time{}) // nothing sets one; should it, wait on
			continue
		}
		if err != nil {
			// The session's end closed the set, and the streams.
			d.mu.Lock()
			rs := d.readers
			d.readers, d.commands, d.running = map[int32]*streamReader{}, map[*Command]int{}, false
			d.mu.Unlock()
			for _, r := range rs {
				r.end(err)
			}
			return
		}
		for _, ev := range evs {
			d.mu.Lock()
			r := d.readers[ev.Fd]
			d.mu.Unlock()
			if r == nil {
				continue
			}
			c := r.c // a stream done with is no command's: another may take it
			if s.discardHeld(r, *bp) {
				d.mu.Lock()
				delete(d.readers, ev.Fd)
				if d.commands[c]--; d.commands[c] <= 0 {
					delete(d.commands, c)
				}
				d.mu.Unlock()
			}
		}
		d.mu.Lock()
		if len(d.readers) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// discardHeld reads what a held stream holds, and discards it, until it is
// empty, and reports whether the stream is done with: at end-of-file, back
// in the pool or closed (see streamReader.end).
func (s *Session) discardHeld(r *streamReader, buf []byte) bool {
	d := &s.held
	for {
		n, err := r.read(buf)
		if err == nil && n == 0 {
			return false // empty: the set reports it again when more comes
		}
		if err == nil {
			continue
		}
		// Out of the held set before its end: a stream back in the pool
		// would wake this goroutine at each write of a later command.
		d.mu.Lock()
		d.ep.ctl(unix.EPOLL_CTL_DEL, r.rc, r.id)
		d.mu.Unlock()
		if r.end(err) {
			return true
		}
		// A writer opened it as it was to be discarded (see writerCame):
		// read on until that writer lets go.
		d.mu.Lock()
		err = d.ep.add(r.rc, r.id)
		d.mu.Unlock()
		if err != nil {
			return r.end(err)
		}
		return false
	}
}

// heldCommands counts the session's commands whose streams background jobs
// still hold (see holdOver).
func (s *Session) heldCommands() int {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	return len(s.held.commands)
}
