package plaintext

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var cases = []struct {
	name, in, want string
}{
	{"plain", "hello\nworld\n", "hello\nworld\n"},
	{"no final newline", "a\nb", "a\nb"},
	{"crlf", "a\r\nb\r\n", "a\nb\n"},
	{"cr overwrite", "10%\r20%\r100%\n", "100%\n"},
	{"cr shorter keeps the tail", "abcdef\rXY\n", "XYcdef\n"},
	{"cr then erase line", "abcdef\r\x1b[KXY\n", "XY\n"},
	{"erase whole line", "abcdef\x1b[2K\rXY\n", "XY\n"},
	{"erase to start", "abcdef\x1b[3D\x1b[1K\n", "    ef\n"},
	{"erase line alone leaves nothing", "abc\x1b[2K\n", "\n"},
	{"padded overwrite", "long message\rshort       \n", "short\n"},
	{"trailing spaces dropped", "a  \n \n", "a\n\n"},
	{"backspace", "abc\b\bX\n", "aXc\n"},
	{"backspace at column 0", "\b\bab\n", "ab\n"},
	{"backspace erase idiom", "abc\b \b\n", "ab\n"},
	{"sgr colours", "\x1b[01;31mred\x1b[0m \x1b[38;5;208morange\x1b[m\n", "red orange\n"},
	{"sgr colon form", "\x1b[38:2::255:0:0mx\x1b[m\n", "x\n"},
	{"cursor back and forward", "abcdef\x1b[4D\x1b[2CX\n", "abcdXf\n"},
	{"cursor forward past the end", "ab\x1b[3Cc\n", "ab   c\n"},
	{"cursor forward past the end writes nothing", "ab\x1b[3C\n", "ab\n"},
	{"column absolute", "abcdef\x1b[3GX\n", "abXdef\n"},
	{"column default", "abcdef\x1b[GX\n", "Xbcdef\n"},
	{"erase chars", "abcdef\x1b[2D\x1b[XZ\n", "abcdZf\n"},
	{"delete chars", "abcdef\x1b[4D\x1b[2P\n", "abef\n"},
	{"insert chars", "abcdef\x1b[4D\x1b[2@XY\n", "abXYcdef\n"},
	{"cursor up dropped", "a\n\x1b[1Ab\n", "a\nb\n"},
	{"private mode dropped", "\x1b[?25la\x1b[?25h\x1b[?1049h\n", "a\n"},
	{"private with C final dropped", "ab\x1b[?3Cc\n", "abc\n"},
	{"osc bel", "\x1b]0;title\x07text\n", "text\n"},
	{"osc st", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
	{"osc with utf-8", "\x1b]2;Über\x07ok\n", "ok\n"},
	{"dcs", "\x1bPq#0;2;0;0;0\x1b\\after\n", "after\n"},
	{"apc pm sos", "\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\x\n", "x\n"},
	{"dcs ignores bel", "\x1bPa\x07b\x1b\\c\n", "c\n"},
	{"two-byte escapes", "\x1b7a\x1b8\x1b=\x1b>b\x1bMc\n", "abc\n"},
	{"charset designation", "\x1b(Ba\x1b)0b\n", "ab\n"},
	{"can aborts csi", "\x1b[3\x18x\n", "x\n"},
	{"newline inside csi acts", "a\x1b[3\nm\n", "a\n\n"},
	{"esc restarts", "\x1b\x1b[31mx\n", "x\n"},
	{"c1 csi code point", "\u009b31mx\u009b0m\n", "x\n"},
	{"c1 osc code point", "\u009d0;t\u009cx\n", "x\n"},
	{"raw 0x9b byte is not csi", "a\x9b31mb\n", "a\ufffd31mb\n"},
	{"text with 0x9c continuation", "Ü\n", "Ü\n"},
	{"invalid utf-8", "a\xffb\xc3\n", "a\ufffdb\ufffd\n"},
	// One U+FFFD for each maximal subpart, as the API's text fields and
	// the SDKs' decoders give them: "\xe2\x82A" read as two before A.
	{"truncated utf-8 at end", "a\xe2\x82", "a\ufffd"},
	{"truncated utf-8 before text", "\xe2\x82A\xf0\x9f\x98B", "\ufffdA\ufffdB"},
	{"encoded surrogate", "\xed\xa0\x80.", "\ufffd\ufffd\ufffd."},
	{"lone continuation bytes", "\x80\x81.", "\ufffd\ufffd."},
	{"utf-8 overwrite", "héllo\r\x1b[2Cé\n", "héélo\n"},
	{"tab kept", "a\tb\n", "a\tb\n"},
	{"other controls dropped", "a\x00\x07\x0eb\x7f\n", "ab\n"},
	{"form feed is a newline", "a\fb", "a\nb"},
	{"huge forward is bounded", "a\x1b[999999999999Cb\n", "a" + strings.Repeat(" ", width-1) + "b\n"},
	{"long csi dropped", "a\x1b[" + strings.Repeat("1;", 40) + "Cb\n", "ab\n"},
	{"unterminated csi", "a\x1b[31", "a"},
	{"broken csi keeps text", "\x1b[3é\n", "é\n"},
	{"progress bar", progress(), "100%"},
}

// progress is what python's print(f"\r{i}%", end="") writes for 0..100.
func progress() string {
	var b strings.Builder
	for i := range 101 {
		b.WriteString("\r" + strconv.Itoa(i) + "%")
	}
	return b.String()
}

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := String([]byte(tc.in)); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// Feeding the input in pieces, split anywhere (inside an escape sequence or a
// UTF-8 character too), renders the same as a whole.
func TestRendererSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tc.in)
			for i := 0; i <= len(in); i++ {
				for j := i; j <= len(in); j++ {
					var r Renderer
					r.Write(in[:i])
					r.Write(in[i:j])
					r.Write(in[j:])
					r.Flush()
					if got := r.String(); got != tc.want {
						t.Fatalf("split at %d,%d of %q\n got %q\nwant %q", i, j, tc.in, got, tc.want)
					}
				}
				if len(in) > 200 {
					break // the progress bar: one split loop is enough
				}
			}
		})
	}
}

