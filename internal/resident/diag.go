package resident

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/rawcall"
)

// Diag drains the interpreter's own stdout and stderr — a shell's prompts,
// traces of the engine's lines and job messages, what a driver writes
// between cells — so that the interpreter never blocks on them, keeps their
// last bytes to explain one that failed, and watches them for the markers a
// shell's frame writes there (a command's start, or its failure to open its
// streams).
type Diag struct {
	f     *os.File
	ended chan struct{} // closed once the interpreter's end of it is closed

	mu      sync.Mutex // guards the fields below
	last    []byte
	total   int64 // bytes read so far, of which last holds the end
	marked  int64 // how far the last watched marker seen reached, of total
	watches []watch
}

// watch tells w, without Diag.mu held, once marker appears, with the
// bytes that follow it up to a NUL when trailer is set.
type watch struct {
	marker  []byte
	trailer bool
	w       Watcher
}

// A Watcher is told that a marker it watches for came (see Diag.Watch). It
// is an interface rather than a function so that the command that watches
// can be one without an allocation: a method value is one.
type Watcher interface {
	// Seen is called once, with the marker's trailer when the watch asked
	// for one.
	Seen(trailer []byte)
}

// maxDiagTrailer bounds a watched marker's trailer (an exit status).
const maxDiagTrailer = 16

const diagKeep = 2048

// Watch arranges for w to be told once marker appears on the interpreter's
// stdout.
func (d *Diag) Watch(marker []byte, trailer bool, w Watcher) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watches = append(d.watches, watch{marker: marker, trailer: trailer, w: w})
}

// Unwatch drops the watch for marker, if it is still there.
func (d *Diag) Unwatch(marker []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, w := range d.watches {
		if bytes.Equal(w.marker, marker) {
			d.watches = slices.Delete(d.watches, i, i+1) // clears the tail: no closure kept
			return
		}
	}
}

// diagLinger is how long the reader waits for the end of the
// interpreter's own output once the session's processes are ended (see
// Diag.stopAfter): it comes at once unless a process that outlived KILL
// (stuck in the kernel, or frozen) holds the pipe, a subshell forked
// without an exec keeping the interpreter's descriptors of it.
const diagLinger = time.Second

// Ended is closed once every writer of the interpreter's own output has
// closed it (the interpreter has exited, with its children that kept it):
// Tail holds all there is.
func (d *Diag) Ended() <-chan struct{} { return d.ended }

// stopAfter stops the reader wait from now on, if the output has not
// ended by then, and closes its end of the pipe: Ended is closed then too.
func (d *Diag) stopAfter(wait time.Duration) {
	// A deadline, rather than a close: the reader returns from a wait
	// and closes the file itself, and a file it has closed already
	// refuses the deadline harmlessly.
	_ = d.f.SetReadDeadline(time.Now().Add(wait))
}

func (d *Diag) run() {
	defer close(d.ended)
	defer d.f.Close()
	rc, err := d.f.SyscallConn()
	if err != nil {
		return
	}
	// Read raw: a shell that announces its commands here writes for each.
	r := rawcall.NewReader(rc)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			for _, fire := range d.take(buf[:n]) {
				fire()
			}
		}
		if err != nil {
			return
		}
	}
}

// take adds p to the kept bytes and returns the calls of the watches whose
// markers (and trailers) are now complete.
func (d *Diag) take(p []byte) []func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := len(d.last)
	d.last = append(d.last, p...)
	d.total += int64(len(p))
	var fire []func()
	kept := d.watches[:0]
	for _, w := range d.watches {
		// A marker may straddle two reads, and its trailer a third: look
		// from just before the new bytes.
		from := max(0, prev-len(w.marker)-maxDiagTrailer)
		i := bytes.Index(d.last[from:], w.marker)
		if i >= 0 {
			rest := d.last[from+i+len(w.marker):]
			d.marked = max(d.marked, d.total-int64(len(rest)))
			if !w.trailer {
				fire = append(fire, func() { w.w.Seen(nil) })
				continue
			}
			if j := bytes.IndexByte(rest, 0); j >= 0 {
				t := append([]byte(nil), rest[:j]...)
				fire = append(fire, func() { w.w.Seen(t) })
				continue
			}
		}
		kept = append(kept, w)
	}
	clear(d.watches[len(kept):])
	d.watches = kept
	if len(d.last) > diagKeep {
		d.last = append(d.last[:0], d.last[len(d.last)-diagKeep:]...)
	}
	return fire
}

// Tail returns the last bytes the interpreter wrote, trimmed.
func (d *Diag) Tail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.TrimSpace(string(d.last))
}

// Written returns how many bytes of the interpreter's own output have been
// read so far: a mark for LastLine.
func (d *Diag) Written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// LastLine returns the last line that is not blank of what the interpreter
// wrote after the first from bytes (see Written) and after the last marker
// a watch saw (a command's start), as far as it is still kept: without its control characters and terminal escapes, a carriage
// return ending a line as a newline does, and at most limit bytes of its end.
// It is what an interpreter said last, as it ended: an idle bash that logs
// out says "timed out waiting for input: auto-logout".
func (d *Diag) LastLine(from int64, limit int) string {
	d.mu.Lock()
	p := d.last
	if skip := max(from, d.marked) - (d.total - int64(len(p))); skip > 0 {
		p = p[min(skip, int64(len(p))):]
	}
	var line []byte
	for rest := p; len(rest) > 0; {
		i := bytes.LastIndexAny(rest, "\n\r")
		if l := bytes.TrimSpace(plain(rest[i+1:])); len(l) > 0 {
			line = l
			break
		}
		if i < 0 {
			break
		}
		rest = rest[:i]
	}
	d.mu.Unlock()
	if len(line) > limit {
		line = line[len(line)-limit:]
	}
	return strings.ToValidUTF8(string(line), "")
}

// plain returns a copy of p without control characters and terminal
// escapes (ESC [ ... final byte), a tab made a space.
func plain(p []byte) []byte {
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		switch b := p[i]; {
		case b == 0x1b:
			if i+1 < len(p) && p[i+1] == '[' {
				i += 2
				for i < len(p) && (p[i] < 0x40 || p[i] > 0x7e) {
					i++
				}
			}
		case b == '\t':
			out = append(out, ' ')
		case b < 0x20 || b == 0x7f:
		default:
			out = append(out, b)
		}
	}
	return out
}
