package logstore

import (
	"bytes"
	"unicode/utf8"
)

// Excerpt is the retained output after a cursor, cut to a bound on its text:
// its head and its tail, and what lies between.
type Excerpt struct {
	// Head is the first frames; when nothing was omitted, every frame. When
	// something was, its last frame may be cut: a frame's first bytes, under
	// the frame's cursor.
	Head []Frame
	// Tail is the last frames, after the omitted bytes; empty when nothing
	// was omitted. Its first frame may be cut: a frame's last bytes. When the
	// head and the tail both end inside one frame, both hold a piece of it.
	Tail []Frame
	// Omitted is the bytes between Head and Tail.
	Omitted int
	// OmittedAfter, when Omitted is not zero, is the cursor of the last whole
	// frame of Head or, when Head holds no whole frame, the cursor before the
	// excerpt's first frame: the frames after it, up to Next, are the whole
	// output from the end of those whole frames on.
	OmittedAfter Cursor
	// Next is the cursor of the last frame in the excerpt, or, when it has
	// none, what Page would give as Next.
	Next Cursor
	// TruncatedHead is as for Page: frames after the cursor asked for were
	// dropped (or never kept, under KeepNone).
	TruncatedHead bool
}

// lineSlack is how far before (head) or after (tail) its limit a cut moves to
// fall at a line end.
const lineSlack = 256

// invalidCost is what a byte that is not part of a UTF-8 character costs in
// text: at most the U+FFFD that stands for it.
const invalidCost = len(string(utf8.RuneError))

// runeCost returns the size of the character b starts with, and what it
// costs in text.
func runeCost(b []byte) (size, cost int) {
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError && size == 1 {
		return 1, invalidCost
	}
	return size, size
}

// textCost returns what b costs in text: its bytes, each byte that is not
// part of a UTF-8 character counted as invalidCost.
func textCost(b []byte) int {
	if utf8.Valid(b) {
		return len(b)
	}
	cost := 0
	for len(b) > 0 {
		size, c := runeCost(b)
		cost += c
		b = b[size:]
	}
	return cost
}

// pos is a place in the excerpt's frames: before byte off of frame k. A
// normal pos has off < the frame's size, or is {n, 0}, the end.
type pos struct{ k, off int }

// frameView reads the n retained frames from the i-th on; l.mu must be held
// while it is used.
type frameView struct {
	l    *Log
	i, n int
}

func (v frameView) data(k int) []byte { return v.l.frames.at(v.i + k).Data }

// norm moves p at a frame's end to the next frame's start.
func (v frameView) norm(p pos) pos {
	for p.k < v.n && p.off >= len(v.data(p.k)) {
		p = pos{p.k + 1, p.off - len(v.data(p.k))}
	}
	return p
}

// cost returns what the bytes from a to b cost in text.
func (v frameView) cost(a, b pos) int {
	cost := 0
	for k := a.k; k <= b.k && k < v.n; k++ {
		d := v.data(k)
		lo, hi := 0, len(d)
		if k == a.k {
			lo = a.off
		}
		if k == b.k {
			hi = b.off
		}
		cost += textCost(d[lo:hi])
	}
	return cost
}

// raw returns the bytes from a to b.
func (v frameView) raw(a, b pos) int {
	n := 0
	for k := a.k; k <= b.k && k < v.n; k++ {
		hi := len(v.data(k))
		if k == b.k {
			hi = b.off
		}
		n += hi
		if k == a.k {
			n -= a.off
		}
	}
	return n
}

// headEnd returns the end of the longest head from start that costs at most
// budget, cut at a character boundary, moved back to just after a newline
// when one is within lineSlack bytes.
func (v frameView) headEnd(budget int) pos {
	p := pos{}
	for p.k < v.n {
		d := v.data(p.k)
		if c := textCost(d); c <= budget {
			budget -= c
			p = pos{p.k + 1, 0}
			continue
		}
		for p.off < len(d) {
			size, c := runeCost(d[p.off:])
			if c > budget {
				break
			}
			budget -= c
			p.off += size
		}
		break
	}
	// The last newline before p, within lineSlack bytes.
	k, off, left := p.k, p.off, lineSlack
	for left > 0 {
		if off == 0 {
			if k--; k < 0 {
				break
			}
			off = len(v.data(k))
			continue
		}
		lo := max(0, off-left)
		if j := bytes.LastIndexByte(v.data(k)[lo:off], '\n'); j >= 0 {
			return v.norm(pos{k, lo + j + 1})
		}
		left -= off - lo
		off = lo
	}
	return p
}

