package main

import (
	"io"
	"slices"
	"strconv"
)

// termModes passes a program's output on to the terminal that shows it,
// and keeps track of the terminal modes the program turned on that leave
// the terminal unusable to the shell that runs conch: the alternate screen,
// a hidden cursor, mouse reports, focus reports, bracketed paste,
// application cursor keys. conch attach puts them back (Restore) when it
// detaches, or the program ends without doing so itself, as the program
// does when it ends well: else a shell met a blank alternate screen with
// no cursor that printed escape sequences at each click.
type termModes struct {
	w      io.Writer
	state  int    // where in an escape sequence the output is
	params []byte // a private CSI's parameters so far
	set    map[int]bool
}

// The states of termModes' scan: plain text, after ESC, after "ESC [",
// after "ESC [ ?".
const (
	modesText = iota
	modesEsc
	modesCSI
	modesPrivate
)

// restoreOrder lists the modes termModes tracks, in the order Restore puts
// them back: the alternate screens last, so that the resets before them
// reach the screen the shell returns to.
var restoreOrder = []int{1000, 1002, 1003, 1005, 1006, 1015, 1004, 2004, 1, 25, 1049, 1047, 47}

// modeAtRest is each tracked mode's state at rest: only the cursor's
// visibility (25) is on.
func modeAtRest(m int) bool { return m == 25 }

func newTermModes(w io.Writer) *termModes { return &termModes{w: w, set: map[int]bool{}} }

func (t *termModes) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.scan(p[:n])
	return n, err
}

// scan follows p's private mode sequences (ESC [ ? Pm h or l).
func (t *termModes) scan(p []byte) {
	for _, b := range p {
		switch t.state {
		case modesText:
			if b == 0x1b {
				t.state = modesEsc
			}
		case modesEsc:
			t.state = modesText
			if b == '[' {
				t.state = modesCSI
			} else if b == 0x1b {
				t.state = modesEsc
			}
		case modesCSI:
			t.state = modesText
			if b == '?' {
				t.state, t.params = modesPrivate, t.params[:0]
			} else if b == 0x1b {
				t.state = modesEsc
			}
		case modesPrivate:
			switch {
			case b >= '0' && b <= '9' || b == ';':
				if len(t.params) < 64 {
					t.params = append(t.params, b)
				}
			case b == 'h' || b == 'l':
				t.apply(b == 'h')
				t.state = modesText
			case b == 0x1b:
				t.state = modesEsc
			default:
				t.state = modesText
			}
		}
	}
}

// apply records the modes of t.params as set (on) or reset.
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

// Restore writes what puts every tracked mode the output left away from
// rest back at rest.
func (t *termModes) Restore() {
	var out []byte
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
	clear(t.set)
	if len(out) > 0 {
		_, _ = t.w.Write(out)
	}
}
