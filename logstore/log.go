package logstore

import (
	"math/bits"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/plaintext"
)

// DefaultRetention is the retention of a Log whose Options leave it zero.
const DefaultRetention = 8 << 20

// MinRetention is the smallest retention a Log takes. A smaller
// Options.Retention is raised to it.
const MinRetention = 64

// minFrames is the fewest frames a log may keep, whatever its retention.
const minFrames = 64

// liveWindow bounds what a KeepNone log holds for its live followers.
const liveWindow = 1 << 20

// Options configure a Log.
type Options struct {
	// Retention bounds the output bytes kept; the oldest frames are dropped
	// to stay within it (and within one frame per BytesPerFrame bytes of it),
	// and the newest frame is always kept. Zero (or less) means
	// DefaultRetention; less than MinRetention means MinRetention.
	Retention int
	// Keep is the policy; zero means KeepUntilCleanup. Under KeepNone pages
	// get no frames, and frames are kept (up to 1 MiB, or Retention if less)
	// only while a follower is there to read them.
	Keep KeepLogs
	// Held makes the log start with a reader to come, which Release ends:
	// under KeepNone its frames are kept for it as for a follower, up to
	// Retention (not 1 MiB) as under another policy. A run holds the log
	// of the process it answers for, whose output would otherwise be
	// dropped before the answer reads it.
	Held bool
}

// Log is the output of one process. It is safe for one writer per channel
// and any number of readers at once. Readers hold its lock only to copy a
// bounded batch of frame headers, never while they wait or deliver, so a slow
// reader never holds the writer back.
//
// The zero Log is not ready for use: make one with New, or Init a zero one.
// Write on a Log made neither way panics.
type Log struct {
	keep      KeepLogs
	retention int // bytes of frames kept at most
	frameCap  int // most frames kept: a power of two, which the frame table then fits
	frameMax  int // bytes of the largest frame: one frame always fits the budget

	mu        sync.Mutex  // guards everything below
	frames    ring        // retained frames, oldest first; cursors are consecutive
	size      int         // bytes of the retained frames
	seen      Cursor      // newest cursor handed to a reader: frames up to it never change
	kept      Cursor      // newest cursor handed to a reader that may keep its bytes
	borrowers []*borrower // the FollowLent calls running
	tail      []byte      // the newest frame's bytes, capacity to its chunk's end, while it is the chunk's last allocation
	blocks    []block     // the blocks holding retained frames, oldest first
	free      [][]byte    // blocks whose frames were all dropped and let go by every reader, for reuse
	last      Cursor      // cursor of the newest frame ever appended
	dropped   Cursor      // cursor of the newest frame no longer retained
	droppedN  int64       // bytes of the frames no longer retained
	lastTime  int64       // Unix nanoseconds of the newest frame
	pending   [PTY + 1]heldBack
	holdTimer *time.Timer // releases held-back bytes once held holdMax (see releaseHeld)
	holdArmed bool        // holdTimer is set to fire
	chunk     []byte      // the unused rest of the current arena chunk
	chunkSize int         // size of the current chunk
	chunkFrom Cursor      // the frames from here on are in the current chunk
	followers int         // Follow calls running, the hold (Options.Held) until Release, and the Holds
	held      bool
	holds     int // Hold calls not yet released
	holdKeeps int // the retention while a Hold lasts: Options.Retention's, not the live window
	closed    bool
	ended     uint64           // when it was closed, in the order of all logs' Close
	evicted   bool             // a Budget dropped frames of it
	acct      *Budget          // the budget it counts against, if any
	now       func() time.Time // the clock when not nil; tests fix it
	wake      chan struct{}    // made by a follower about to wait; closed and cleared when frames come or the log closes
}

// heldBack is the incomplete UTF-8 sequence at the end of a channel's output,
// held since the time since.
type heldBack struct {
	b     [utf8.UTFMax - 1]byte
	n     int
	since time.Time
}

// holdMax bounds how long held-back bytes keep their place behind another
// channel's output: once they have waited that long, a write on another
// channel puts them first, as their own frame, so that output keeps the
// order it came in (a program that printed half a character and then wrote
// to stderr for seconds showed the stderr first). Sooner, the other
// channel's frame goes ahead, and the character stays whole when its rest
// comes, as it does when one write of a buffered stream ends inside it.
const holdMax = 50 * time.Millisecond

// New returns an empty Log.
func New(opts Options) *Log {
	l := new(Log)
	l.Init(opts)
	return l
}

