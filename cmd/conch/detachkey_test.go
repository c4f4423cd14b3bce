package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is an attachment that takes every write at once.
type syncBuffer struct {
	mu  sync.Mutex
	got bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got.String()
}

// scriptedReader is a terminal whose reads return reads in turn, then EOF.
// A read given as full fills the reader's buffer with x before the rest
// (fullRead), as a read behind a long paste does.
type scriptedReader struct {
	reads []string
	wait  func(i int) // called before read i, if set
	i     int
}

const fullRead = "\x00full:"

func (r *scriptedReader) Read(p []byte) (int, error) {
	if r.i == len(r.reads) {
		return 0, io.EOF
	}
	if r.wait != nil {
		r.wait(r.i)
	}
	s := r.reads[r.i]
	r.i++
	if tail, ok := strings.CutPrefix(s, fullRead); ok {
		s = strings.Repeat("x", len(p)-len(tail)) + tail
	}
	return copy(p, s), nil
}

// TestAttachDetachKeySequences: once a program turned on the kitty keyboard
// protocol or xterm's modifyOtherKeys, the terminal sends Ctrl-] as an
// escape sequence, not as the byte 0x1d, and conch attach could not be
// detached from. It now detaches on those sequences too, whole or cut
// between reads, and passes on every other key.
func TestAttachDetachKeySequences(t *testing.T) {
	t.Parallel()
	full := strings.Repeat("x", 4096)
	for _, tc := range []struct {
		name     string
		reads    []string
		sent     string // what reached the program
		detached bool
	}{
		{"byte", []string{"ab\x1dcd"}, "ab", true},
		{"kitty", []string{"ab\x1b[93;5ucd"}, "ab", true},
		{"kitty pressed", []string{"ab\x1b[93;5:1u"}, "ab", true},
		{"kitty alternate keys and text", []string{"\x1b[93:125:93;5:1;29u"}, "", true},
		{"kitty caps lock", []string{"\x1b[93;69u"}, "", true},
		{"modifyOtherKeys", []string{"ab\x1b[27;5;93~cd"}, "ab", true},
		{"after other keys", []string{"\x1b[1;5A\x1b\x1b[A\x1b[27;5;93~"}, "\x1b[1;5A\x1b\x1b[A", true},
		{"cut in a full read", []string{fullRead + "\x1b[93", ";5u"}, full[:4092], true},
		{"cut after ESC in a full read", []string{fullRead + "\x1b", "[27;5;93~"}, full[:4095], true},
		{"cut in a short read", []string{"a\x1b[93;", "5u"}, "a", true},
		{"cut after ESC in a short read", []string{"a\x1b", "[27;5;93~"}, "a", true},
		{"cut in a short read, not the key", []string{"a\x1b[93;", "6u"}, "a\x1b[93;6u", false},
		{"other key cut in a short read", []string{"a\x1b[1;", "5A"}, "a\x1b[1;5A", false},
		{"released", []string{"\x1b[93;5:3u"}, "\x1b[93;5:3u", false},
		{"other keys", []string{"\x1b[93u\x1b[93;6u\x1b[27;5;91~\x1b[91;5u\x1b[27;5;93;1~\x1b[?93;5u"},
			"\x1b[93u\x1b[93;6u\x1b[27;5;91~\x1b[91;5u\x1b[27;5;93;1~\x1b[?93;5u", false},
		{"other key cut in a full read", []string{fullRead + "\x1b[9", "1;5u"}, full[:4093] + "\x1b[91;5u", false},
		{"long sequence", []string{"\x1b[" + strings.Repeat("1;", 40) + "93;5u"}, "\x1b[" + strings.Repeat("1;", 40) + "93;5u", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w syncBuffer
			// Held back until the next read, however late it is.
			detached := copyInput(&w, &scriptedReader{reads: tc.reads}, time.Hour, new(detachScan), nil)
			require.Equal(t, tc.detached, detached)
			require.Eventually(t, func() bool { return w.String() == tc.sent }, 20*time.Second, time.Millisecond,
				"sent %q, want %q", w.String(), tc.sent)
		})
	}
}

// TestAttachLoneEscGoesAtOnce: an Esc key (a lone ESC, which may begin a
// sequence) read on its own reaches the program at once, not with the next
// key.
func TestAttachLoneEscGoesAtOnce(t *testing.T) {
	t.Parallel()
	var w syncBuffer
	r := &scriptedReader{reads: []string{"\x1b", "\x1d"}, wait: func(i int) {
		if i == 1 {
			require.Eventually(t, func() bool { return w.String() == "\x1b" }, 20*time.Second, time.Millisecond)
		}
	}}
	require.True(t, copyUntilDetach(&w, r))
}

// TestAttachHeldSequenceGoesWhenIdle: a sequence cut at the end of a read
// that may be the detach key's is held back for the next read, but only
// for a moment: with nothing after it, it reaches the program as it is, and
// what comes later goes on from there.
func TestAttachHeldSequenceGoesWhenIdle(t *testing.T) {
	t.Parallel()
	var w syncBuffer
	r := &scriptedReader{reads: []string{"a\x1b[93;", "5u"}, wait: func(i int) {
		if i == 1 {
			require.Eventually(t, func() bool { return w.String() == "a\x1b[93;" }, 20*time.Second, time.Millisecond)
		}
	}}
	require.False(t, copyInput(&w, r, time.Millisecond, new(detachScan), nil))
	require.Eventually(t, func() bool { return w.String() == "a\x1b[93;5u" }, 20*time.Second, time.Millisecond,
		"sent %q", w.String())
}

// TestAwaitRelease: the release of Ctrl-] read with the press that
// detached ends the wait at once; one read later ends it then; other keys,
// and Ctrl-] held (a repeat), do not.
func TestAwaitRelease(t *testing.T) {
	t.Parallel()
	awaitRelease(&scriptedReader{reads: []string{""}, wait: func(int) { t.Error("read past the release") }},
		[]byte("x\x1b[93;5:3u"))
	r := &scriptedReader{reads: []string{"\x1b[93;5:2u\x1b[97;5:3u", "\x1b[93;5:", "3u", "after"}}
	awaitRelease(r, []byte("\x1b[93;5:1u"))
	require.Equal(t, 3, r.i, "read up to the release, not past it")
	// Ctrl let go first: "]" is let go alone, no modifier; Alt-] let go
	// is another key's.
	r = &scriptedReader{reads: []string{"\x1b[93;3:3u", "\x1b[93;1:3u", "after"}}
	awaitRelease(r, nil)
	require.Equal(t, 2, r.i, "read up to the release of ] with Ctrl let go before it")
}
