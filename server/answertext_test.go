package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/conchsh/conch/logstore"
)

// An answer's text joins a character split between frames of one part,
// but not across the gap between its head and its tail: the head's end
// and the tail's start are not one after the other, and "\xe2\x82" then
// "\xac" read as a euro sign that the output never held.
func TestAnswerTextJoinsWithinAPart(t *testing.T) {
	all := func(logstore.Channel) bool { return true }
	for _, tc := range []struct {
		name  string
		parts [][]logstore.Frame
		want  string
	}{
		{"frames of one part", [][]logstore.Frame{{{Data: []byte("a\xe2\x82")}, {Data: []byte("\xacb")}}}, `{"output":"a€b"}`},
		{"head and tail", [][]logstore.Frame{{{Data: []byte("a\xe2\x82")}}, {{Data: []byte("\xacb")}}}, `{"output":"a\ufffd\ufffdb"}`},
	} {
		w := httptest.NewRecorder()
		e := newEncoder(w, 200, 0)
		e.raw("{")
		e.text("output", tc.parts, all)
		e.raw("}")
		if err := e.flush(); err != nil {
			t.Fatal(err)
		}
		if got := w.Body.String(); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// An excerpt of a process that still runs leaves out the frames at the
// log's end that begin a character, on one channel, its next the cursor
// before them; not bytes that cannot become one. Frames the excerpt holds
// cut, or not at all, count in Omitted, which they leave.
func TestHoldIncomplete(t *testing.T) {
	f := func(c logstore.Cursor, ch logstore.Channel, s string) logstore.Frame {
		return logstore.Frame{Cursor: c, Channel: ch, Data: []byte(s)}
	}
	out, errs := logstore.Stdout, logstore.Stderr
	x := strings.Repeat("x", 8)
	for _, tc := range []struct {
		name       string
		log        []logstore.Frame // after after, to the end
		after      logstore.Cursor
		e          logstore.Excerpt
		head, tail int
		next       logstore.Cursor
		omitted    int
	}{
		{"one frame", []logstore.Frame{f(1, out, "a"), f(2, out, "\xe2\x82")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a"), f(2, out, "\xe2\x82")}, Next: 2}, 1, 0, 1, 0},
		{"two frames", []logstore.Frame{f(1, out, "a"), f(2, out, "\xf0"), f(3, out, "\x9f\x98")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a"), f(2, out, "\xf0"), f(3, out, "\x9f\x98")}, Next: 3}, 1, 0, 1, 0},
		{"alone", []logstore.Frame{f(5, errs, "\xe2")}, 4,
			logstore.Excerpt{Head: []logstore.Frame{f(5, errs, "\xe2")}, Next: 5}, 0, 0, 4, 0},
		{"two channels", []logstore.Frame{f(1, out, "\xe2"), f(2, errs, "\x82")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "\xe2"), f(2, errs, "\x82")}, Next: 2}, 2, 0, 2, 0},
		{"whole", []logstore.Frame{f(1, out, "\xe2\x82"), f(2, out, "\xac")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "\xe2\x82"), f(2, out, "\xac")}, Next: 2}, 2, 0, 2, 0},
		{"invalid", []logstore.Frame{f(1, out, "a\xed\xa0")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a\xed\xa0")}, Next: 1}, 1, 0, 1, 0},
		{"in a tail", []logstore.Frame{f(1, out, "a"), f(2, out, x+"y"), f(3, out, "b"), f(4, out, "\xe2")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(3, out, "b"), f(4, out, "\xe2")}, Omitted: 9, Next: 4}, 1, 1, 3, 9},
		{"a tail's first frame, cut", []logstore.Frame{f(1, out, "a"), f(2, out, x), f(3, out, "\xe2\x82")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(3, out, "\x82")}, Omitted: 9, Next: 3}, 1, 0, 2, 8},
		{"none in the excerpt", []logstore.Frame{f(1, out, "a"), f(2, out, "\xe2\x82")}, 0,
			logstore.Excerpt{Omitted: 3, Next: 2}, 0, 0, 1, 1},
		{"one frame cut in head and tail", []logstore.Frame{f(1, out, "\xf0\x9f\x98")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "\xf0")}, Tail: []logstore.Frame{f(1, out, "\x98")}, Omitted: 1, Next: 1}, 0, 0, 0, 0},
		{"not first bytes alone", []logstore.Frame{f(1, out, "a"), f(2, out, x), f(3, out, "b\xe2")}, 0,
			logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(3, out, "\xe2")}, Omitted: 9, Next: 3}, 1, 1, 3, 9},
		{"dropped from the log", nil, 0,
			logstore.Excerpt{Tail: []logstore.Frame{f(2, out, "\xe2")}, Omitted: 9, Next: 2}, 0, 1, 2, 9},
		{"its start before the excerpt", []logstore.Frame{f(5, out, "\x9f")}, 4,
			logstore.Excerpt{Head: []logstore.Frame{f(5, out, "\x9f")}, Next: 5}, 1, 0, 5, 0},
	} {
		e := holdIncomplete(tc.e, tc.after, func(c logstore.Cursor) (logstore.Frame, bool) {
			for _, f := range tc.log {
				if f.Cursor == c {
					return f, true
				}
			}
			return logstore.Frame{}, false
		})
		if len(e.Head) != tc.head || len(e.Tail) != tc.tail || e.Next != tc.next || e.Omitted != tc.omitted {
			t.Errorf("%s: %d head and %d tail frames, next %d, omitted %d; want %d, %d, %d, %d", tc.name, len(e.Head), len(e.Tail), e.Next, e.Omitted, tc.head, tc.tail, tc.next, tc.omitted)
		}
	}
}
