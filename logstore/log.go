package logstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultRetention is the retention of a Log whose Options leave it zero.
const DefaultRetention = 8 << 20

// maxFrame bounds the bytes of one frame, so that a huge write does not
// become one frame that retention must drop whole.
const maxFrame = 64 << 10

// liveWindow is what a KeepNone log holds back for its live followers.
const liveWindow = 1 << 20

// Channel names the stream a frame came from.
type Channel uint8

// The channels.
const (
	Stdout Channel = iota + 1
	Stderr
	PTY
)

func (c Channel) String() string {
	switch c {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case PTY:
		return "pty"
	}
	return "channel(" + strconv.Itoa(int(c)) + ")"
}

// KeepLogs is a retention policy for a process's frames.
type KeepLogs string

// The keep-logs policies. The zero value means KeepUntilCleanup.
const (
	KeepUntilCleanup KeepLogs = "until_cleanup" // until the process is deleted
	KeepOnExitTTL    KeepLogs = "on_exit_ttl"   // until a configured time after exit
	KeepNone         KeepLogs = "none"          // no frames kept; live followers still get them
)

// ParseKeepLogs parses a policy name; "" is KeepUntilCleanup.
func ParseKeepLogs(s string) (KeepLogs, error) {
	switch k := KeepLogs(s); k {
	case "":
		return KeepUntilCleanup, nil
	case KeepUntilCleanup, KeepOnExitTTL, KeepNone:
		return k, nil
	}
	return "", fmt.Errorf("unknown keepLogs %q", s)
}

// Cursor identifies a frame; cursors strictly increase within a Log. The zero
// Cursor is before the first frame. On the wire it is an opaque string.
type Cursor uint64

func (c Cursor) String() string { return strconv.FormatUint(uint64(c), 10) }

// ParseCursor parses a cursor's string form; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad cursor %q", s)
	}
	return Cursor(n), nil
}

// Frame is one piece of output.
type Frame struct {
	Cursor  Cursor
	Channel Channel
	Data    []byte // never modified after it is appended
	Time    time.Time
}

// IsText reports whether the frame's bytes are valid UTF-8.
func (f Frame) IsText() bool { return utf8.Valid(f.Data) }

// Options configure a Log.
type Options struct {
	// Retention bounds the bytes of frames kept. Zero means DefaultRetention.
	Retention int
	// Keep is the policy; KeepNone keeps frames only for live followers.
	Keep KeepLogs
}

// Log is the output of one process. It is safe for one writer and many
// readers at once.
type Log struct {
	keep      KeepLogs
	retention int // bytes kept for followers (and for pages unless KeepNone)

	mu      sync.Mutex // guards everything below
	frames  []Frame    // retained, oldest first
	size    int        // bytes in frames
	last    Cursor     // cursor of the newest frame ever appended
	dropped Cursor     // cursor of the newest frame dropped from the head
	pending [PTY + 1][]byte
	closed  bool
	wake    chan struct{} // closed and replaced whenever frames are added or the log closes
}

// New returns an empty Log.
func New(opts Options) *Log {
	r := opts.Retention
	if r <= 0 {
		r = DefaultRetention
	}
	keep := opts.Keep
	if keep == "" {
		keep = KeepUntilCleanup
	}
	if keep == KeepNone && r > liveWindow {
		r = liveWindow
	}
	return &Log{keep: keep, retention: r, wake: make(chan struct{})}
}

// Keep returns the log's policy.
func (l *Log) Keep() KeepLogs { return l.keep }

// Write appends p on channel ch. An incomplete UTF-8 sequence at the end of p
// is held back until the next write on ch or Close, so that no frame splits
// one. Writes after Close are dropped. Write never waits for a reader.
func (l *Log) Write(ch Channel, p []byte) {
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	data := p
	if pend := l.pending[ch]; len(pend) > 0 {
		data = append(pend, p...)
		l.pending[ch] = nil
	}
	cut := completeUTF8(data)
	if cut < len(data) {
		l.pending[ch] = append([]byte(nil), data[cut:]...)
		data = data[:cut]
	}
	l.appendLocked(ch, data)
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

// appendLocked splits data into frames at UTF-8 boundaries and appends them,
// copying the bytes. l.mu must be held.
func (l *Log) appendLocked(ch Channel, data []byte) {
	if len(data) == 0 {
		return
	}
	now := time.Now()
	buf := make([]byte, len(data)) // one allocation for every frame of this write
	copy(buf, data)
	for len(buf) > 0 {
		n := min(len(buf), maxFrame)
		if n < len(buf) {
			n = frameCut(buf, n)
		}
		l.last++
		l.frames = append(l.frames, Frame{Cursor: l.last, Channel: ch, Data: buf[:n:n], Time: now})
		l.size += n
		buf = buf[n:]
	}
	l.trimLocked()
	close(l.wake)
	l.wake = make(chan struct{})
}

// trimLocked drops frames from the head until the retained bytes fit.
func (l *Log) trimLocked() {
	i := 0
	for l.size > l.retention && i < len(l.frames)-1 {
		l.size -= len(l.frames[i].Data)
		l.dropped = l.frames[i].Cursor
		i++
	}
	if l.size > l.retention && i == len(l.frames)-1 {
		// A single frame larger than retention keeps its tail.
		f := &l.frames[i]
		over := l.size - l.retention
		f.Data = f.Data[frameCut(f.Data, over):]
		l.size = len(f.Data)
	}
	if i > 0 {
		clear(l.frames[:i])
		l.frames = l.frames[i:]
		if cap(l.frames) > 2*len(l.frames)+64 {
			l.frames = append([]Frame(nil), l.frames...)
		}
	}
}

// Close flushes held-back bytes and marks the log ended: followers get End
// after the last frame. Close is idempotent.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for ch, pend := range l.pending {
		l.appendLocked(Channel(ch), pend)
		l.pending[ch] = nil
	}
	l.closed = true
	close(l.wake)
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
	// cursor, or the cursor asked for when the page is empty.
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