// Init makes l, a zero Log not yet used, an empty log as New does: for a
// log that lives inside the value that writes it, which spares an
// allocation.
func (l *Log) Init(opts Options) {
	r := opts.Retention
	if r <= 0 {
		r = DefaultRetention
	}
	r = max(r, MinRetention)
	keep := opts.Keep
	if keep == "" {
		keep = KeepUntilCleanup
	}
	l.holdKeeps = r
	if keep == KeepNone && !opts.Held {
		r = min(r, liveWindow) // a held log keeps for its answer what another would
	}
	l.keep, l.frameMax = keep, min(MaxFrame, r)
	l.keepLocked(r)
	if opts.Held {
		l.held, l.followers = true, 1
	}
}

// Release ends the hold of Options.Held: under KeepNone, with no follower
// left, the frames are dropped. Later calls do nothing.
func (l *Log) Release() {
	l.mu.Lock()
	held := l.held
	l.held = false
	l.mu.Unlock()
	if held {
		l.unfollow(nil)
	}
}

// Hold makes the log keep what comes from now on for a reader to come, as
// Options.Held does from the start, until release is called (once or more):
// under KeepNone an interact's answer holds the output written while it
// waited, which would otherwise be dropped as it came.
func (l *Log) Hold() (release func()) {
	release, _ = l.HoldFrom()
	return release
}

// HoldFrom is Hold, and also returns the cursor of the newest frame at the
// hold, handed out as a page's are: the frames after it are what the hold
// keeps, all that is written from the hold on.
func (l *Log) HoldFrom() (release func(), from Cursor) {
	l.mu.Lock()
	from = l.last
	l.handLocked(from)
	l.followers++
	l.holds++
	if l.keep == KeepNone && l.holds == 1 {
		// What a held log keeps for its answer (Options.Held), not the
		// live window of a KeepNone log's followers.
		l.keepLocked(max(l.retention, l.holdKeeps))
	}
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.holds--
			if l.keep == KeepNone && l.holds == 0 && !l.held {
				l.keepLocked(min(l.retention, liveWindow))
				l.trimLocked()
			}
			l.mu.Unlock()
			l.unfollow(nil)
		})
	}, from
}

// keepLocked makes r the bytes of frames retained, and the frame cap that
// goes with it. l.mu must be held.
func (l *Log) keepLocked(r int) {
	// Rounded down to a power of two, the cap is also the most slots the
	// frame table takes: at BytesPerFrame, that is half the retention in
	// memory, where a cap just past a power of two would double it.
	most := max(minFrames, r/BytesPerFrame)
	l.retention, l.frameCap = r, 1<<(bits.Len(uint(most))-1)
}

// Retention returns the bytes of output the log retains at most now (a
// Hold widens it under KeepNone).
func (l *Log) Retention() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retention
}

// Keep returns the log's policy.
func (l *Log) Keep() KeepLogs { return l.keep }

// Write appends p on channel ch, which must be Stdout, Stderr or PTY. An
// incomplete UTF-8 sequence at the end of p is held back until the next write
// on ch, so that no frame splits one, for holdMax at most (then it goes out
// as a frame of its own, before a write on another channel or by a timer),
// or until Seal or Close. Writes after Close are dropped. Write never waits
// for a reader. It does not keep p.
func (l *Log) Write(ch Channel, p []byte) {
	if !ch.valid() {
		panic("logstore: write on " + ch.String())
	}
	if l.frameMax == 0 {
		// Set by Init only, never changed: with none, the write would
		// loop for ever, cutting empty frames, holding the lock.
		panic("logstore: Write on a Log made neither by New nor by Init")
	}
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	for c := range l.pending {
		if other := &l.pending[c]; c != int(ch) && other.n > 0 && l.nowLocked().Sub(other.since) >= holdMax {
			l.releaseLocked(Channel(c))
		}
	}
	held := &l.pending[ch]
	j := joined{held.b[:held.n], p}
	var buf [utf8.UTFMax - 1]byte
	tail := j.tail(buf[:])
	// A character left unfinished is held back until more arrive, so that
	// no frame splits one; a start that can no longer become valid goes
	// out as it is, in a frame that is not text.
	hold := plaintext.IncompleteTail(tail)
	l.appendLocked(ch, j, j.len()-hold)
	held.n = copy(held.b[:], tail[len(tail)-hold:])
	if hold > 0 {
		held.since = l.nowLocked()
		l.armHoldLocked()
	}
	acct := l.acct
	l.mu.Unlock()
	if acct != nil {
		acct.enforce()
	}
}

