package main

import (
	"bytes"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
)

// termModes passes a program's output on to the terminal that shows it,
// and keeps track of the terminal state the program changed that leaves
// the terminal unusable to the shell that runs conch: the alternate screen,
// a hidden cursor, mouse reports, focus reports, bracketed paste,
// application cursor keys and keypad, reverse video, autowrap off, a
// scroll region, the keyboard modes that encode keys as escape sequences
// (the kitty keyboard protocol, xterm's modifyOtherKeys), colors and text
// attributes, a line-drawing character set. conch attach puts them back
// (Restore) when it detaches, or the program ends without doing so itself,
// as the program does when it ends well: else a shell met a blank
// alternate screen with no cursor that printed escape sequences at each
// click, or keys sent as sequences it did not know.
type termModes struct {
	w      io.Writer
	state  int    // where in an escape sequence the output is
	prefix byte   // a CSI's private marker (? > < =), or 0
	params []byte // a CSI's parameters so far
	long   bool   // the CSI's parameters went past what is kept
	set    map[int]bool

	// kittyPushed counts the kitty keyboard flags pushed (CSI > flags u)
	// and not popped on the main screen [0] and the alternate one [1],
	// each of which has its own stack; kittySet tells that one's flags
	// were set in place (CSI = flags u) with none pushed.
	kittyPushed [2]int
	kittySet    [2]bool
	// kittyFlags is each screen's stack of kitty keyboard flags, the
	// newest maxKittyFlags of them, and kittyBase its flags with none
	// pushed; kittyEvents tells whether the flags in effect report key
	// release events (flag 2), for the input's reader.
	kittyFlags      [2][]int
	kittyBase       [2]int
	kittyEvents     atomic.Bool
	otherKeys       bool // xterm's modifyOtherKeys on (CSI > 4 ; N m)
	sgr             bool // colors or attributes on (CSI ... m)
	scrollRegion    bool // a scroll region set (CSI T ; B r)
	charset         bool // G0 not ASCII (ESC ( X)
	shiftOut        bool // G1 in use (SO)
	applicationKeys bool // the keypad in application mode (ESC =)
}

// The states of termModes' scan: plain text, after ESC, after "ESC [",
// after "ESC (".
const (
	modesText = iota
	modesEsc
	modesCSI
	modesCharset
)

// restoreOrder lists the private modes termModes tracks, in the order
// Restore puts them back: the alternate screens last, so that the resets
// before them reach the screen the shell returns to.
var restoreOrder = []int{1000, 1002, 1003, 1005, 1006, 1015, 1004, 2004, 1, 5, 7, 25, 1049, 1047, 47}

// modeAtRest is each tracked mode's state at rest: only autowrap (7) and
// the cursor's visibility (25) are on.
func modeAtRest(m int) bool { return m == 7 || m == 25 }

// maxModeParams bounds the parameters termModes keeps of a sequence.
const maxModeParams = 64

func newTermModes(w io.Writer) *termModes { return &termModes{w: w, set: map[int]bool{}} }

func (t *termModes) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.scan(p[:n])
	return n, err
}

// scan follows p's sequences that change what termModes tracks.
func (t *termModes) scan(p []byte) {
	for _, b := range p {
		if b == 0x1b {
			t.state = modesEsc
			continue
		}
		switch t.state {
		case modesText:
			switch b {
			case 0x0e: // SO
				t.shiftOut = true
			case 0x0f: // SI
				t.shiftOut = false
			}
		case modesEsc:
			t.state = modesText
			switch b {
			case '[':
				t.state, t.prefix, t.params, t.long = modesCSI, 0, t.params[:0], false
			case '(':
				t.state = modesCharset
			case '=':
				t.applicationKeys = true
			case '>':
				t.applicationKeys = false
			case 'c': // RIS: the terminal reset whole
				t.reset()
			}
		case modesCharset:
			t.state = modesText
			t.charset = b != 'B'
		case modesCSI:
			switch {
			case b >= '0' && b <= '9' || b == ';' || b == ':':
				if len(t.params) < maxModeParams {
					t.params = append(t.params, b)
				} else {
					t.long = true
				}
			case len(t.params) == 0 && t.prefix == 0 && (b == '?' || b == '>' || b == '<' || b == '='):
				t.prefix = b
			case b >= 0x40 && b <= 0x7e:
				t.state = modesText
				if !t.long {
					t.csi(b)
				}
			case b >= 0x20 && b <= 0x2f: // an intermediate: none tracked has one
				t.long = true
			default:
				t.state = modesText
			}
		}
	}
}

// alternate tells whether the program is on the alternate screen.
func (t *termModes) alternate() int {
	if t.set[1049] || t.set[1047] || t.set[47] {
		return 1
	}
	return 0
}

