package logstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/plaintext"
)

// model is what was written to a Log, per channel, for checking what the
// Log gives back.
type model struct {
	streams [PTY + 1][]byte
	closed  bool
}

func (m *model) write(l *Log, ch Channel, p []byte) {
	l.Write(ch, p)
	if !m.closed {
		m.streams[ch] = append(m.streams[ch], p...)
	}
}

func (m *model) close(l *Log) {
	l.Close()
	m.closed = true
}

// emitted is the part of ch's stream that frames may hold: all of it once
// closed, else all but an incomplete UTF-8 sequence at the end.
func (m *model) emitted(ch Channel) []byte {
	s := m.streams[ch]
	if m.closed {
		return s
	}
	return s[:len(s)-plaintext.IncompleteTail(s)]
}

// checkLog checks everything a Log promises about what it returns against
// what was written, and returns the first problem.
func checkLog(l *Log, m *model, budget int, rng *rand.Rand) error {
	// Page through everything from the start, with random limits.
	first := l.Page(0, 0)
	var all []Frame
	next := Cursor(0)
	for {
		p := l.Page(next, 1+rng.IntN(5))
		if len(p.Frames) == 0 {
			if p.Next < next || l.Page(p.Next, 0).TruncatedHead || len(l.Page(p.Next, 0).Frames) > 0 {
				return fmt.Errorf("empty page after %d has Next %d, which is not past everything", next, p.Next)
			}
			break
		}
		all = append(all, p.Frames...)
		next = p.Next
	}
	if len(all) != len(first.Frames) {
		return fmt.Errorf("paging by limits gave %d frames, one page %d", len(all), len(first.Frames))
	}
	for i := range all {
		if !sameFrame(all[i], first.Frames[i]) {
			return fmt.Errorf("frame %d differs between pagings", i)
		}
	}
	truncated, firstAvail, last := l.Bounds()
	if truncated != first.TruncatedHead || firstAvail != first.FirstAvailable || last != first.Last {
		return fmt.Errorf("Bounds (%v, %d, %d) disagree with the page (%v, %d, %d)",
			truncated, firstAvail, last, first.TruncatedHead, first.FirstAvailable, first.Last)
	}

	// Cursors: dense, ending at Last; times never go back; sizes bounded.
	charged := 0
	for i, f := range all {
		if i > 0 && f.Cursor != all[i-1].Cursor+1 {
			return fmt.Errorf("cursor %d follows %d", f.Cursor, all[i-1].Cursor)
		}
		if i > 0 && f.Time.Before(all[i-1].Time) {
			return fmt.Errorf("frame %d is earlier than the one before", f.Cursor)
		}
		if len(f.Data) == 0 || len(f.Data) > MaxFrame {
			return fmt.Errorf("frame %d has %d bytes", f.Cursor, len(f.Data))
		}
		if !f.Channel.valid() {
			return fmt.Errorf("frame %d on %v", f.Cursor, f.Channel)
		}
		charged += len(f.Data)
	}
	if len(all) > 0 {
		if all[len(all)-1].Cursor != last {
			return fmt.Errorf("last frame %d, Last %d", all[len(all)-1].Cursor, last)
		}
		if firstAvail != all[0].Cursor {
			return fmt.Errorf("FirstAvailable %d, first frame %d", firstAvail, all[0].Cursor)
		}
	} else if firstAvail != 0 {
		return fmt.Errorf("FirstAvailable %d with no frame", firstAvail)
	}
	if l.Keep() == KeepNone {
		if len(all) != 0 || truncated != (last > 0) {
			return fmt.Errorf("KeepNone page has %d frames, truncatedHead %v, last %d", len(all), truncated, last)
		}
	} else {
		if charged > budget {
			return fmt.Errorf("%d bytes retained over a budget of %d", charged, budget)
		}
		if (len(all) > 0 && all[0].Cursor > 1) != truncated || (len(all) == 0 && last > 0) {
			return fmt.Errorf("truncatedHead %v with %d frames from %d", truncated, len(all), firstAvail)
		}
		if len(all) > l.frameCap {
			return fmt.Errorf("%d frames retained over a cap of %d", len(all), l.frameCap)
		}
		if truncated && len(all) < l.frameCap && charged+min(MaxFrame, budget) <= budget {
			return fmt.Errorf("dropped frames although only %d of %d bytes and %d of %d frames are retained",
				charged, budget, len(all), l.frameCap)
		}
	}

	// Per channel: the frames are the end of what was emitted, all of it
	// unless truncated, never splitting a valid UTF-8 sequence.
	var got [PTY + 1][][]byte
	for _, f := range all {
		got[f.Channel] = append(got[f.Channel], f.Data)
	}
	for ch := Stdout; ch <= PTY; ch++ {
		want := m.emitted(ch)
		have := bytes.Join(got[ch], nil)
		if !bytes.HasSuffix(want, have) {
			return fmt.Errorf("%v: frames (%d bytes) are not the end of what was written (%d bytes)", ch, len(have), len(want))
		}
		if !truncated && !bytes.Equal(want, have) {
			return fmt.Errorf("%v: %d bytes retained of %d, without truncatedHead", ch, len(have), len(want))
		}
		off := len(want) - len(have)
		// Decoding from any byte that is not a continuation byte finds
		// the same rune starts as decoding from the beginning.
		from := off
		for from > 0 && (from == len(want) || !utf8.RuneStart(want[from])) {
			from--
		}
		starts := runeStarts(want[from:])
		valid := utf8.Valid(want[off:])
		for _, d := range got[ch] {
			if !starts[off-from] {
				return fmt.Errorf("%v: a frame starts inside a UTF-8 sequence at byte %d", ch, off)
			}
			if valid && !utf8.Valid(d) {
				return fmt.Errorf("%v: valid UTF-8 output gave a frame that is not text at byte %d", ch, off)
			}
			off += len(d)
		}
	}

	// Random cursors: a page after any cursor is the retained frames after
	// it, truncated exactly when frames after it are gone.
	gone := last // everything up to here is gone
	if len(all) > 0 {
		gone = all[0].Cursor - 1
	}
	if l.Keep() == KeepNone {
		gone = last
	}
	for range 8 {
		c := Cursor(rng.IntN(int(last) + 3))
		limit := rng.IntN(4)
		p := l.Page(c, limit)
		var want []Frame
		for _, f := range all {
			if f.Cursor > c {
				want = append(want, f)
			}
		}
		if limit > 0 && len(want) > limit {
			want = want[:limit]
		}
		if len(p.Frames) != len(want) {
			return fmt.Errorf("page after %d (limit %d): %d frames, want %d", c, limit, len(p.Frames), len(want))
		}
		for i := range want {
			if !sameFrame(p.Frames[i], want[i]) {
				return fmt.Errorf("page after %d: frame %d differs", c, i)
			}
		}
		if p.TruncatedHead != (c < gone) {
			return fmt.Errorf("page after %d: truncatedHead %v, frames up to %d are gone", c, p.TruncatedHead, gone)
		}
		if m.closed {
			if err := checkFollow(l, c, p.TruncatedHead, want, limit); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFollow checks that following a closed log from c gives a warning
// exactly when frames after c are gone, then the retained frames, then End.
func checkFollow(l *Log, c Cursor, warned bool, want []Frame, limit int) error {
	var evs []Event
	err := l.Follow(context.Background(), c, func(e Event) bool {
		if e.Frame != nil {
			f := *e.Frame
			e.Frame = &f
		}
		evs = append(evs, e)
		return true
	})
	if err != nil {
		return err
	}
	if len(evs) == 0 || !evs[len(evs)-1].End {
		return fmt.Errorf("follow after %d did not end with End", c)
	}
	evs = evs[:len(evs)-1]
	if warned != (len(evs) > 0 && evs[0].Warning != nil) {
		return fmt.Errorf("follow after %d: warning %v, want %v", c, !warned, warned)
	}
	if warned {
		evs = evs[1:]
	}
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	if len(evs) != len(want) {
		return fmt.Errorf("follow after %d: %d frames, want %d", c, len(evs), len(want))
	}
	for i := range want {
		if evs[i].Frame == nil || !sameFrame(*evs[i].Frame, want[i]) {
			return fmt.Errorf("follow after %d: event %d is not frame %d", c, i, want[i].Cursor)
		}
	}
	return nil
}

func sameFrame(a, b Frame) bool {
	return a.Cursor == b.Cursor && a.Channel == b.Channel && bytes.Equal(a.Data, b.Data) && a.Time.Equal(b.Time)
}

// runeStarts marks the offsets of p where a UTF-8 decoder starts a rune
// (invalid bytes are runes of one byte), and len(p).
func runeStarts(p []byte) []bool {
	starts := make([]bool, len(p)+1)
	for i := 0; i < len(p); {
		starts[i] = true
		_, n := utf8.DecodeRune(p[i:])
		i += n
	}
	starts[len(p)] = true
	return starts
}

// Pools of random output, made once: text with runes of every length, and
// the same with invalid bytes and cut sequences mixed in.
var pools = sync.OnceValue(func() [2][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	return [2][]byte{makeOutput(rng, 4<<20, false), makeOutput(rng, 4<<20, true)}
})

// randomBytes returns n bytes of random output from a random place in a
// pool, binary or not.
func randomBytes(rng *rand.Rand, n int, binary bool) []byte {
	pool := pools()[0]
	if binary {
		pool = pools()[1]
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		at := rng.IntN(len(pool))
		out = append(out, pool[at:min(len(pool), at+n-len(out))]...)
	}
	return out
}

func makeOutput(rng *rand.Rand, n int, binary bool) []byte {
	pieces := [][]byte{
		[]byte("a"), []byte("line\n"), []byte("é"), []byte("€"), []byte("😀"), []byte("𝄞"),
		[]byte(" "), []byte("\r\n"), []byte("ü"),
	}
	bad := [][]byte{
		{0xff}, {0x80}, {0xc0}, {0xc3}, {0xe2, 0x82}, {0xf0, 0x9f}, {0xf0, 0x9f, 0x98},
		{0xed, 0xa0, 0x80}, {0xf4, 0x90, 0x80, 0x80}, {0xf0, 0x80, 0x80, 0x80}, {0xfe},
	}
	out := make([]byte, 0, n+4)
	for len(out) < n {
		if binary && rng.IntN(8) == 0 {
			out = append(out, bad[rng.IntN(len(bad))]...)
			continue
		}
		if rng.IntN(4) == 0 {
			run := rng.IntN(64)
			for range run {
				out = append(out, byte('a'+rng.IntN(26)))
			}
			continue
		}
		out = append(out, pieces[rng.IntN(len(pieces))]...)
	}
	return out
}
