package logstore

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		frames, size int // frames of size bytes each
		after        Cursor
		limit        int
		head, tail   []Cursor
		omittedAfter Cursor
		next         Cursor
	}{
		{name: "no limit", frames: 10, size: 100, head: span(1, 10), next: 10},
		{name: "within the limit", frames: 10, size: 100, limit: 1000, head: span(1, 10), next: 10},
		{name: "head and tail", frames: 10, size: 100, limit: 500, head: span(1, 2), tail: span(8, 10), omittedAfter: 2, next: 10},
		{name: "after a cursor", frames: 10, size: 100, after: 5, limit: 300, head: span(6, 6), tail: span(9, 10), omittedAfter: 6, next: 10},
		{name: "one frame over the limit", frames: 1, size: 1000, limit: 100, head: span(1, 1), next: 1},
		{name: "two frames over the limit", frames: 2, size: 1000, limit: 100, head: span(1, 2), next: 2},
		{name: "frames over half the limit", frames: 3, size: 1000, limit: 100, head: span(1, 1), tail: span(3, 3), omittedAfter: 1, next: 3},
		{name: "nothing after the cursor", frames: 3, size: 10, after: 3, limit: 100, next: 3},
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
			cursors := func(fs []Frame) []Cursor {
				var cs []Cursor
				for _, f := range fs {
					cs = append(cs, f.Cursor)
				}
				return cs
			}
			omitted := 0
			if len(tt.tail) > 0 {
				omitted = (int(tt.tail[0]-tt.head[len(tt.head)-1]) - 1) * tt.size
			}
			assert.False(t, !slices.Equal(cursors(e.Head), tt.head) || !slices.Equal(cursors(e.Tail), tt.tail) ||
				e.Omitted != omitted || e.OmittedAfter != tt.omittedAfter || e.Next != tt.next || e.TruncatedHead,
				"head %v tail %v omitted %d after %d next %d truncated %v; want %v %v %d %d %d",
				cursors(e.Head), cursors(e.Tail), e.Omitted, e.OmittedAfter, e.Next, e.TruncatedHead,
				tt.head, tt.tail, omitted, tt.omittedAfter, tt.next)
			// What was omitted is what a page after OmittedAfter gives
			// before the tail.
			if e.Omitted > 0 {
				p := l.Page(e.OmittedAfter, int(e.Tail[0].Cursor-e.OmittedAfter-1))
				got := 0
				for _, f := range p.Frames {
					got += len(f.Data)
				}
				assert.Equal(t, e.Omitted, got, "the omitted frames hold %d bytes, Omitted says %d", got, e.Omitted)
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