// String before Flush shows the finished text without a held-back partial
// character, and a later Write completes it.
func TestRendererHoldsPartialCharacter(t *testing.T) {
	t.Parallel()
	var r Renderer
	r.Write([]byte("ab\xc3"))
	if got := r.String(); got != "ab" {
		t.Fatalf("before completion: %q", got)
	}
	r.Write([]byte("\x9c!"))
	if got := r.String(); got != "abÜ!" {
		t.Fatalf("after completion: %q", got)
	}
	if r.Len() < len("abÜ!")-1 {
		t.Fatalf("Len %d", r.Len())
	}
}

func FuzzString(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.in), uint8(len(tc.in)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		got := String(in)
		if strings.ContainsRune(got, esc) {
			t.Fatalf("output of %q holds ESC: %q", in, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("output of %q is not UTF-8: %q", in, got)
		}
		if strings.ContainsFunc(got, func(c rune) bool {
			return c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f && c < 0xa0
		}) {
			t.Fatalf("output of %q holds a control character: %q", in, got)
		}
		i := min(int(split), len(in))
		var r Renderer
		r.Write(in[:i])
		r.Write(in[i:])
		r.Flush()
		if r.String() != got {
			t.Fatalf("split at %d of %q: %q, whole: %q", i, in, r.String(), got)
		}
		if len(got) > 4*len(in)+width*bytes.Count(in, []byte{esc})+width*strings.Count(string(in), "\u009b") {
			t.Fatalf("output of %d bytes from %d of input", len(got), len(in))
		}
	})
}

// BenchmarkString renders 1 MiB of coloured lines with a progress bar among
// them.
func BenchmarkString(b *testing.B) {
	var in []byte
	for len(in) < 1<<20 {
		in = append(in, "\x1b[01;32mok\x1b[0m   src/pkg/file.go \x1b[2m(12 ms)\x1b[0m\r\n"...)
		in = append(in, "\r 42% [=====>     ]\x1b[K"...)
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		String(in)
	}
}

// TestRendererLines: the finished lines are taken as they come, and what
// was taken plus what is left reads as the whole.
func TestRendererLines(t *testing.T) {
	var r Renderer
	var got strings.Builder
	for _, piece := range []string{"10%\r", "100%\nsecond \x1b[1mli", "ne\x1b[0m\nlast\rLAST", " line"} {
		r.Write([]byte(piece))
		got.WriteString(r.Lines())
	}
	if got.String() != "100%\nsecond line\n" {
		t.Errorf("lines taken = %q", got.String())
	}
	r.Flush()
	if rest := r.String(); rest != "LAST line" {
		t.Errorf("left = %q, want the current line", rest)
	}
	if r.Lines() != "" {
		t.Error("lines taken twice")
	}
}

