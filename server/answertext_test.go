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
