package sentinel

import "bytes"

// Late drops, from the start of a stream, the end marker that the stream's
// last user wrote after it was done with it.
//
// A command that prints an imitation of its stdout marker (its nonce is in
// the frame's guard variable while it runs) is ended there, while its shell
// runs it on; once it is over, the shell's end line writes the real marker
// to the same stream — which, nothing holding it open in between, may have
// gone back to the session's pool and serve a later command by then. The
// shell runs that end line before any later command, so such a marker can
// only come before every byte of the stream's next user.
type Late struct {
	marker  []byte
	matched int // bytes of marker matched so far
	on      bool
}

// Reset makes l look for the marker of the command with nonce n, or for
// none when n is "".
func (l *Late) Reset(n Nonce) {
	l.matched, l.on = 0, n != ""
	if l.on {
		l.marker = append(append(l.marker[:0], markerPrefix...), n...)
	}
}

// On reports whether l still looks at the stream's bytes: it stops at the
// first byte that is not the marker's, or at the NUL that ends the
// marker's trailer.
func (l *Late) On() bool { return l.on }

// Skip takes the stream's next bytes and returns what of them is the
// stream's own: held, bytes taken before that only seemed to begin the
// marker (valid until the next Reset), then rest, a part of p.
func (l *Late) Skip(p []byte) (held, rest []byte) {
	for l.on && len(p) > 0 {
		if l.matched < len(l.marker) {
			k := min(len(l.marker)-l.matched, len(p))
			if !bytes.Equal(p[:k], l.marker[l.matched:l.matched+k]) {
				l.on = false
				return l.marker[:l.matched], p
			}
			l.matched += k
			p = p[k:]
			continue
		}
		// The trailer, up to its NUL: a status, flags and a directory,
		// however long (a directory can pass MaxCwd, and the shell's end
		// line writes it whole before anything of the stream's next user).
		// Cut at maxTrailer, the rest of a long directory was passed on as
		// the next user's output.
		if i := bytes.IndexByte(p, 0); i >= 0 {
			l.on = false
			return nil, p[i+1:]
		}
		return nil, nil
	}
	return nil, p
}

// Release ends l's look and returns the bytes it took that only seemed to
// begin the marker (valid until the next Reset): at the end of what the
// stream gives its user, nothing can follow to show them the user's own, as
// a byte that is not the marker's would.
func (l *Late) Release() []byte {
	if !l.on || l.matched >= len(l.marker) {
		l.on = false
		return nil
	}
	l.on = false
	return l.marker[:l.matched]
}