// csi records what the CSI sequence that final ends does.
func (t *termModes) csi(final byte) {
	params := bytes.Split(t.params, []byte(";"))
	first, err := strconv.Atoi(string(params[0]))
	if err != nil {
		first = 0 // absent: the default
	}
	switch int(t.prefix)<<8 | int(final) {
	case '?'<<8 | 'h':
		t.apply(true)
	case '?'<<8 | 'l':
		t.apply(false)
	case '>'<<8 | 'u':
		s := t.alternate()
		t.kittyPushed[s]++
		t.kittyFlags[s] = append(t.kittyFlags[s], first)
		if len(t.kittyFlags[s]) > maxKittyFlags {
			t.kittyFlags[s] = slices.Delete(t.kittyFlags[s], 0, 1)
		}
	case '<'<<8 | 'u':
		s := t.alternate()
		t.kittyPushed[s] = max(0, t.kittyPushed[s]-max(1, first))
		t.kittyFlags[s] = t.kittyFlags[s][:len(t.kittyFlags[s])-min(len(t.kittyFlags[s]), max(1, first))]
	case '='<<8 | 'u':
		s := t.alternate()
		if t.kittyPushed[s] == 0 {
			t.kittySet[s] = true
		}
		flags := &t.kittyBase[s]
		if n := len(t.kittyFlags[s]); n > 0 {
			flags = &t.kittyFlags[s][n-1]
		}
		mode := 1
		if len(params) > 1 {
			if m, err := strconv.Atoi(string(params[1])); err == nil {
				mode = m
			}
		}
		switch mode {
		case 1:
			*flags = first
		case 2:
			*flags |= first
		case 3:
			*flags &^= first
		}
	case '>'<<8 | 'm':
		if first == 4 {
			t.otherKeys = len(params) > 1 && string(params[1]) != "" && string(params[1]) != "0"
		}
	case 'm':
		t.sgr = len(t.params) > 0 && string(t.params) != "0"
	case 'r':
		t.scrollRegion = len(t.params) > 0
	}
	t.kittyEvents.Store(t.kittyNow()&2 != 0)
}

// maxKittyFlags bounds the kitty keyboard flags kept of a screen's stack,
// as a terminal bounds the stack (the oldest go first).
const maxKittyFlags = 64

// kittyNow is the kitty keyboard flags in effect on the screen in use.
func (t *termModes) kittyNow() int {
	s := t.alternate()
	if n := len(t.kittyFlags[s]); n > 0 {
		return t.kittyFlags[s][n-1]
	}
	return t.kittyBase[s]
}

// apply records the private modes of t.params as set (on) or reset.
func (t *termModes) apply(on bool) {
	start := 0
	for i := 0; i <= len(t.params); i++ {
		if i < len(t.params) && t.params[i] != ';' {
			continue
		}
		if m, err := strconv.Atoi(string(t.params[start:i])); err == nil && slices.Contains(restoreOrder, m) {
			if on == modeAtRest(m) {
				delete(t.set, m)
			} else {
				t.set[m] = on
			}
		}
		start = i + 1
	}
}

// reset forgets every change: the terminal was reset (RIS).
func (t *termModes) reset() {
	clear(t.set)
	t.kittyPushed, t.kittySet = [2]int{}, [2]bool{}
	t.kittyFlags, t.kittyBase = [2][]int{}, [2]int{}
	t.kittyEvents.Store(false)
	t.otherKeys, t.sgr, t.scrollRegion, t.charset, t.shiftOut, t.applicationKeys = false, false, false, false, false, false
}

// Restore writes what puts everything tracked that the output left away
// from rest back at rest: on the screen it ends on first, then on the main
// screen, once off the alternate one, its own keyboard flags.
func (t *termModes) Restore() {
	var out []byte
	kitty := func(s int) {
		if t.kittyPushed[s] > 0 {
			out = append(out, "\x1b[<"...)
			out = strconv.AppendInt(out, int64(t.kittyPushed[s]), 10)
			out = append(out, 'u')
		}
		if t.kittySet[s] {
			out = append(out, "\x1b[=0;1u"...)
		}
	}
	screen := t.alternate()
	kitty(screen)
	if t.otherKeys {
		out = append(out, "\x1b[>4m"...)
	}
	if t.scrollRegion {
		// Its reset moves the cursor home: the cursor is kept where it is.
		out = append(out, "\x1b7\x1b[r\x1b8"...)
	}
	if t.sgr {
		out = append(out, "\x1b[0m"...)
	}
	if t.charset {
		out = append(out, "\x1b(B"...)
	}
	if t.shiftOut {
		out = append(out, 0x0f)
	}
	if t.applicationKeys {
		out = append(out, "\x1b>"...)
	}
	for _, m := range restoreOrder {
		on, changed := t.set[m]
		if !changed {
			continue
		}
		out = append(out, "\x1b[?"...)
		out = strconv.AppendInt(out, int64(m), 10)
		if on {
			out = append(out, 'l')
		} else {
			out = append(out, 'h')
		}
	}
	if screen == 1 {
		kitty(0)
	}
	t.reset()
	if len(out) > 0 {
		_, _ = t.w.Write(out)
	}
}
