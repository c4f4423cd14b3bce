package logstore

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type write struct {
	ch   Channel
	data string
}

type frameWant struct {
	ch   Channel
	data string
}

func (f frameWant) String() string { return f.ch.String() + ":" + strconv.Quote(f.data) }

// fixedClock is a clock that does not move, so that writes in a test merge
// however slowly the machine runs them.
func fixedClock() func() time.Time {
	t := time.Now()
	return func() time.Time { return t }
}

// writeFrame writes p so that it stays a frame of its own: the new frames
// are marked seen, as a reader copying them would, so that the next write
// does not extend them.
func writeFrame(l *Log, ch Channel, p []byte) {
	l.Write(ch, p)
	l.mu.Lock()
	l.seen = l.last
	l.mu.Unlock()
}

func frames(l *Log) []frameWant {
	var out []frameWant
	for _, f := range l.Page(0, 0).Frames {
		out = append(out, frameWant{f.Channel, string(f.Data)})
	}
	return out
}

func TestUTF8Framing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []write
		open   []frameWant // frames before Close
		closed []frameWant // frames after Close
	}{
		{
			name:   "two-byte sequence split",
			writes: []write{{Stdout, "h\xc3"}, {Stdout, "\xa9llo"}},
			open:   []frameWant{{Stdout, "h"}, {Stdout, "éllo"}},
		},
		{
			name:   "four-byte sequence byte by byte",
			writes: []write{{Stdout, "\xf0"}, {Stdout, "\x9f"}, {Stdout, "\x98"}, {Stdout, "\x80!"}},
			open:   []frameWant{{Stdout, "😀!"}},
		},
		{
			name:   "three-byte sequence held until close",
			writes: []write{{Stdout, "x\xe2\x82"}},
			open:   []frameWant{{Stdout, "x"}},
			closed: []frameWant{{Stdout, "x"}, {Stdout, "\xe2\x82"}},
		},
		{
			name:   "held bytes completed by a later write",
			writes: []write{{PTY, "\xe2"}, {PTY, "\x82"}, {PTY, "\xac"}},
			open:   []frameWant{{PTY, "€"}},
		},
		{
			name:   "held per channel, in arrival order",
			writes: []write{{Stdout, "a\xc3"}, {Stderr, "b\xe2\x82"}, {Stdout, "\xa9"}, {Stderr, "\xac"}},
			open:   []frameWant{{Stdout, "a"}, {Stderr, "b"}, {Stdout, "é"}, {Stderr, "€"}},
		},
		{
			name:   "held bytes that turn out invalid",
			writes: []write{{Stdout, "\xe2"}, {Stdout, "A"}},
			open:   []frameWant{{Stdout, "\xe2A"}},
		},
		{
			name:   "bytes that cannot start a sequence are not held",
			writes: []write{{Stdout, "\xff"}, {Stdout, "\xc0"}, {Stdout, "\x80"}, {Stdout, "\xf8"}},
			open:   []frameWant{{Stdout, "\xff"}, {Stdout, "\xc0"}, {Stdout, "\x80"}, {Stdout, "\xf8"}},
		},
		{
			name:   "prefixes that cannot become valid are not held",
			writes: []write{{Stdout, "\xed\xa0"}, {Stdout, "\xf4\x90"}, {Stdout, "\xf0\x80"}, {Stdout, "\xe0\x80"}},
			open:   []frameWant{{Stdout, "\xed\xa0"}, {Stdout, "\xf4\x90"}, {Stdout, "\xf0\x80"}, {Stdout, "\xe0\x80"}},
		},
		{
			name:   "a whole write held",
			writes: []write{{Stderr, "\xf0\x9f\x98"}},
			closed: []frameWant{{Stderr, "\xf0\x9f\x98"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{})
			for _, w := range tt.writes {
				writeFrame(l, w.ch, []byte(w.data))
			}
			got := frames(l)
			assert.True(t, slices.Equal(got, tt.open), "before Close: %v, want %v", got, tt.open)
			l.Close()
			want := tt.closed
			if want == nil {
				want = tt.open
			}
			got = frames(l)
			assert.True(t, slices.Equal(got, want), "after Close: %v, want %v", got, want)
		})
	}
}

