package logstore

// Excerpt is the retained output after a cursor, cut to about a number of
// bytes: its head and its tail in whole frames, and what lies between.
type Excerpt struct {
	// Head is the first frames; when nothing was omitted, every frame.
	Head []Frame
	// Tail is the last frames, after the omitted ones; empty when nothing
	// was omitted.
	Tail []Frame
	// Omitted is the bytes of the frames between Head and Tail.
	Omitted int
	// OmittedAfter is the cursor of the last frame of Head when Omitted is
	// not zero: the omitted frames are those after it and before Tail.
	OmittedAfter Cursor
	// Next is the cursor of the last frame in the excerpt, or, when it has
	// none, what Page would give as Next.
	Next Cursor
	// TruncatedHead is as for Page: frames after the cursor asked for were
	// dropped (or never kept, under KeepNone).
	TruncatedHead bool
}

// Excerpt returns the frames after cursor after when their bytes are at
// most limit (limit <= 0: no bound); else the first frames up to about half
// of limit and the last frames up to the rest, and what lies between. Head
// and Tail each hold at least one frame however large it is (at most
// MaxFrame bytes), so an excerpt's bytes are at most limit + 2*MaxFrame.
// Under KeepNone it has no frames.
func (l *Log) Excerpt(after Cursor, limit int) Excerpt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep == KeepNone {
		return Excerpt{Next: max(after, l.last), TruncatedHead: after < l.last}
	}
	e := Excerpt{Next: max(after, l.dropped), TruncatedHead: after < l.dropped}
	i, n := l.afterLocked(after)
	if n == 0 {
		return e
	}
	size := func(k int) int { return len(l.frames.at(i + k).Data) }
	total := 0
	for k := range n {
		total += size(k)
	}
	h, t := n, 0
	headBytes, tailBytes := total, 0
	if limit > 0 && total > limit {
		h, headBytes = 0, 0
		for h < n && (h == 0 || headBytes+size(h) <= limit/2) {
			headBytes += size(h)
			h++
		}
		for t < n-h && (t == 0 || tailBytes+size(n-1-t) <= limit-headBytes) {
			tailBytes += size(n - 1 - t)
			t++
		}
		if h+t == n {
			h, t = n, 0
		}
	}
	e.Head = make([]Frame, h)
	l.copyOutLocked(e.Head, i)
	e.Next = e.Head[h-1].Cursor
	if t > 0 {
		e.Tail = make([]Frame, t)
		l.copyOutLocked(e.Tail, i+n-t)
		e.Omitted = total - headBytes - tailBytes
		e.OmittedAfter = e.Next
		e.Next = e.Tail[t-1].Cursor
	}
	return e
}
