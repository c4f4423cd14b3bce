package server

import (
	"net/http/httptest"
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

// An excerpt of a process that still runs leaves out the frames at its end
// that begin a character, on one channel, its next the cursor before them;
// not bytes that cannot become one, nor the first frame of a tail that
// is cut.
func TestHoldIncomplete(t *testing.T) {
	f := func(c logstore.Cursor, ch logstore.Channel, s string) logstore.Frame {
		return logstore.Frame{Cursor: c, Channel: ch, Data: []byte(s)}
	}
	out, errs := logstore.Stdout, logstore.Stderr
	for _, tc := range []struct {
		name       string
		e          logstore.Excerpt
		head, tail int
		next       logstore.Cursor
	}{
		{"one frame", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a"), f(2, out, "\xe2\x82")}, Next: 2}, 1, 0, 1},
		{"two frames", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a"), f(2, out, "\xf0"), f(3, out, "\x9f\x98")}, Next: 3}, 1, 0, 1},
		{"alone", logstore.Excerpt{Head: []logstore.Frame{f(5, errs, "\xe2")}, Next: 5}, 0, 0, 4},
		{"two channels", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "\xe2"), f(2, errs, "\x82")}, Next: 2}, 2, 0, 2},
		{"whole", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "\xe2\x82"), f(2, out, "\xac")}, Next: 2}, 2, 0, 2},
		{"invalid", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a\xed\xa0")}, Next: 1}, 1, 0, 1},
		{"in a tail", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(3, out, "b"), f(4, out, "\xe2")}, Omitted: 9, Next: 4}, 1, 1, 3},
		{"a tail's first frame, cut", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(3, out, "\xe2")}, Omitted: 9, Next: 3}, 1, 1, 3},
		{"a tail's first frame, whole", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(7, out, "\xe2")}, Omitted: 9, Next: 7}, 1, 0, 6},
		{"a tail's first two frames, whole", logstore.Excerpt{Head: []logstore.Frame{f(1, out, "a")}, Tail: []logstore.Frame{f(7, out, "\xf0"), f(8, out, "\x9f\x98")}, Omitted: 9, Next: 8}, 1, 0, 6},
	} {
		// Frame 7 and those after are whole in the log, those before cut.
		e := holdIncomplete(tc.e, func(f logstore.Frame) bool { return f.Cursor >= 7 })
		if len(e.Head) != tc.head || len(e.Tail) != tc.tail || e.Next != tc.next {
			t.Errorf("%s: %d head and %d tail frames, next %d; want %d, %d, %d", tc.name, len(e.Head), len(e.Tail), e.Next, tc.head, tc.tail, tc.next)
		}
	}
}