// TestHeldBytesKeepTheirOrder: bytes of a character held back for its
// rest go ahead of another channel's output once they have waited holdMax,
// as their own frame: they came first. Before, they waited for the rest or
// the end of the log, and `printf 'progress \xe2\x96'; sleep 4; echo done
// >&2` showed stderr's "done" before them. Sooner, the other channel's
// frame goes ahead and the character stays whole.
func TestHeldBytesKeepTheirOrder(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(Options{})
	l.now = func() time.Time { return now }
	writeFrame(l, Stdout, []byte("progress \xe2\x96"))
	now = now.Add(holdMax - time.Millisecond)
	writeFrame(l, Stderr, []byte("soon\n"))
	writeFrame(l, Stdout, []byte("\x88 "))
	writeFrame(l, Stdout, []byte("late \xe2\x96"))
	now = now.Add(holdMax)
	writeFrame(l, Stderr, []byte("done\n"))
	writeFrame(l, Stdout, []byte("\x88"))
	want := []frameWant{
		{Stdout, "progress "}, {Stderr, "soon\n"}, {Stdout, "\xe2\x96\x88 "}, {Stdout, "late "},
		{Stdout, "\xe2\x96"}, {Stderr, "done\n"}, {Stdout, "\x88"},
	}
	got := frames(l)
	require.True(t, slices.Equal(got, want), "%q, want %q", got, want)
}

func TestLargeWriteSplitsOnRuneBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
	}{
		{"two-byte runes", bytes.Repeat([]byte("é"), 100_000)},
		{"three-byte runes after one byte", append([]byte("x"), bytes.Repeat([]byte("€"), 100_000)...)},
		{"four-byte runes after two bytes", append([]byte("xy"), bytes.Repeat([]byte("😀"), 100_000)...)},
		{"binary continuation bytes", bytes.Repeat([]byte{0x80}, 200_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{})
			l.Write(Stdout, tt.data)
			l.Close()
			p := l.Page(0, 0)
			require.GreaterOrEqual(t, len(p.Frames), 2, "%d bytes gave %d frames", len(tt.data), len(p.Frames))
			var all []byte
			text := bytes.IndexByte(tt.data, 0x80) != 0
			for _, f := range p.Frames {
				assert.LessOrEqual(t, len(f.Data), MaxFrame, "frame %v has %d bytes", f.Cursor, len(f.Data))
				assert.Equal(t, text, f.IsText(), "frame %v: IsText %v", f.Cursor, f.IsText())
				all = append(all, f.Data...)
			}
			assert.True(t, bytes.Equal(all, tt.data), "frames do not add up to the write")
		})
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	const line = 100 // bytes per write
	budget := 10 * line
	tests := []struct {
		name          string
		writes        int
		after         Cursor
		limit         int
		want          []Cursor
		truncatedHead bool
		first         Cursor
	}{
		{name: "all retained", writes: 10, want: span(1, 10), first: 1},
		{name: "head dropped, from the start", writes: 15, want: span(6, 15), truncatedHead: true, first: 6},
		{name: "head dropped, from a dropped cursor", writes: 15, after: 3, want: span(6, 15), truncatedHead: true, first: 6},
		{name: "from the newest dropped cursor", writes: 15, after: 5, want: span(6, 15), first: 6},
		{name: "from a retained cursor", writes: 15, after: 12, want: span(13, 15), first: 6},
		{name: "with a limit", writes: 15, after: 7, limit: 2, want: span(8, 9), first: 6},
		{name: "from the last cursor", writes: 15, after: 15, first: 6},
		{name: "from beyond the last cursor", writes: 15, after: 99, first: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{Retention: budget})
			for i := range tt.writes {
				writeFrame(l, Stdout, bytes.Repeat([]byte{byte('a' + i)}, line))
			}
			p := l.Page(tt.after, tt.limit)
			var got []Cursor
			for _, f := range p.Frames {
				got = append(got, f.Cursor)
				want := bytes.Repeat([]byte{byte('a' + f.Cursor - 1)}, line)
				assert.True(t, bytes.Equal(f.Data, want), "frame %v holds %q", f.Cursor, f.Data)
			}
			assert.True(t, slices.Equal(got, tt.want), "cursors %v, want %v", got, tt.want)
			assert.False(t, p.TruncatedHead != tt.truncatedHead || p.FirstAvailable != tt.first || p.Last != Cursor(tt.writes), "truncatedHead %v, first %v, last %v; want %v, %v, %v", p.TruncatedHead, p.FirstAvailable, p.Last, tt.truncatedHead, tt.first, tt.writes)
			wantNext := tt.after
			if len(tt.want) > 0 {
				wantNext = tt.want[len(tt.want)-1]
			}
			assert.Equal(t, wantNext, p.Next, "next %v, want %v", p.Next, wantNext)
		})
	}
}

