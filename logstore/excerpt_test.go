package logstore

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		frames, size  int    // frames of size bytes each, 'a', 'b', ...
		after, to     Cursor // to: ExcerptTo's
		limit         int
		head, tail    string
		omittedAfter  Cursor
		omitted, next int
	}{
		{name: "no limit", frames: 10, size: 100, head: "a100 b100 c100 d100 e100 f100 g100 h100 i100 j100", next: 10},
		{name: "within the limit", frames: 10, size: 100, limit: 1000, head: "a100 b100 c100 d100 e100 f100 g100 h100 i100 j100", next: 10},
		{name: "head and tail", frames: 10, size: 100, limit: 500, head: "a100 b100 c50", tail: "h50 i100 j100", omittedAfter: 2, omitted: 500, next: 10},
		{name: "after a cursor", frames: 10, size: 100, after: 5, limit: 300, head: "f100 g50", tail: "i50 j100", omittedAfter: 6, omitted: 200, next: 10},
		{name: "one frame over the limit", frames: 1, size: 1000, limit: 100, head: "a50", tail: "a50", omittedAfter: 0, omitted: 900, next: 1},
		{name: "after a cursor, in one frame", frames: 3, size: 1000, after: 1, limit: 100, head: "b50", tail: "c50", omittedAfter: 1, omitted: 1900, next: 3},
		{name: "nothing after the cursor", frames: 3, size: 10, after: 3, limit: 100, next: 3},
		{name: "up to a cursor", frames: 10, size: 100, to: 5, head: "a100 b100 c100 d100 e100", next: 5},
		{name: "up to a cursor, within the limit", frames: 10, size: 100, to: 5, limit: 500, head: "a100 b100 c100 d100 e100", next: 5},
		{name: "up to a cursor, head and tail", frames: 10, size: 100, to: 5, limit: 300, head: "a100 b50", tail: "d50 e100", omittedAfter: 1, omitted: 200, next: 5},
		{name: "up to the cursor asked after", frames: 3, size: 10, after: 2, to: 2, limit: 100, next: 2},
	}
	// text is frames' bytes as "a100 b50": a letter and how many times.
	text := func(fs []Frame) string {
		var parts []string
		for _, f := range fs {
			parts = append(parts, string(f.Data[0])+strconv.Itoa(len(f.Data)))
		}
		return strings.Join(parts, " ")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{})
			for i := range tt.frames {
				writeFrame(l, Stdout, bytes.Repeat([]byte{byte('a' + i)}, tt.size))
			}
			l.Close()
			e := l.Excerpt(tt.after, tt.limit)
			if tt.to > 0 {
				e = l.ExcerptTo(tt.after, tt.to, tt.limit)
			}
			assert.False(t, text(e.Head) != tt.head || text(e.Tail) != tt.tail || e.Omitted != tt.omitted ||
				e.OmittedAfter != tt.omittedAfter || e.Next != Cursor(tt.next) || e.TruncatedHead,
				"head %q tail %q omitted %d after %d next %d truncated %v; want %q %q %d %d %d",
				text(e.Head), text(e.Tail), e.Omitted, e.OmittedAfter, e.Next, e.TruncatedHead,
				tt.head, tt.tail, tt.omitted, tt.omittedAfter, tt.next)
			if e.Omitted > 0 {
				want := pageData(l, tt.after)
				if tt.to > 0 {
					want = want[:tt.to-tt.after]
				}
				assert.Equal(t, string(joinExcerpt(l, e)), string(bytes.Join(want, nil)))
			}
		})
	}
}

// pageData returns the data of the frames after cursor after.
func pageData(l *Log, after Cursor) [][]byte {
	var out [][]byte
	for _, f := range l.Page(after, 0).Frames {
		out = append(out, f.Data)
	}
	return out
}

// joinExcerpt joins an excerpt with pages of l as a client does: the whole
// frames up to OmittedAfter, then the frames of pages after it up to Next.
func joinExcerpt(l *Log, e Excerpt) []byte {
	var b []byte
	for _, f := range e.Head {
		if f.Cursor > e.OmittedAfter {
			break
		}
		b = append(b, f.Data...)
	}
	cursor := e.OmittedAfter
	for cursor < e.Next {
		p := l.PageBytes(cursor, 0, 1000)
		if len(p.Frames) == 0 {
			break
		}
		for _, f := range p.Frames {
			if f.Cursor > e.Next {
				break
			}
			b = append(b, f.Data...)
		}
		cursor = p.Next
	}
	return b
}

