package plaintext

import (
	"strings"
	"testing"
)

func TestUnfinished(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"plain text\n", 0},
		{"ab\x1b", 1},
		{"ab\x1b[", 2},
		{"ab\x1b[31", 4},
		{"ab\x1b[31m", 0},
		{"ab\x1b[31mred", 0},
		{"\x1b]0;title", 9},
		{"\x1b]0;title\x07", 0},
		{"\x1b]0;title\x1b", 1}, // the title is read; ESC \ would end the string
		{"\x1b]0;title\x1b\\", 0},
		{"ab\u009b3", 3},
		{"Ü\x1b(", 2},
		{"ab\x1b[3\x18", 0}, // CAN ends it
		{"\x1b]" + strings.Repeat("x", MaxUnfinished), 0},
	} {
		if got := Unfinished([]byte(tt.in)); got != tt.want {
			t.Errorf("Unfinished(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestSequenceEnd(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"text", 0},
		{"\x1b[31mred", 5},
		{"\x1b[31", 0},
		{"\x1b]0;t\x07x", 6},
		{"\u009b0m!", 4},
		{"\x1b7x", 2},
	} {
		if got := SequenceEnd([]byte(tt.in)); got != tt.want {
			t.Errorf("SequenceEnd(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