func span(from, to Cursor) []Cursor {
	var cs []Cursor
	for c := from; c <= to; c++ {
		cs = append(cs, c)
	}
	return cs
}

func TestRetentionSmallerThanAWrite(t *testing.T) {
	t.Parallel()
	l := New(Options{Retention: 1000})
	data := []byte(strings.Repeat("0123456789", 1000))
	l.Write(Stdout, data)
	p := l.Page(0, 0)
	require.False(t, !p.TruncatedHead || len(p.Frames) == 0, "truncatedHead %v with %d frames", p.TruncatedHead, len(p.Frames))
	var kept []byte
	charged := 0
	for _, f := range p.Frames {
		kept = append(kept, f.Data...)
		charged += len(f.Data)
	}
	assert.False(t, !bytes.HasSuffix(data, kept) || charged > 1000 || len(kept) < 500, "kept %d bytes (%d charged) of a 1000-byte retention; suffix: %v", len(kept), charged, bytes.HasSuffix(data, kept))
}

func TestKeepNonePages(t *testing.T) {
	t.Parallel()
	l := New(Options{Keep: KeepNone})
	p := l.Page(0, 0)
	assert.False(t, p.TruncatedHead || len(p.Frames) != 0, "empty log: %+v", p)
	l.Write(Stdout, []byte("hello\n"))
	l.Write(Stderr, []byte("world\n"))
	p = l.Page(0, 0)
	assert.False(t, len(p.Frames) != 0 || !p.TruncatedHead || p.FirstAvailable != 0 || p.Last != 2 || p.Next != 2, "page %+v: want no frames, truncated, last and next 2", p)
	p = l.Page(2, 0)
	assert.False(t, p.TruncatedHead, "page after the last cursor reports truncation")
	trunc, first, last := l.Bounds()
	assert.False(t, !trunc || first != 0 || last != 2, "Bounds %v %v %v", trunc, first, last)
	assert.Equal(t, KeepNone, l.Keep(), "Keep %q", l.Keep())
}

func TestCloseAndWritesAfter(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	l.Write(Stdout, []byte("a"))
	require.False(t, l.Closed(), "closed before Close")
	l.Close()
	l.Close()
	l.Write(Stdout, []byte("b"))
	require.True(t, l.Closed(), "not closed after Close")
	got := frames(l)
	assert.True(t, slices.Equal(got, []frameWant{{Stdout, "a"}}), "frames %v", got)
}

func TestWriterAndTimes(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	w := l.Writer(Stderr)
	for range 1000 {
		n, err := w.Write([]byte("x"))
		require.False(t, n != 1 || err != nil, "Write: %d, %v", n, err)
		writeFrame(l, Stderr, nil) // keep each write a frame of its own
	}
	n, err := w.Write(nil)
	require.False(t, n != 0 || err != nil, "empty Write: %d, %v", n, err)
	p := l.Page(0, 0)
	require.Len(t, p.Frames, 1000, "%d frames", len(p.Frames))
	for i, f := range p.Frames {
		require.False(t, f.Channel != Stderr || f.Time.IsZero() || (i > 0 && f.Time.Before(p.Frames[i-1].Time)), "frame %v: %v at %v", f.Cursor, f.Channel, f.Time)
	}
}

func TestWriteOnBadChannelPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		assert.NotNil(t, recover(), "no panic")
	}()
	New(Options{}).Write(Channel(0), []byte("x"))
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []Cursor{0, 1, 42, 1<<64 - 1} {
		got, err := ParseCursor(c.String())
		assert.False(t, err != nil || got != c, "ParseCursor(%q) = %v, %v", c.String(), got, err)
	}
	for _, s := range []string{"x", "-1", "1.5", "18446744073709551616"} {
		_, err := ParseCursor(s)
		assert.Error(t, err, "ParseCursor(%q) succeeded", s)
	}
	c, err := ParseCursor("")
	assert.False(t, c != 0 || err != nil, `ParseCursor("") = %v, %v`, c, err)
	for s, want := range map[string]KeepLogs{"": KeepUntilCleanup, "until_cleanup": KeepUntilCleanup, "on_exit_ttl": KeepOnExitTTL, "none": KeepNone} {
		got, err := ParseKeepLogs(s)
		assert.False(t, got != want || err != nil, "ParseKeepLogs(%q) = %q, %v", s, got, err)
	}
	_, err = ParseKeepLogs("forever")
	assert.Error(t, err, `ParseKeepLogs("forever") succeeded`)
	for ch, want := range map[Channel]string{Stdout: "stdout", Stderr: "stderr", PTY: "pty", 9: "channel(9)"} {
		assert.Equal(t, want, ch.String(), "%d.String() = %q", ch, ch.String())
	}
}

// TestTinyWritesKeepEveryByte pins that retention counts output bytes: 50,000
// lines written one by one (a loop of echo, about 540 KB) are all kept under a
// retention of 1 MiB, whatever the frames cost to keep.
func TestTinyWritesKeepEveryByte(t *testing.T) {
	t.Parallel()
	l := New(Options{Retention: 1 << 20})
	l.now = fixedClock()
	var want [PTY + 1][]byte
	for i := range 50_000 {
		ch := Stdout
		if i%1000 == 999 {
			ch = Stderr
		}
		line := []byte("line " + strconv.Itoa(i) + "\n")
		l.Write(ch, line)
		want[ch] = append(want[ch], line...)
	}
	l.Close()
	p := l.Page(0, 0)
	var got [PTY + 1][]byte
	for _, f := range p.Frames {
		got[f.Channel] = append(got[f.Channel], f.Data...)
	}
	assert.False(t, p.TruncatedHead || !bytes.Equal(got[Stdout], want[Stdout]) || !bytes.Equal(got[Stderr], want[Stderr]), "truncatedHead %v; kept %d of %d stdout bytes, %d of %d stderr bytes in %d frames", p.TruncatedHead, len(got[Stdout]), len(want[Stdout]), len(got[Stderr]), len(want[Stderr]), len(p.Frames))
}

// TestSeenFramesNeverChange checks that writes extend only frames no reader
// has seen: a frame copied by a page or a follower keeps its bytes, and what
// comes after it gets a later cursor.
func TestSeenFramesNeverChange(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	l.now = fixedClock()
	l.Write(Stdout, []byte("one "))
	l.Write(Stdout, []byte("two "))
	seen := l.Page(0, 0).Frames
	require.False(t, len(seen) != 1 || string(seen[0].Data) != "one two ", "unread small writes: %d frames, first %q", len(seen), seen[0].Data)
	l.Write(Stdout, []byte("three "))
	l.Write(Stdout, []byte("four"))
	p := l.Page(0, 0)
	require.False(t, len(p.Frames) != 2 || !sameFrame(p.Frames[0], seen[0]) || string(p.Frames[1].Data) != "three four", "after a page: %d frames %q, the seen one now %q", len(p.Frames), p.Frames[len(p.Frames)-1].Data, p.Frames[0].Data)
	ctx := hangGuard(t, 20*time.Second)
	var followed []Frame
	_ = l.Follow(ctx, 1, func(e Event) bool {
		followed = append(followed, *e.Frame)
		return false
	})
	l.Write(Stdout, []byte(" five"))
	l.Write(Stderr, []byte("six"))
	p = l.Page(0, 0)
	require.False(t, len(p.Frames) != 4 || !sameFrame(p.Frames[1], followed[0]) || string(p.Frames[2].Data) != " five", "after a follower: frames %v", p.Frames)
}

