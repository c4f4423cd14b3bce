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

// An answer of a process that still runs holds back the frames at the
// log's end that begin a character, on one channel: heldFrom finds the
// first of them; not bytes that cannot become one, nor frames of another
// channel, nor those at or before the answer's cursor.
func TestHeldFrom(t *testing.T) {
	f := func(c logstore.Cursor, ch logstore.Channel, s string) logstore.Frame {
		return logstore.Frame{Cursor: c, Channel: ch, Data: []byte(s)}
	}
	out, errs := logstore.Stdout, logstore.Stderr
	for _, tc := range []struct {
		name  string
		log   []logstore.Frame // after after, to the end
		after logstore.Cursor
		from  logstore.Cursor
	}{
		{"one frame", []logstore.Frame{f(1, out, "a"), f(2, out, "\xe2\x82")}, 0, 2},
		{"two frames", []logstore.Frame{f(1, out, "a"), f(2, out, "\xf0"), f(3, out, "\x9f\x98")}, 0, 2},
		{"alone", []logstore.Frame{f(5, errs, "\xe2")}, 4, 5},
		{"two channels", []logstore.Frame{f(1, out, "\xe2"), f(2, errs, "\x82")}, 0, 0},
		{"whole", []logstore.Frame{f(1, out, "\xe2\x82"), f(2, out, "\xac")}, 0, 0},
		{"invalid", []logstore.Frame{f(1, out, "a\xed\xa0")}, 0, 0},
		{"not first bytes alone", []logstore.Frame{f(1, out, "a"), f(2, out, "b\xe2")}, 0, 0},
		{"dropped from the log", nil, 0, 0},
		{"its start before the cursor", []logstore.Frame{f(4, out, "\xf0"), f(5, out, "\x9f")}, 4, 0},
	} {
		var next logstore.Cursor
		if len(tc.log) > 0 {
			next = tc.log[len(tc.log)-1].Cursor
		} else {
			next = 2
		}
		from := heldFrom(next, tc.after, func(c logstore.Cursor) (logstore.Frame, bool) {
			for _, f := range tc.log {
				if f.Cursor == c {
					return f, true
				}
			}
			return logstore.Frame{}, false
		})
		if from != tc.from {
			t.Errorf("%s: held from %d, want %d", tc.name, from, tc.from)
		}
	}
}
