package localsandbox

import (
	"context"
	"errors"
	"io"

	"github.com/conchsh/conch/logstore"
)

// ErrOutputDropped is returned by a reader of Process.Stdout or Stderr that
// fell so far behind that output it had not read yet was dropped by the
// log's retention; reading again goes on from the oldest output retained.
var ErrOutputDropped = errors.New("output dropped: the reader fell behind the log's retention")

// pageFrames is how many frames an outputReader takes from the log at once.
const pageFrames = 64

// outputReader reads one channel of a process's log, waiting for output
// while the log is open. It holds at most one page of frames; their bytes
// are the log's own, which are never modified.
type outputReader struct {
	log   *logstore.Log
	ch    logstore.Channel
	after logstore.Cursor  // the last frame taken from the log, of any channel
	page  []logstore.Frame // frames taken but not looked at yet
	rest  []byte           // unread bytes of the current frame
}

// newOutputReader returns a reader of ch from the first byte l retains: one
// made after the log's start was dropped fell behind nothing, and goes on
// from there without ErrOutputDropped (io.ReadAll got nothing but the
// error), while output dropped after it was made is said.
func newOutputReader(l *logstore.Log, ch logstore.Channel) *outputReader {
	r := &outputReader{log: l, ch: ch}
	if dropped, first, last := l.Bounds(); dropped {
		r.after = last
		if first > 0 {
			r.after = first - 1
		}
	}
	return r
}

func (r *outputReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// WriteTo writes the rest of the channel's output to w, straight from the
// log's frames, and returns at the end with a nil error (io.Copy uses it).
func (r *outputReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.fill(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		n, err := w.Write(r.rest)
		total += int64(n)
		r.rest = r.rest[n:]
		if err != nil {
			return total, err
		}
	}
}

// fill makes r.rest hold unread bytes, waiting for them while the log is
// open. It returns io.EOF at the end and ErrOutputDropped after a gap.
func (r *outputReader) fill() error {
	for len(r.rest) == 0 {
		if len(r.page) > 0 {
			if f := r.page[0]; f.Channel == r.ch {
				r.rest = f.Data
			}
			r.page = r.page[1:]
			continue
		}
		closed := r.log.Closed() // before the page, so the page holds every frame
		pg := r.log.Page(r.after, pageFrames)
		if pg.TruncatedHead {
			r.after = pg.Next
			if len(pg.Frames) > 0 {
				r.after = pg.Frames[0].Cursor - 1
			}
			return ErrOutputDropped
		}
		if len(pg.Frames) > 0 {
			r.page, r.after = pg.Frames, pg.Next
			continue
		}
		if closed {
			return io.EOF
		}
		// Wait for the next frame or the end: a Follow that stops at its
		// first event leaves no goroutine behind.
		r.log.Follow(context.Background(), r.after, func(logstore.Event) bool { return false })
	}
	return nil
}