// TestSealSplitsFrames: what is written after Seal is after its cursor,
// never merged into the frame that was newest when it was called.
func TestSealSplitsFrames(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	l.now = fixedClock()
	l.Write(Stdout, []byte("tick\n"))
	after := l.Seal()
	l.Write(Stdout, []byte("reply\n"))
	l.Write(Stdout, []byte("tick\n"))
	p := l.Page(after, 0)
	require.Len(t, p.Frames, 1)
	require.Equal(t, "reply\ntick\n", string(p.Frames[0].Data), "writes after the seal merge with each other")
	require.Equal(t, "tick\n", string(l.Page(0, 1).Frames[0].Data))
}

// TestHandedCursorsAreFinal: a cursor handed out without the bytes of its
// frame (the newest one, as Bounds gives it for a process's lastCursor, or
// as the next of a page under KeepNone) is final: what is written after it
// comes after it. The newest frame once grew after Bounds gave its cursor,
// and a client that read on from a process's lastCursor never saw the bytes
// that had joined that frame.
func TestHandedCursorsAreFinal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		keep KeepLogs
		hand func(*Log) Cursor
	}{
		{"Bounds", KeepUntilCleanup, func(l *Log) Cursor { _, _, last := l.Bounds(); return last }},
		{"page under KeepNone", KeepNone, func(l *Log) Cursor { return l.Page(0, 0).Next }},
		// An answer cut to an outputLimit smaller than the newest frame's
		// last character has no tail, and its next is that frame's cursor:
		// an interact answer's next once grew, and a client reading on
		// from it missed what had joined the frame.
		{"excerpt with no tail", KeepUntilCleanup, func(l *Log) Cursor { return l.Excerpt(0, 1).Next }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Held: under KeepNone the frames are kept for the excerpt.
			l := New(Options{Keep: tt.keep, Held: true})
			l.now = fixedClock()
			l.Write(Stdout, []byte("before €"))
			after := tt.hand(l)
			l.Write(Stdout, []byte("after\n"))
			e := l.Excerpt(after, 0)
			require.False(t, len(e.Head) != 1 || string(e.Head[0].Data) != "after\n",
				"after cursor %d: %d frames, %q", after, len(e.Head), l.Excerpt(0, 0).Head)
		})
	}
}

// TestFrameCap checks the bound on frames that no merging could save: every
// tiny write is read at once, so each stays a frame; the log keeps at most one
// frame per BytesPerFrame bytes of retention, and says it dropped the head.
func TestFrameCap(t *testing.T) {
	t.Parallel()
	const retention = 64 << 10
	l := New(Options{Retention: retention})
	for range 2 * retention / BytesPerFrame {
		writeFrame(l, Stdout, []byte("x\n"))
	}
	p := l.Page(0, 0)
	assert.False(t, !p.TruncatedHead || len(p.Frames) != retention/BytesPerFrame || p.Frames[len(p.Frames)-1].Cursor != p.Last, "truncatedHead %v, %d frames, want %d ending at %d", p.TruncatedHead, len(p.Frames), retention/BytesPerFrame, p.Last)
}