// tailStart returns the start of the longest tail that costs at most budget
// and begins at or after from, at a character boundary, moved on to just
// after a newline when one is within lineSlack bytes (and is not the last
// byte).
func (v frameView) tailStart(from pos, budget int) pos {
	p := pos{v.n, 0}
	for p.k > from.k {
		d := v.data(p.k - 1)
		lo := 0
		if p.k-1 == from.k {
			lo = from.off
		}
		if c := textCost(d[lo:]); c <= budget && lo == 0 {
			budget -= c
			p = pos{p.k - 1, 0}
			continue
		}
		k, end := p.k-1, len(d)
		for end > lo {
			_, size := utf8.DecodeLastRune(d[lo:end])
			_, c := runeCost(d[end-size : end])
			if c > budget {
				break
			}
			budget -= c
			end -= size
		}
		p = v.norm(pos{k, end})
		break
	}
	if p.k >= v.n {
		return p
	}
	// The first newline from the byte before p on, within lineSlack bytes.
	k, off := p.k, p.off-1
	if off < 0 {
		if k--; k < 0 {
			return p
		}
		off = len(v.data(k)) - 1
	}
	left := lineSlack
	for left > 0 && k < v.n {
		d := v.data(k)
		hi := min(len(d), off+left)
		if j := bytes.IndexByte(d[off:hi], '\n'); j >= 0 {
			q := v.norm(pos{k, off + j + 1})
			if q.k < v.n {
				return q
			}
			return p
		}
		left -= hi - off
		k, off = k+1, 0
	}
	return p
}

// Excerpt returns the frames after cursor after when their text costs at
// most limit bytes (limit <= 0: no bound): a byte that is not part of a
// UTF-8 character costs invalidCost, any other one byte. Else it returns a
// head of at most half of limit and a tail of at most the rest, each cut at
// a character boundary (at a line end when one is within lineSlack bytes
// of the cut), and says what lies between. Under KeepNone it has no frames
// but while the log is held (Options.Held, Hold): it is what the holder
// reads.
func (l *Log) Excerpt(after Cursor, limit int) Excerpt {
	return l.ExcerptTo(after, 0, limit)
}

// ExcerptTo is Excerpt of the frames after cursor after up to cursor to
// and no further (to 0: to the end), as if the log ended there.
func (l *Log) ExcerptTo(after, to Cursor, limit int) Excerpt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep == KeepNone && !l.held && l.holds == 0 {
		e := Excerpt{Next: max(after, l.last), TruncatedHead: after < l.last}
		l.handLocked(e.Next)
		return e
	}
	e := Excerpt{Next: max(after, l.dropped), TruncatedHead: after < l.dropped}
	i, n := l.afterLocked(after)
	if to > 0 && to < l.last {
		n = max(0, n-int(l.last-to))
	}
	if n == 0 {
		l.handLocked(e.Next)
		return e
	}
	v := frameView{l: l, i: i, n: n}
	fits := limit <= 0
	if !fits {
		cost := 0
		for k := 0; k < n && cost <= limit; k++ {
			cost += textCost(v.data(k))
		}
		fits = cost <= limit
	}
	if fits {
		e.Head = make([]Frame, n)
		l.copyOutLocked(e.Head, i)
		e.Next = e.Head[n-1].Cursor
		return e
	}
	end := pos{n, 0}
	head := v.headEnd(limit / 2)
	tail := v.tailStart(head, limit-v.cost(pos{}, head))
	e.Omitted = v.raw(head, tail)
	e.OmittedAfter = e.Next
	if head.k > 0 {
		e.OmittedAfter = l.frames.at(i + head.k - 1).Cursor
	}
	e.Head = l.framesBetweenLocked(v, pos{}, head)
	e.Tail = l.framesBetweenLocked(v, tail, end)
	// The tail is empty only when its one character costs more than the
	// rest of the limit; Next is still the last frame's, handed out then
	// without its bytes, so that it grows no more: a reader that reads on
	// from Next misses none of what comes.
	e.Next = l.frames.at(i + n - 1).Cursor
	l.handLocked(e.Next)
	return e
}

// framesBetweenLocked returns the frames from a to b, the first and the last cut to
// the bytes between them. l.mu must be held.
func (l *Log) framesBetweenLocked(v frameView, a, b pos) []Frame {
	last := b.k
	if b.off == 0 {
		last--
	}
	if last < a.k {
		return nil
	}
	fs := make([]Frame, last-a.k+1)
	l.copyOutLocked(fs, v.i+a.k)
	if b.off > 0 {
		d := fs[len(fs)-1].Data
		fs[len(fs)-1].Data = d[:b.off:b.off]
	}
	fs[0].Data = fs[0].Data[a.off:]
	return fs
}