// armHoldLocked sets the timer that releases held-back bytes, unless it is
// set, or the clock is a test's, which moves it itself. l.mu must be held.
func (l *Log) armHoldLocked() {
	switch {
	case l.holdArmed || l.now != nil:
	case l.holdTimer == nil:
		l.holdTimer = time.AfterFunc(holdMax, l.releaseHeld)
	default:
		l.holdTimer.Reset(holdMax)
	}
	l.holdArmed = true
}

// releaseHeld puts out, each as a frame of its own, the bytes held back
// holdMax or longer, whatever comes next: a program that printed the start
// of a character and went quiet (a prompt cut, or binary output) had it
// held until it wrote again, out of every page, stream and answer, and
// then reported in the answer to the input it waited for. The timer is set
// again for bytes held since.
func (l *Log) releaseHeld() {
	l.mu.Lock()
	l.holdArmed = false
	if l.closed {
		l.mu.Unlock()
		return
	}
	now := l.nowLocked()
	var next time.Duration
	for c := range l.pending {
		held := &l.pending[c]
		if held.n == 0 {
			continue
		}
		if wait := holdMax - now.Sub(held.since); wait > 0 {
			next = max(next, wait)
			continue
		}
		l.releaseLocked(Channel(c))
	}
	if next > 0 {
		l.holdTimer.Reset(next)
		l.holdArmed = true
	}
	acct := l.acct
	l.mu.Unlock()
	if acct != nil {
		acct.enforce()
	}
}

// Writer returns an io.Writer that appends on ch.
func (l *Log) Writer(ch Channel) *ChannelWriter { return &ChannelWriter{l: l, ch: ch} }

// ChannelWriter is an io.Writer onto one channel of a Log.
type ChannelWriter struct {
	l  *Log
	ch Channel
}

// Write appends p; it never fails.
func (w *ChannelWriter) Write(p []byte) (int, error) {
	w.l.Write(w.ch, p)
	return len(p), nil
}

// appendLocked appends the first n bytes of j as frames on ch and wakes the
// followers. l.mu must be held.
func (l *Log) appendLocked(ch Channel, j joined, n int) {
	if n == 0 {
		return
	}
	t := l.nowLocked()
	for off := 0; off < n; {
		end := n
		if most := l.pieceLocked(n - off); n-off > most {
			end = j.cutBefore(off, most)
		}
		switch {
		case (l.keep == KeepNone && l.followers == 0) || n-end >= l.retention:
			// Nobody could read it: no follower of a KeepNone log, or the
			// rest of this write alone pushes it out.
			l.last++
			l.dropAllLocked()
			l.droppedN += int64(end - off)
		case l.mergeLocked(ch, j, off, end, t):
		default:
			l.last++
			data := l.allocLocked(j, off, end)
			l.pushLocked(Frame{Cursor: l.last, Channel: ch, Data: data, Time: t})
			l.trimLocked()
		}
		off = end
	}
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// nowLocked returns the time for new frames: the clock, but never earlier
// than the newest frame's. l.mu must be held.
func (l *Log) nowLocked() time.Time {
	t := time.Now()
	if l.now != nil {
		t = l.now()
	}
	if ns := t.UnixNano(); ns > l.lastTime {
		l.lastTime = ns
		return t
	}
	return time.Unix(0, l.lastTime)
}

// trimLocked drops the oldest frames until the rest fit the retention and
// the frame cap. Each frame fits them alone, so the newest stays. l.mu must
// be held.
func (l *Log) trimLocked() {
	for l.size > l.retention || l.frames.len() > l.frameCap {
		l.popLocked()
	}
}

// pushLocked appends f to the retained frames, making room for it first
// when they are at the frame cap, so that the frame table never grows past
// the cap. l.mu must be held.
func (l *Log) pushLocked(f Frame) {
	for l.frames.len() >= l.frameCap {
		l.popLocked()
	}
	slots := l.frames.slots()
	l.frames.push(f)
	l.tableChangedLocked(slots)
	l.growLocked(len(f.Data))
}

// popLocked drops the oldest frame. l.mu must be held.
func (l *Log) popLocked() {
	slots := l.frames.slots()
	f := l.frames.pop()
	l.tableChangedLocked(slots)
	l.growLocked(-len(f.Data))
	l.dropped = f.Cursor
	l.droppedN += int64(len(f.Data))
	l.releaseBlocksLocked(f.Cursor)
}

// growLocked adds delta to the bytes of retained frames, and to the budget
// the log counts against. l.mu must be held.
func (l *Log) growLocked(delta int) {
	l.size += delta
	if l.acct != nil {
		l.acct.bytes.Add(int64(delta))
	}
}

// tableChangedLocked tells the budget the log counts against that its frame
// table, of slots slots before, has grown or shrunk. The table changes size
// by doubling or halving, so this counts seldom, never at every frame.
// l.mu must be held.
func (l *Log) tableChangedLocked(slots int) {
	if d := l.frames.slots() - slots; d != 0 && l.acct != nil {
		l.acct.tables.Add(int64(d * frameSize))
	}
}

// heldLocked returns what the log holds as its budget counts it: the bytes
// of its frames, and the memory of its frame table, their bookkeeping.
// l.mu must be held.
func (l *Log) heldLocked() int { return l.size + l.frames.slots()*frameSize }

// dropAllLocked drops every frame appended so far. l.mu must be held.
func (l *Log) dropAllLocked() {
	slots := l.frames.slots()
	l.frames.clear()
	l.tableChangedLocked(slots)
	l.droppedN += int64(l.size)
	l.growLocked(-l.size)
	l.dropped = l.last
	l.tail = nil
	l.releaseBlocksLocked(l.last)
}

// Close flushes held-back bytes and marks the log ended: followers get End
// after the last frame. Close is idempotent.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.releaseAllLocked()
	if l.holdTimer != nil {
		l.holdTimer.Stop()
		l.holdArmed = false
	}
	l.closed = true
	l.ended = closeSeq.Add(1)
	l.blocks, l.free = nil, nil
	l.shrinkChunkLocked()
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// Seal ends the newest frame: what is written after it goes in new frames,
// never merged into one holding bytes from before. It returns the cursor of
// the newest frame, so that a caller about to cause output (by writing to
// the process's input) can read exactly what came after: the reply never
// hides in a frame that began before it.
//
// Bytes held back (see Write) go first, each as a frame of its own: they
// were written before, and would otherwise come with the reply.
func (l *Log) Seal() Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.releaseAllLocked()
	}
	l.tail = nil
	return l.last
}

