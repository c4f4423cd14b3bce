package sentinel

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// feed writes stream to a new Scanner in pieces cut at splits and returns
// what it let through and whether it found the end.
func feed(t testing.TB, n Nonce, trailer bool, stream []byte, splits []int) ([]byte, *Scanner) {
	var out bytes.Buffer
	s := NewScanner(n, trailer, func(p []byte) { out.Write(p) })
	prev := 0
	for _, c := range append(splits, len(stream)) {
		c = max(prev, min(c, len(stream)))
		_, err := s.Write(stream[prev:c])
		require.NoError(t, err)
		prev = c
	}
	if !s.Done() {
		s.Flush()
	}
	return out.Bytes(), s
}

func TestScannerTable(t *testing.T) {
	t.Parallel()
	n := Nonce("0123456789abcdef01234567")
	m := string(n.Marker())
	other := string(Nonce("ffffffffffffffffffffffff").Marker())
	tests := []struct {
		name, stream, want string
		done               bool
		end                End
	}{
		{"plain", "hello\n" + m + "_0_ hix /tmp\x00", "hello\n", true, End{Status: 0, Flags: "hix", Cwd: "/tmp"}},
		{"no newline", "abc" + m + "_3_ i /a b\x00after", "abc", true, End{Status: 3, Flags: "i", Cwd: "/a b"}},
		{"fake marker", other + "_7_ i /x\x00real" + m + "_1_ i /\x00", other + "_7_ i /x\x00real", true, End{Status: 1, Flags: "i", Cwd: "/"}},
		{"lead bytes in output", "\x1e\x1eC\x1eCONC" + m + "_0_ i /\x00", "\x1e\x1eC\x1eCONC", true, End{Status: 0, Flags: "i", Cwd: "/"}},
		{"no marker", "abc\x1eCONCH0123", "abc\x1eCONCH0123", false, End{}},
		{"newline in cwd", m + "_0_ i /a\nb\x00", "", true, End{Status: 0, Flags: "i", Cwd: "/a\nb"}},
		{"no flags", m + "_0_  /a\x00", "", true, End{Status: 0, Flags: "", Cwd: "/a"}},
		{"padded", m + "_1_   i /a\x00", "", true, End{Status: 1, Flags: "", Cwd: " i /a"}},
		{"ksh93 signal", m + "_265_ i /\x00", "", true, End{Status: 265, Flags: "i", Cwd: "/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for cut := 0; cut <= len(tt.stream); cut++ {
				got, s := feed(t, n, true, []byte(tt.stream), []int{cut})
				require.Equal(t, tt.want, string(got), "cut at %d", cut)
				require.Equal(t, tt.done, s.Done())
				if tt.done {
					require.Equal(t, tt.end, s.End())
				}
			}
		})
	}
}

// A marker without a trailer (a code cell's streams) ends the stream where
// it is.
func TestScannerWithoutTrailer(t *testing.T) {
	t.Parallel()
	n := NewNonce()
	got, s := feed(t, n, false, []byte("oops\n"+string(n.Marker())+"late"), nil)
	require.Equal(t, "oops\n", string(got))
	require.True(t, s.Done())
	require.Equal(t, End{}, s.End())
}

// A marker whose trailer is not what an end line writes, or runs past its
// bound, is the end all the same: it carries the command's nonce, which
// only the engine's end line and the command itself know. Nothing of it
// is output, nor what follows, however the stream is cut; the End says
// that it could not be read, with what stood where the status should (a
// status variable whose width, base or justification a command changed:
// typeset -L1, -R1, -Z2, -i 16).
func TestScannerBadTrailer(t *testing.T) {
	t.Parallel()
	n := Nonce("0123456789abcdef01234567")
	m := string(n.Marker())
	long := strings.Repeat("x", maxTrailer+10)
	for name, tc := range map[string]struct{ trailer, status string }{
		"no status":       {"x i /\x00", "x"},
		"no fields":       {"_12_\x00", "_12_"},
		"bare digits":     {"3 i /\x00", "3"},
		"cut left":        {"_ i /\x00", "_"},
		"cut":             {"_12 i /\x00", "_12"},
		"cut right":       {"2_ i /\x00", "2_"},
		"zero-filled":     {"0_1_ i /\x00", "0_1_"},
		"right-justified": {" _1_ i /\x00", ""},
		"a base":          {"16#2A i /\x00", "16#2A"},
		"signed":          {"_-1_ i /\x00", "_-1_"},
		"too long":        {long, strings.Repeat("x", 16)},
		"nested":          {m + "_1_ i /\x00", "\x1eCONCH0123456789"},
		"long status":     {"_1234567890123456789_ i /\x00", "_123456789012345"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stream := "a" + m + tc.trailer + "b" + m + "_3_ i /d\x00late"
			for _, cut := range []int{0, 1, len(m), len(m) + 1, len(m) + len(tc.trailer)/2, len(m) + len(tc.trailer), len(stream) - 6} {
				got, s := feed(t, n, true, []byte(stream), []int{cut})
				require.Equal(t, "a", string(got), "cut at %d", cut)
				require.True(t, s.Done())
				require.Equal(t, End{Unreadable: true, StatusText: tc.status}, s.End(), "cut at %d", cut)
			}
		})
	}
}