// TestMergeKeepsTimes checks that a write arriving mergeWindow or more after
// the newest frame began makes a frame of its own, with its own time.
func TestMergeKeepsTimes(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	now := time.Now()
	l.now = func() time.Time { return now }
	l.Write(Stdout, []byte("a"))
	now = now.Add(mergeWindow - time.Millisecond)
	l.Write(Stdout, []byte("b"))
	now = now.Add(time.Millisecond)
	l.Write(Stdout, []byte("c"))
	p := l.Page(0, 0)
	assert.False(t, len(p.Frames) != 2 || string(p.Frames[0].Data) != "ab" || !p.Frames[1].Time.Equal(now), "frames %v", p.Frames)
}

// TestSeenBlocksAreNotReused checks that frames handed to a reader keep
// their bytes while output floods through the log after them: the blocks
// they live in are not reused when retention drops them, as blocks no one
// saw are.
func TestSeenBlocksAreNotReused(t *testing.T) {
	t.Parallel()
	const retention = 4 * maxChunk
	l := New(Options{Retention: retention})
	chunk := func(b byte) []byte { return bytes.Repeat([]byte{b}, 40<<10) }
	for range 8 {
		l.Write(Stdout, chunk('a'))
	}
	seen := l.Page(0, 0).Frames
	require.NotEmpty(t, seen)
	var want [][]byte
	for _, f := range seen {
		want = append(want, bytes.Clone(f.Data))
	}
	for i := range 64 {
		l.Write(Stdout, chunk('b'+byte(i%20)))
	}
	require.True(t, l.Page(0, 0).TruncatedHead, "the seen frames were not dropped")
	for i, f := range seen {
		assert.True(t, bytes.Equal(f.Data, want[i]), "seen frame %v changed after retention dropped it", f.Cursor)
	}
}

// TestKeepNoneHeld: a held KeepNone log keeps its frames for the holder's
// excerpt, pages still get none, and Release drops them.
func TestKeepNoneHeld(t *testing.T) {
	t.Parallel()
	l := New(Options{Keep: KeepNone, Held: true})
	l.Write(Stdout, []byte("hello\n"))
	l.Write(Stderr, []byte("world\n"))
	e := l.Excerpt(0, 0)
	require.Len(t, e.Head, 2, "%+v", e)
	require.False(t, e.TruncatedHead)
	require.Empty(t, l.Page(0, 0).Frames, "pages get no frames under KeepNone")
	l.Release()
	l.Release() // a second does nothing
	e = l.Excerpt(0, 0)
	require.Empty(t, e.Head)
	require.Empty(t, e.Tail)
	require.True(t, e.TruncatedHead)
	l.Write(Stdout, []byte("later\n"))
	require.Empty(t, l.Excerpt(0, 0).Head, "nothing is kept once released")
}

// TestKeepNoneHold: a KeepNone log keeps what comes while a Hold lasts, for
// the holder's excerpt, and drops it once the last hold is released; what
// came before the hold is not kept.
func TestKeepNoneHold(t *testing.T) {
	t.Parallel()
	l := New(Options{Keep: KeepNone})
	l.Write(Stdout, []byte("before\n"))
	release := l.Hold()
	l.Write(Stdout, []byte("during\n"))
	second := l.Hold()
	e := l.Excerpt(0, 0)
	require.Len(t, e.Head, 1, "%+v", e)
	require.Equal(t, "during\n", string(e.Head[0].Data))
	require.True(t, e.TruncatedHead, "the frame before the hold is gone")
	require.Empty(t, l.Page(0, 0).Frames, "pages get no frames under KeepNone")
	release()
	release() // a second does nothing
	require.Len(t, l.Excerpt(0, 0).Head, 1, "the other hold keeps it")
	second()
	require.Empty(t, l.Excerpt(0, 0).Head, "released: nothing is kept")
	l.Write(Stdout, []byte("after\n"))
	require.Empty(t, l.Excerpt(0, 0).Head, "nothing is kept once released")
}