// releaseAllLocked puts out the bytes held back on every channel, each as
// a frame of its own. l.mu must be held.
func (l *Log) releaseAllLocked() {
	for ch := range l.pending {
		l.releaseLocked(Channel(ch))
	}
}

// releaseLocked puts out the bytes held back on ch (see Write) as a frame
// of their own: not text, they would make the frame before them, which no
// reader may have seen yet, base64 with them, nor the text that follows.
// l.mu must be held.
func (l *Log) releaseLocked(ch Channel) {
	held := &l.pending[ch]
	if held.n == 0 {
		return
	}
	l.tail = nil
	l.appendLocked(ch, joined{a: held.b[:held.n]}, held.n)
	l.tail = nil
	held.n = 0
}

// Closed reports whether Close was called.
func (l *Log) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Page is one page of frames.
type Page struct {
	Frames []Frame
	// Next is the cursor to ask for the following page: the last frame's
	// cursor, or when the page is empty the cursor asked for (moved past
	// what was dropped, so that asking again does not report it again).
	Next Cursor
	// TruncatedHead is true when frames after the cursor asked for were
	// dropped by retention (or never kept, under KeepNone).
	TruncatedHead bool
	// FirstAvailable is the cursor of the oldest retained frame, or zero
	// when none is retained.
	FirstAvailable Cursor
	// Last is the cursor of the newest frame ever appended.
	Last Cursor
}

// pageStep is how many frame headers a Page copies per hold of the lock, so
// that a large page does not hold the writer back for long.
const pageStep = 4096

// Page returns at most limit frames after cursor after (limit <= 0: all
// that are retained). Under KeepNone it has no frames.
func (l *Log) Page(after Cursor, limit int) Page { return l.PageBytes(after, limit, 0) }

