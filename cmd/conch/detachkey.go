package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
)

// detachScan finds the detach key (Ctrl-]) in the terminal's input as the
// terminal sends it: the byte detachKey, or, once the program turned on a
// keyboard mode that encodes Ctrl-] as an escape sequence, that sequence:
// the kitty keyboard protocol's "CSI 93 ; 5 u" (with its alternate keys,
// event type and text fields: "CSI 93:125 ; 5:1 u") and xterm's
// modifyOtherKeys "CSI 27 ; 5 ; 93 ~" (or "CSI 93 ; 5 u" with its
// formatOtherKeys). Its state carries a sequence over from one read to
// the next.
type detachScan struct {
	csiReader      // the CSI sequence so far, from its ESC; empty outside one
	kitty     bool // the detach key found was the kitty keyboard protocol's
	end       int  // where in the p scanned the detach key found ends
}

// maxKeySeq bounds the sequences detachScan reads: a key's is shorter.
const maxKeySeq = 48

// scan reads p on from the state the input before it left, and returns
// where in p the detach key starts (0 when it started in an earlier p)
// and true, or false when p holds none.
func (d *detachScan) scan(p []byte) (int, bool) {
	for i, b := range p {
		if b == detachKey {
			d.seq = d.seq[:0]
			d.end = i + 1
			return i, true
		}
		if seq := d.feed(b); seq != nil && isDetachSeq(seq) {
			d.kitty, d.end = seq[len(seq)-1] == 'u', i+1
			return max(0, i+1-len(seq)), true
		}
	}
	return 0, false
}

// csiReader gathers the CSI sequences of the terminal's input byte by
// byte: ESC, "[", parameters (digits, ";" and ":") and a final byte, at
// most maxKeySeq bytes; seq is the sequence under way, from its ESC.
type csiReader struct{ seq []byte }

// feed takes the input's next byte, and returns the sequence it ends, if
// it ends one: valid until the next feed.
func (c *csiReader) feed(b byte) []byte {
	switch {
	case b == 0x1b:
		c.seq = append(c.seq[:0], b)
	case len(c.seq) == 0:
	case len(c.seq) == 1:
		if b == '[' {
			c.seq = append(c.seq, b)
		} else {
			c.seq = c.seq[:0]
		}
	case b >= '0' && b <= '9' || b == ';' || b == ':':
		if len(c.seq) < maxKeySeq {
			c.seq = append(c.seq, b)
		} else {
			c.seq = c.seq[:0]
		}
	default:
		seq := append(c.seq, b)
		c.seq = c.seq[:0]
		return seq
	}
	return nil
}

// pending is how many bytes at the end of the input scanned so far begin a
// sequence that may yet be the detach key's.
func (d *detachScan) pending() int { return len(d.seq) }

// mayDetach tells whether the sequence under way may yet be the detach
// key's: ESC, "ESC [", or "ESC [" and the start of "93" (kitty) or "27"
// (modifyOtherKeys), and what may follow them.
func (d *detachScan) mayDetach() bool {
	if len(d.seq) < 3 {
		return len(d.seq) > 0
	}
	p := string(d.seq[2:])
	for _, key := range []string{"93", "27"} {
		if strings.HasPrefix(key, p) || strings.HasPrefix(p, key+";") || key == "93" && strings.HasPrefix(p, key+":") {
			return true
		}
	}
	return false
}

// reset forgets a sequence under way.
func (d *detachScan) reset() { d.seq = d.seq[:0] }

// isDetachSeq tells whether seq, "ESC [" parameters and a final byte, is
// Ctrl-] pressed.
func isDetachSeq(seq []byte) bool {
	event, mods, ok := bracketKeyEvent(seq)
	return ok && mods == ctrlMod && (event == "" || event == "1") // pressed
}

// isDetachRelease tells whether seq, as isDetachSeq takes it, is the kitty
// keyboard protocol's report of Ctrl-] let go (event type 3): the key "]"
// let go with Ctrl held, or after Ctrl was (no modifiers then).
func isDetachRelease(seq []byte) bool {
	event, mods, ok := bracketKeyEvent(seq)
	return ok && event == "3" && (mods == ctrlMod || mods == 0)
}

// ctrlMod is Ctrl alone among the modifiers bracketKeyEvent tells.
const ctrlMod = 4

// bracketKeyEvent tells whether seq is an event of the key "]" (93) as the
// kitty keyboard protocol or modifyOtherKeys sends it, with its modifiers
// (Shift 1, Alt 2, Ctrl 4, ...; Caps Lock and Num Lock left out) and the
// kitty protocol's event type ("" when it says none).
func bracketKeyEvent(seq []byte) (event string, mods int, ok bool) {
	final := seq[len(seq)-1]
	fields := bytes.Split(seq[2:len(seq)-1], []byte(";"))
	switch {
	case final == 'u' && len(fields) >= 2 && len(fields) <= 3:
		// key[:shifted[:base]] ; modifiers[:event] [; text]
		key := bytes.Split(fields[0], []byte(":"))
		m := bytes.Split(fields[1], []byte(":"))
		mods, ok = modifiers(m[0])
		if string(key[0]) != "93" || len(m) > 2 || !ok {
			return "", 0, false
		}
		if len(m) == 2 {
			event = string(m[1])
		}
		return event, mods, true
	case final == '~' && len(fields) == 3 && string(fields[0]) == "27" && string(fields[2]) == "93":
		mods, ok = modifiers(fields[1])
		return "", mods, ok
	}
	return "", 0, false
}

// releaseScan finds the kitty keyboard protocol's report of Ctrl-] let go
// in input read piece by piece.
type releaseScan struct{ csiReader }

// scan reads p on, and tells whether the release came in it.
func (r *releaseScan) scan(p []byte) bool {
	for _, b := range p {
		if seq := r.feed(b); seq != nil && isDetachRelease(seq) {
			return true
		}
	}
	return false
}

// awaitRelease reads in until the kitty keyboard protocol reports Ctrl-]
// let go, after the press that detached and after (the input read with
// it), and drops what it reads: once the detach key was pressed, what
// comes after it is not the program's, and while the flags that the
// program turned on are still the terminal's, the shell after conch could
// not read it either (nor should a program conch attaches to next get
// the release of a key it never saw pressed). It returns at the release,
// or when in ends.
func awaitRelease(in io.Reader, after []byte) {
	var r releaseScan
	if r.scan(after) {
		return
	}
	buf := make([]byte, 1024)
	for {
		n, err := in.Read(buf)
		if r.scan(buf[:n]) || err != nil {
			return
		}
	}
}

// modifiers reads a key's modifiers field (1 plus a bit for each
// modifier): its bits, the lock keys (Caps Lock, Num Lock) left out.
func modifiers(field []byte) (int, bool) {
	m, err := strconv.Atoi(string(field))
	if err != nil || m < 1 {
		return 0, false
	}
	return (m - 1) &^ (64 | 128), true
}