// TestKeepNoneHoldKeepsTheRetention: while a Hold lasts a KeepNone log
// keeps what a held log keeps for its answer, its retention, not the live
// window of its followers; a follower after it has the window again.
func TestKeepNoneHoldKeepsTheRetention(t *testing.T) {
	t.Parallel()
	l := New(Options{Keep: KeepNone, Retention: 4 << 20})
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	release := l.Hold()
	for range 48 { // 3 MiB
		l.Write(Stdout, chunk)
	}
	e := l.Excerpt(0, 0)
	require.False(t, e.TruncatedHead, "3 MiB within a retention of 4 were dropped")
	n := 0
	for _, f := range e.Head {
		n += len(f.Data)
	}
	require.Equal(t, 3<<20, n)
	release()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		_ = l.Follow(ctx, l.Excerpt(0, 0).Next, func(Event) bool { return true })
	}()
	defer func() { cancel(); <-followed }()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.followers == 1
	}, 5*time.Second, time.Millisecond)
	for range 48 {
		l.Write(Stdout, chunk)
	}
	l.mu.Lock()
	size := l.size
	l.mu.Unlock()
	require.LessOrEqual(t, size, liveWindow, "a live follower's window grew with the hold")
}

// Write on a zero Log, made neither by New nor by Init, panics and says
// so: it spun for ever holding the log's lock, cutting empty frames.
func TestZeroLogWritePanics(t *testing.T) {
	t.Parallel()
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		var l Log
		l.Write(Stdout, []byte("x"))
	}()
	select {
	case p := <-panicked:
		require.NotNil(t, p, "Write on a zero Log went through")
		require.Contains(t, p, "neither by New nor by Init")
	case <-time.After(30 * time.Second):
		t.Fatal("Write on a zero Log never returned")
	}
}

// TestHeldBytesNeverJoinText: bytes held back and then put out unfinished
// at Close or at a Seal make a frame of their own, never one with the text
// before them, which no reader had seen yet: there that text went out as
// base64 with them, a program's last line included when it ended in the
// middle of a character. (Put out once held holdMax, they come after
// mergeWindow, when no frame takes more.)
func TestHeldBytesNeverJoinText(t *testing.T) {
	t.Parallel()
	for _, seal := range []bool{false, true} {
		l := New(Options{})
		l.Write(Stdout, []byte("last line "))
		l.Write(Stdout, []byte("\xe2\x82"))
		if seal {
			l.Seal()
			l.Write(Stdout, []byte("more"))
		}
		l.Close()
		want := []frameWant{{Stdout, "last line "}, {Stdout, "\xe2\x82"}}
		if seal {
			want = append(want, frameWant{Stdout, "more"})
		}
		require.Equal(t, want, frames(l), "sealed: %v", seal)
	}

	// Put out once held holdMax, they take no text written at once after
	// them either.
	now := time.Now()
	l := New(Options{})
	l.now = func() time.Time { return now }
	l.Write(Stdout, []byte("last line \xe2\x82"))
	now = now.Add(holdMax)
	l.releaseHeld()
	l.Write(Stdout, []byte("more"))
	l.Close()
	require.Equal(t, []frameWant{{Stdout, "last line "}, {Stdout, "\xe2\x82"}, {Stdout, "more"}}, frames(l))
}

// TestHeldBytesGoOutByThemselves: the start of a character held back for
// its rest goes out as a frame of its own once held holdMax, with nothing
// written after it, and at once when the log is sealed (input is about to
// be written): a program that printed it and went quiet had it held until
// it wrote again, out of every page, and then in the reply to its input.
func TestHeldBytesGoOutByThemselves(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	l.Write(Stdout, []byte("x\xc3"))
	require.Equal(t, []frameWant{{Stdout, "x"}}, frames(l))
	require.Eventually(t, func() bool { return slices.Equal(frames(l), []frameWant{{Stdout, "x"}, {Stdout, "\xc3"}}) },
		10*time.Second, time.Millisecond, "held holdMax: out")

	l = New(Options{})
	l.Write(Stderr, []byte("y\xe2\x96"))
	sealed := l.Seal()
	l.Write(Stderr, []byte("z\n"))
	after := l.Page(sealed, 0).Frames
	require.Len(t, after, 1)
	require.Equal(t, "z\n", string(after[0].Data), "the reply after the seal holds nothing from before it")
	l.Close()
}