// TestExcerptBound checks, over outputs of many kinds (lines, multi-byte
// characters, bytes that are not UTF-8, stdout and stderr) and many limits,
// that an excerpt's text costs at most the limit, is cut at character
// boundaries and at line ends where lines are short, says exactly what it
// omitted, and that the join rule gives every byte back exactly once.
func TestExcerptBound(t *testing.T) {
	t.Parallel()
	kinds := map[string]func(i int) []byte{
		"lines":      func(i int) []byte { return []byte(strconv.Itoa(i) + "\n") },
		"multi-byte": func(i int) []byte { return []byte(strings.Repeat("é€😀", i%7) + "\n") },
		"long lines": func(i int) []byte { return []byte(strings.Repeat("ж", 200+i%300)) },
		"not UTF-8":  func(i int) []byte { return []byte{'x', 0xff, 0xfe, byte('0' + i%10), '\n'} },
	}
	seed := uint64(0)
	for name, gen := range kinds {
		seed++
		// A generator for each subtest: they run in parallel.
		rng := rand.New(rand.NewPCG(seed, 2))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := New(Options{})
			var full []byte
			for i := range 3000 {
				ch := Stdout
				if i%5 == 0 {
					ch = Stderr
				}
				b := gen(i)
				full = append(full, b...)
				l.Write(ch, b)
			}
			l.Close()
			for _, limit := range []int{1, 2, 7, 100, 200, 513, 1000, 4096, 65536, 100000} {
				after := Cursor(0)
				if rng.IntN(2) == 0 {
					after = Cursor(rng.IntN(10))
				}
				e := l.Excerpt(after, limit)
				var skip int
				for _, d := range pageData(l, 0)[:after] {
					skip += len(d)
				}
				want := full[skip:]
				var head, tail []byte
				for _, f := range e.Head {
					head = append(head, f.Data...)
				}
				for _, f := range e.Tail {
					tail = append(tail, f.Data...)
				}
				cost := textCost(head) + textCost(tail)
				if len(want) <= limit/3 {
					assert.Zero(t, e.Omitted)
				}
				if e.Omitted == 0 {
					assert.Equal(t, string(want), string(head), "limit %d", limit)
					continue
				}
				assert.LessOrEqual(t, cost, limit, "limit %d: the text costs %d", limit, cost)
				assert.Greater(t, cost, limit-2*lineSlack-2*utf8.UTFMax, "limit %d: the text costs %d", limit, cost)
				assert.Equal(t, len(want)-len(head)-len(tail), e.Omitted, "limit %d", limit)
				assert.True(t, bytes.HasPrefix(want, head) && bytes.HasSuffix(want, tail), "limit %d", limit)
				if utf8.Valid(want) {
					assert.True(t, utf8.Valid(head) && utf8.Valid(tail), "limit %d: cut inside a character", limit)
				}
				if name != "long lines" && limit >= 2*lineSlack {
					assert.Equal(t, byte('\n'), head[len(head)-1], "limit %d: the head ends a line", limit)
					assert.Equal(t, byte('\n'), want[len(want)-len(tail)-1], "limit %d: the tail starts a line", limit)
				}
				assert.Equal(t, string(want), string(joinExcerpt(l, e)), "limit %d: the join", limit)
			}
		})
	}
}

func TestExcerptTruncatedAndKeepNone(t *testing.T) {
	t.Parallel()
	l := New(Options{Retention: 1000})
	for range 20 {
		writeFrame(l, Stdout, bytes.Repeat([]byte("x"), 100))
	}
	e := l.Excerpt(0, 300)
	assert.False(t, !e.TruncatedHead || e.Head[0].Cursor != 11 || e.Next != 20 || e.OmittedAfter != 11, "truncated log: %+v", e)
	n := New(Options{Keep: KeepNone})
	n.Write(Stdout, []byte("gone\n"))
	e = n.Excerpt(0, 0)
	assert.False(t, !e.TruncatedHead || len(e.Head) != 0 || e.Next != 1, "keepLogs none: %+v", e)
}

func TestPageBytes(t *testing.T) {
	t.Parallel()
	l := New(Options{})
	for i := range 10 {
		writeFrame(l, Stdout, bytes.Repeat([]byte{byte('a' + i)}, 100))
	}
	for _, tt := range []struct{ limit, maxBytes, frames int }{
		{0, 250, 2}, {0, 50, 1}, {3, 1000, 3}, {0, 0, 10}, {0, 1000, 10},
	} {
		p := l.PageBytes(0, tt.limit, tt.maxBytes)
		assert.False(t, len(p.Frames) != tt.frames || p.Next != Cursor(tt.frames), "limit %d, %d bytes: %d frames, next %d; want %d", tt.limit, tt.maxBytes, len(p.Frames), p.Next, tt.frames)
	}
}