// PageBytes is Page, and also stops before the frame that would take the
// page's bytes over maxBytes (maxBytes <= 0: no bound); the first frame is
// always in the page.
func (l *Log) PageBytes(after Cursor, limit, maxBytes int) Page {
	l.mu.Lock()
	p := Page{Next: after, Last: l.last}
	if l.keep == KeepNone {
		p.TruncatedHead = after < p.Last
		p.Next = max(after, p.Last)
		l.handLocked(p.Next)
		l.mu.Unlock()
		return p
	}
	p.TruncatedHead = after < l.dropped
	if l.frames.len() > 0 {
		p.FirstAvailable = l.frames.at(0).Cursor
	}
	i, n := l.afterLocked(after)
	if limit > 0 {
		n = min(n, limit)
	}
	if n == 0 {
		p.Next = max(after, l.dropped)
		l.handLocked(p.Next)
		l.mu.Unlock()
		return p
	}
	if maxBytes <= 0 {
		maxBytes = int(^uint(0) >> 1)
	}
	bytes := 0
	for {
		want := min(n-len(p.Frames), pageStep)
		var k int
		k, bytes = l.fitLocked(i, want, bytes, maxBytes, len(p.Frames) == 0)
		p.Frames = slices.Grow(p.Frames, k)[:len(p.Frames)+k]
		l.copyOutLocked(p.Frames[len(p.Frames)-k:], i)
		if len(p.Frames) == n || k < want {
			break
		}
		l.mu.Unlock()
		l.mu.Lock()
		// The writer may have dropped what comes next meanwhile: then the
		// page ends here, and the next one reports the truncation.
		next := p.Frames[len(p.Frames)-1].Cursor
		if next < l.dropped {
			break
		}
		i, _ = l.afterLocked(next)
	}
	l.mu.Unlock()
	p.Next = p.Frames[len(p.Frames)-1].Cursor
	return p
}

// fitLocked returns how many of the k frames from the i-th retained one fit
// in maxBytes, given the bytes already taken, and the bytes then taken; the
// first frame of a page fits whatever its size. l.mu must be held.
func (l *Log) fitLocked(i, k, bytes, maxBytes int, first bool) (int, int) {
	for j := range k {
		size := len(l.frames.at(i + j).Data)
		if bytes+size > maxBytes && !(first && j == 0) {
			return j, bytes
		}
		bytes += size
	}
	return k, bytes
}

// copyOutLocked copies the retained frames from the i-th on into dst, for
// a reader that may keep their bytes, and marks them seen: they never change
// after that. l.mu must be held.
func (l *Log) copyOutLocked(dst []Frame, i int) {
	if len(dst) == 0 {
		return
	}
	l.lendOutLocked(dst, i)
	l.kept = max(l.kept, dst[len(dst)-1].Cursor)
}

// lendOutLocked is copyOutLocked for a reader that is done with the bytes
// before it next takes the lock (see FollowLent): their blocks may be reused
// once that reader has let them go. l.mu must be held.
func (l *Log) lendOutLocked(dst []Frame, i int) {
	if len(dst) == 0 {
		return
	}
	l.frames.copyOut(dst, i)
	l.seen = max(l.seen, dst[len(dst)-1].Cursor)
	for k := range dst {
		// A reader gets only the frame's bytes, never room to append
		// after them in its chunk.
		d := dst[k].Data
		dst[k].Data = d[:len(d):len(d)]
	}
}

// handLocked marks cursor c handed to a reader, though none of its bytes
// were: its frame grows no more, so that a reader that reads on after c
// misses none of what comes. l.mu must be held.
func (l *Log) handLocked(c Cursor) { l.seen = max(l.seen, min(c, l.last)) }

// offsetLocked returns the bytes of output up to and including the frame
// at cursor c, if the log knows them: c is 0, the newest dropped frame's or
// a retained frame's. l.mu must be held.
func (l *Log) offsetLocked(c Cursor) (int64, bool) {
	switch {
	case c == 0:
		return 0, true
	case c < l.dropped:
		return 0, false
	}
	n := l.droppedN
	for i := 0; i < l.frames.len() && l.frames.at(i).Cursor <= c; i++ {
		n += int64(len(l.frames.at(i).Data))
	}
	return n, true
}

// afterLocked returns the index of the first retained frame after cursor
// after, and how many retained frames follow it. l.mu must be held.
func (l *Log) afterLocked(after Cursor) (i, n int) {
	if l.frames.len() == 0 || after >= l.last {
		return 0, 0
	}
	first := l.frames.at(0).Cursor
	if after < first {
		return 0, l.frames.len()
	}
	i = int(after - first + 1)
	return i, l.frames.len() - i
}

// Bounds reports whether the head was dropped (or, under KeepNone, whether
// anything was written), the first retained cursor as a page sees it (zero
// when none) and the last cursor ever appended. The last cursor is handed
// out, as a page's are: what is written after Bounds goes in frames after
// it, so that a reader that reads on from it misses none of it.
func (l *Log) Bounds() (truncatedHead bool, first, last Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handLocked(l.last)
	if l.keep == KeepNone {
		return l.last > 0, 0, l.last
	}
	if l.frames.len() > 0 {
		first = l.frames.at(0).Cursor
	}
	return l.dropped > 0, first, l.last
}
