package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/conchsh/conch/api"
)

// WholeOutput calls yield with each frame of r's whole output, in order,
// every byte once, as docs/api.md says a client joins an answer with logs
// pages: when the answer left bytes out (OmittedBytes), its frames up to the
// one whose cursor is OmittedAfter (none when no frame has it), then the
// frames of logs pages from OmittedAfter up to the one whose cursor is
// r.Next, or to a page whose head retention dropped; else r.Logs. id is the
// process the answer is of (r.ProcessID when empty). It reports whether
// retention dropped some of the omitted frames before they were read (the
// frames after them are then not given), and stops at the first error, the
// daemon's or yield's. A page that does not move on (its last frame's
// cursor was asked for already) is an error, given before its frames: it
// would be paged for ever. So are pages that go on past the bytes the
// answer says lie between OmittedAfter and r.Next (OmittedBytes and those
// of its frames after the head, each frame counted one byte at least)
// without reaching it: the daemon's never do, and new cursors without end
// would be paged for ever too.
func (c *Client) WholeOutput(ctx context.Context, id string, r *RunResult, yield func(LogFrame) error) (dropped bool, err error) {
	if id == "" {
		id = r.ProcessID
	}
	if r.OmittedBytes <= 0 {
		return false, yieldAll(r.Logs, yield)
	}
	head := slices.IndexFunc(r.Logs, func(f LogFrame) bool { return f.Cursor == r.OmittedAfter })
	if err := yieldAll(r.Logs[:head+1], yield); err != nil {
		return false, err
	}
	// The bytes of the frames after OmittedAfter up to r.Next: those the
	// answer left out, and those of its frames after the head (cut, and
	// the tail).
	room := r.OmittedBytes
	for _, f := range r.Logs[head+1:] {
		b, err := f.Bytes()
		if err != nil {
			return false, err
		}
		room += int64(len(b))
	}
	cursor := r.OmittedAfter
	seen := map[string]bool{cursor: true}
	for {
		page, err := c.Logs(ctx, id, LogsOptions{Cursor: cursor})
		if err != nil {
			return dropped, err
		}
		if page.TruncatedHead {
			// Frames after the last one taken were dropped (a process
			// that writes on outran the paging): the join cannot be
			// whole, and the frame r.Next names may be gone with them,
			// so that paging on would never end.
			return true, nil
		}
		if len(page.Items) == 0 {
			return dropped, nil
		}
		// Next is the page's last frame's cursor: cursors only increase.
		if seen[page.Next] || page.Next == "" {
			return dropped, againError("the logs of "+id, "next", page.Next)
		}
		seen[page.Next] = true
		for _, f := range page.Items {
			b, err := f.Bytes()
			if err != nil {
				return dropped, err
			}
			if room -= int64(max(len(b), 1)); room < 0 {
				return dropped, fmt.Errorf("the logs of %s: pages past the %d bytes the answer left out and held after its head, its next %q not among them: not the daemon's answer",
					id, r.OmittedBytes, api.Clip([]byte(r.Next)))
			}
			if err := yield(f); err != nil {
				return dropped, err
			}
			if f.Cursor == r.Next {
				return dropped, nil
			}
		}
		cursor = page.Next
	}
}

func yieldAll(frames []LogFrame, yield func(LogFrame) error) error {
	for _, f := range frames {
		if err := yield(f); err != nil {
			return err
		}
	}
	return nil
}