// Page returns at most limit frames after cursor after (limit <= 0: all).
func (l *Log) Page(after Cursor, limit int) Page {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Page{Next: after, Last: l.last}
	if l.keep == KeepNone {
		p.TruncatedHead = after < l.last
		return p
	}
	if len(l.frames) > 0 {
		p.FirstAvailable = l.frames[0].Cursor
	}
	p.TruncatedHead = after < l.dropped
	fs := l.framesAfterLocked(after)
	if limit > 0 && len(fs) > limit {
		fs = fs[:limit]
	}
	if len(fs) > 0 {
		p.Frames = append([]Frame(nil), fs...)
		p.Next = fs[len(fs)-1].Cursor
	}
	return p
}

// framesAfterLocked returns the retained frames with cursors above after, as
// a view of l.frames. l.mu must be held.
func (l *Log) framesAfterLocked(after Cursor) []Frame {
	if len(l.frames) == 0 || after >= l.last {
		return nil
	}
	first := l.frames[0].Cursor
	if after < first {
		return l.frames
	}
	// Cursors are dense: frame i has cursor first+i.
	return l.frames[after-first+1:]
}

// Bounds reports whether the head was dropped and the first and last cursors.
func (l *Log) Bounds() (truncatedHead bool, first, last Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.frames) > 0 && l.keep != KeepNone {
		first = l.frames[0].Cursor
	}
	return l.dropped > 0 || (l.keep == KeepNone && l.last > 0), first, l.last
}

// Event is one step of a Follow: exactly one field is set.
type Event struct {
	Frame   *Frame
	Warning *Warning
	End     bool // the log is closed and every frame was delivered
}

// Warning tells a follower that frames after its cursor were dropped before
// it read them; it goes on from FirstAvailable.
type Warning struct {
	Message        string
	FirstAvailable Cursor
}

// Follow calls yield with the frames after cursor after, then with frames as
// they are appended, then with an End event once the log is closed, and
// returns. It returns early when yield returns false or ctx is done, with
// ctx.Err(). A follower that falls behind retention gets a Warning and goes on
// from the oldest retained frame; it never holds the writer back.
func (l *Log) Follow(ctx context.Context, after Cursor, yield func(Event) bool) error {
	for {
		l.mu.Lock()
		var warn *Warning
		if after < l.dropped && (len(l.frames) == 0 || after < l.frames[0].Cursor-1) {
			first := l.dropped + 1
			warn = &Warning{
				Message:        fmt.Sprintf("frames after cursor %d were dropped by retention; continuing from %d", after, first),
				FirstAvailable: first,
			}
			after = l.dropped
		}
		batch := l.framesAfterLocked(after)
		closed, wake := l.closed, l.wake
		l.mu.Unlock()

		if warn != nil && !yield(Event{Warning: warn}) {
			return nil
		}
		for i := range batch {
			if !yield(Event{Frame: &batch[i]}) {
				return nil
			}
			after = batch[i].Cursor
		}
		if len(batch) > 0 {
			continue // more may have come, or the batch was dropped meanwhile
		}
		if closed {
			yield(Event{End: true})
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// completeUTF8 returns the length of the longest prefix of p that does not
// end inside an incomplete UTF-8 sequence.
func completeUTF8(p []byte) int {
	n := len(p)
	for i := n - 1; i >= 0 && i >= n-3; i-- {
		b := p[i]
		if b < 0x80 {
			return n // ASCII: nothing incomplete
		}
		if b >= 0xC0 { // a start byte: is its sequence complete?
			need := 2
			if b >= 0xF0 {
				need = 4
			} else if b >= 0xE0 {
				need = 3
			}
			if n-i < need && utf8.FullRune(p[i:]) == false && b < 0xF8 {
				return i
			}
			return n
		}
	}
	return n
}

// frameCut returns a cut point at or before n that does not split a UTF-8
// sequence (or n itself when no boundary is near, as in binary data).
func frameCut(p []byte, n int) int {
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			return i
		}
	}
	return n
}
