package plaintext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
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

func TestOpen(t *testing.T) {
	long := strings.Repeat("x", 3*MaxUnfinished)
	for _, tt := range []struct {
		in, want string
	}{
		{"", ""},
		{"plain text\n", ""},
		{"ab\x1b", "\x1b"},
		{"ab\x1b[", "\x1b["},
		{"ab\x1b[31", "\x1b[31"},
		{"ab\x1b[31mred", ""},
		{"\x1b(", "\x1b("},
		{"Ü\x1b(", "\x1b("}, // Ü is c3 9c: no C1 ST
		{"\x1b[" + strings.Repeat("1", 40), "\x1b[" + strings.Repeat("1", maxParams) + "0"},
		{"\u009b1;2", "\x1b[1;2"},
		{"\x1b]52;c;" + long, "\x1b]"},
		{"\x1b]52;c;" + long + "\x07", ""},
		{"\x1b]52;c;" + long + "\x07after", ""},
		{"\u009d0;" + long, "\x1b]"},
		{"\x1b]0;" + long + "\u009c", ""},
		{"\x1b]0;" + long + "\x1b", "\x1b"}, // ESC \ would end it
		{"\x1bPq" + long, "\x1bP"},
		{"\x1bPq" + long + "\x07", "\x1bP"}, // BEL does not end a DCS
		{"\x1b_Ga=T;" + long, "\x1bP"},      // an APC is dropped as a DCS is
		{"\x1b]0;ab\x18cd", ""},             // CAN ends it
		{"ab\x1b[3\x18", ""},
	} {
		got := Open([]byte(tt.in))
		if string(got) != tt.want {
			t.Errorf("Open(%.40q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := Open(got); string(again) != tt.want {
			t.Errorf("Open(Open(%.40q)) = %q, want %q", tt.in, again, tt.want)
		}
	}
}

// TestOpenCarries splits output between every two characters (frames and
// cuts never split one): rendering the first part,
// then Open of it and the second part, reads as rendering the whole, with
// no piece of a sequence as text. (The samples move no cursor and have no
// blank before a split, which a part's render would drop at its end.)
func TestOpenCarries(t *testing.T) {
	for _, whole := range []string{
		"ab\x1b[31mred\x1b[0m!\n",
		"x\x1b]0;title\x07y\n\x1b]8;;http://example.com\x1b\\link\x1b]8;;\x1b\\\n",
		"\x1bPq#0;2;0;0;0#1~~@@\x1b\\ok\n\u009b1mbold\u009b0m_\u009d0;t\u009cend\n",
		"\x1b]52;c;" + strings.Repeat("QUFB", 3000) + "\x07done\n",
		"a\x1b(Bb\x1b7c\x1b[?25ld\x1b[" + strings.Repeat("9", 50) + "me\n",
	} {
		want := String([]byte(whole))
		for i := range len(whole) + 1 {
			if i < len(whole) && !utf8.RuneStart(whole[i]) {
				continue
			}
			a, b := []byte(whole[:i]), []byte(whole[i:])
			got := String(a) + String(append(Open(a), b...))
			if got != want {
				t.Fatalf("split at %d of %.60q: %q, want %q", i, whole, got, want)
			}
		}
	}
}

// TestThen splits output between every two characters, as frames may
// (they never split one): Then of what the first part left open and the
// second part is Open of the whole.
func TestThen(t *testing.T) {
	for _, whole := range []string{
		"ab\x1b[31mred\x1b[0m!\x1b[3",
		"x\x1b]0;title\x07y\n\x1b]8;;http://exa",
		"\x1bPq#0;2;0;0;0#1~~@@",
		"\x1b]52;c;" + strings.Repeat("QUFB", 3000),
		"\u009b1mbold\u009b0",
		"plain",
	} {
		want := Open([]byte(whole))
		for i := range len(whole) + 1 {
			if i < len(whole) && !utf8.RuneStart(whole[i]) {
				continue
			}
			got := Then(Open([]byte(whole[:i])), []byte(whole[i:]))
			if !bytes.Equal(got, want) {
				t.Fatalf("split at %d of %.60q: %q, want %q", i, whole, got, want)
			}
		}
	}
}

// Carried ends with the first bytes of a character the output before the
// cursor ends inside of, per channel: rendering it, then the frames after the
// cursor, shows the character whole, as rendering all the output does,
// rather than U+FFFD for its rest.
func TestCarriedCharacterCutAtTheCursor(t *testing.T) {
	type frame struct {
		data   string
		stderr bool
	}
	for _, tt := range []struct {
		before, after []frame
		out, err      string
	}{
		{[]frame{{"x\xe2", false}}, []frame{{"\x82\xacy\n", false}}, "€y\n", ""},
		{[]frame{{"x\xe2", false}, {"\x82", false}}, []frame{{"\xacy\n", false}}, "€y\n", ""},
		{[]frame{{"\xe2", false}, {"e\xf0\x9f", true}}, []frame{{"\x98\x80\n", true}, {"\x82\xac\n", false}}, "€\n", "😀\n"},
		{[]frame{{"\x1b[31", false}, {"m\xe2", false}}, []frame{{"\x82\xac\n", false}}, "€\n", ""},
		{[]frame{{"\xe2\x82\xac", false}}, []frame{{"\x82\n", false}}, "\uFFFD\n", ""}, // a stray byte stays one
	} {
		var c Carried
		for _, f := range tt.before {
			c.Add([]byte(f.data), f.stderr)
		}
		var out, errs Renderer
		out.Write(c.Out)
		errs.Write(c.Err)
		for _, f := range tt.after {
			if f.stderr {
				errs.Write([]byte(f.data))
			} else {
				out.Write([]byte(f.data))
			}
		}
		out.Flush()
		errs.Flush()
		if got := out.String(); got != tt.out {
			t.Errorf("%v then %v: stdout %q, want %q", tt.before, tt.after, got, tt.out)
		}
		if got := errs.String(); got != tt.err {
			t.Errorf("%v then %v: stderr %q, want %q", tt.before, tt.after, got, tt.err)
		}
	}
}
