package client

import (
	"context"
	"slices"
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
// would be paged for ever.
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