// A line longer than width is taken in rows of width cells, as a terminal
// shows it: inserting, deleting and erasing to the start move or blank the
// cursor's row only, and cells pushed past its end are lost.
func TestLongLineRows(t *testing.T) {
	line := strings.Repeat("a", width) + strings.Repeat("b", width) + "c"
	for _, tc := range []struct{ name, in, want string }{
		{"insert in the first row", line + "\r\x1b[2@XY",
			"XY" + strings.Repeat("a", width-2) + strings.Repeat("b", width) + "c"},
		{"insert in the last row grows it", line + "\x1b[1D\x1b[2@",
			strings.Repeat("a", width) + strings.Repeat("b", width) + "  c"},
		{"delete in the first row", line + "\r\x1b[2P",
			strings.Repeat("a", width-2) + "  " + strings.Repeat("b", width) + "c"},
		{"erase to the row's start", line + "\x1b[1022D\x1b[1K", // from column 2049 to 1027
			strings.Repeat("a", width) + strings.Repeat(" ", 4) + strings.Repeat("b", width-4) + "c"},
	} {
		if got := String([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: got %d cells %q..., want %d", tc.name, len(got), got[:min(len(got), 8)], len(tc.want))
		}
	}
}

// Inserting, deleting and erasing over and over at the start of a long line
// take time linear in the output: 680 KB of them took 45 s to render, and
// a daemon rendering a run's plain answer went on after its client left.
// The guard is a hang guard, far above the milliseconds it takes.
func TestLongLineEditsAreLinear(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(strings.Repeat("a", 1_000_000))
	b.WriteString("\r")
	for range 100_000 {
		b.WriteString("\x1b[@\x1b[P")
	}
	b.WriteString(strings.Repeat("\x1b[1K", 100_000))
	done := make(chan string, 1)
	go func() { done <- String(b.Bytes()) }()
	select {
	case out := <-done:
		if len(out) != 1_000_000 {
			t.Fatalf("rendered %d cells, want 1000000", len(out))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("rendering did not end within 20 s")
	}
}

func TestIncompleteTail(t *testing.T) {
	for _, c := range []struct {
		b    string
		want int
	}{
		{"", 0},
		{"abc", 0},
		{"a\xc3", 1},             // é begun
		{"a\xe2\x82", 2},         // € begun
		{"a\xf0\x9f\x98", 3},     // an emoji begun
		{"a\xf0\x9f\x98\x80", 0}, // whole
		{"a\xc3\xa9", 0},         // whole
		{"a\xe2\x28", 0},         // a bad second byte: never valid, not held
		{"a\xff", 0},             // no start at all
		{"\x82\x82\x82", 0},      // continuation bytes with no start in reach
	} {
		if got := IncompleteTail([]byte(c.b)); got != c.want {
			t.Errorf("IncompleteTail(%q) = %d, want %d", c.b, got, c.want)
		}
	}
}

// Bounded gives String's text, its start or its end, and its length,
// holding no more than about its bound; Fits tells whether String's text
// fits a limit.
func TestBounded(t *testing.T) {
	inputs := []string{
		"", "a\nb\n", "abc", "x\r\ny\bz\n\x1b[5Cw",
		strings.Repeat("\x1b[1023Cx\n", 5000), // 45,000 bytes to 5 MB of text
		strings.Repeat("line of text\r\n", 3000) + "\x1b]0;title\x07end",
	}
	for _, in := range inputs {
		whole := String([]byte(in))
		for _, most := range []int{0, 1, 10, 1000, 100000, 1 << 30} {
			start, n := Bounded([]byte(in), most, false)
			require.Equal(t, len(whole), n, "%.20q %d", in, most)
			require.Equal(t, whole[:min(len(whole), most+1)], start, "%.20q %d", in, most)
			bd := Bound{Most: most, End: true}
			bd.Write([]byte(in))
			end, n, _, _ := bd.Text()
			require.Equal(t, len(whole), n)
			require.Equal(t, whole[max(0, len(whole)-most-1):], end, "%.20q %d", in, most)
			require.Equal(t, len(whole) <= most, Fits([]byte(in), most, false), "%.20q %d", in, most)
		}
	}
}