// A directory longer than MaxCwd (a path past PATH_MAX is one, as long
// as a command makes it) is left out of the End, which still reports the
// status and flags before it, however the stream is cut; one of MaxCwd
// bytes is reported whole. Nothing after the marker is output.
func TestScannerLongCwd(t *testing.T) {
	t.Parallel()
	n := Nonce("0123456789abcdef01234567")
	m := string(n.Marker())
	for _, size := range []int{MaxCwd - 1, MaxCwd, MaxCwd + 1, maxTrailer, 4 * maxTrailer} {
		cwd := "/" + strings.Repeat("d", size-1)
		stream := "out" + m + "_7_ hB " + cwd + "\x00late"
		want := End{Status: 7, Flags: "hB", Cwd: cwd}
		if size > MaxCwd {
			want = End{Status: 7, Flags: "hB", CwdTooLong: true}
		}
		for _, cut := range []int{0, 3, len(m) + 10, len(m) + maxTrailer/2, len(m) + maxTrailer, len(m) + maxTrailer + 4, len(stream) - 5, len(stream) - 4} {
			got, s := feed(t, n, true, []byte(stream), []int{cut})
			require.Equal(t, "out", string(got), "%d bytes, cut at %d", size, cut)
			require.True(t, s.Done(), "%d bytes, cut at %d", size, cut)
			e := s.End()
			require.True(t, e == want, "%d bytes, cut at %d: status %d, flags %q, unreadable %v (%q), %d bytes of cwd, too long %v",
				size, cut, e.Status, e.Flags, e.Unreadable, e.StatusText, len(e.Cwd), e.CwdTooLong)
		}
	}
}

// ParseStatus reads the status as the end line writes it, between
// underscores, and nothing else.
func TestParseStatus(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"_0_": 0, "_127_": 127, "_258_": 258} {
		got, ok := ParseStatus([]byte(in))
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "_", "__", "_1", "1_", "_+1_", "_-1_", "_1 _", "16#2A", " _1_", "_1_ ", "_99999999999999999999_"} {
		_, ok := ParseStatus([]byte(in))
		require.False(t, ok, "%q", in)
	}
}

// FuzzScanner feeds output that may imitate markers, split at random points:
// every byte before the real marker comes out once, in order, and nothing
// after it.
func FuzzScanner(f *testing.F) {
	f.Add([]byte("hello"), uint64(1), uint8(3))
	f.Add([]byte("\x1eCONCH"), uint64(7), uint8(9))
	f.Add([]byte("\x1e\x1e\x1eCONCHdeadbeef\x00"), uint64(42), uint8(1))
	f.Fuzz(func(t *testing.T, output []byte, seed uint64, pieces uint8) {
		n := NewNonce()
		// The nonce is secret: output may contain anything but the real marker.
		if bytes.Contains(output, n.Marker()) {
			t.Skip()
		}
		stream := append(append(append([]byte{}, output...), n.Marker()...), "_12_ i /d\x00tail"...)
		r := rand.New(rand.NewPCG(seed, seed))
		var splits []int
		for range int(pieces) % 16 {
			splits = append(splits, r.IntN(len(stream)+1))
		}
		sortInts(splits)
		got, s := feed(t, n, true, stream, splits)
		if !bytes.Equal(got, output) {
			t.Fatalf("got %q, want %q", got, output)
		}
		if !s.Done() || s.End() != (End{Status: 12, Flags: "i", Cwd: "/d"}) {
			t.Fatalf("end %+v done %v", s.End(), s.Done())
		}
	})
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func TestFramePreviousStatus(t *testing.T) {
	t.Parallel()
	p := Paths{Stdout: "/o", Stderr: "/e", Script: "/s"}
	require.NotContains(t, New(0, p).Text, "exit")
	require.Contains(t, New(1, p).Text, "! __conch_s=1; \\. '/s'")
	require.Contains(t, New(130, p).Text, "(\\exit 130) && \\:; \\. '/s'")
	p.Calls.False = `\builtin \false`
	require.Contains(t, New(1, p).Text, "\\builtin \\false && \\:; \\. '/s'")
	require.Contains(t, New(0, Paths{Stdout: "/o", Stderr: "/e", Script: "/my dir/s"}).Text, "\\. '/my dir/s' <'/dev/null' >'/o' 2>'/e'")
}

// A Scanner Reset for the next command finds that command's marker, not the
// last one's, reports its trailer, and allocates nothing once it has room.
func TestScannerReset(t *testing.T) {
	first, next := Nonce("0123456789abcdef01234567"), Nonce("ffffffffffffffffffffffff")
	var out bytes.Buffer
	s := NewScanner(first, true, func(p []byte) { out.Write(p) })
	_, err := s.Write([]byte("a" + string(first.Marker()) + "_1_ i /x\x00"))
	require.NoError(t, err)
	require.True(t, s.Done())
	out.Reset()
	s.Reset(next, true, func(p []byte) { out.Write(p) })
	require.False(t, s.Done())
	_, err = s.Write([]byte("b" + string(first.Marker()) + "c" + string(next.Marker()) + "_2_ e /y z\x00"))
	require.NoError(t, err)
	require.True(t, s.Done())
	require.Equal(t, "b"+string(first.Marker())+"c", out.String())
	require.Equal(t, End{Status: 2, Flags: "e", Cwd: "/y z"}, s.End())

	stream := []byte(string(next.Marker()) + "_0_ i /\x00")
	out.Reset()
	discard := func([]byte) {}
	if n := testing.AllocsPerRun(100, func() {
		s.Reset(next, true, discard)
		s.Write(stream[:3])
		s.Write(stream[3:])
	}); n > 0 { // the End's flags and directory are the last end's, shared
		t.Fatalf("a reset scanner: %v allocations per command", n)
	}
}
