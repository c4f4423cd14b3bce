package sentinel

import (
	"bytes"
	"errors"
)

// markerPrefix is what Nonce.Marker puts before the nonce.
const markerPrefix = "\x1eCONCH"

// MaxCwd bounds the working directory an End reports, in bytes. A path can
// be longer (one past PATH_MAX is opened one name at a time), as long as a
// command makes it: the engine keeps none that is, and says so (see
// End.CwdTooLong).
const MaxCwd = 64 << 10

// CwdTooLong is what the engine says of a command or cell whose working
// directory's path is longer than MaxCwd, whose cwd it leaves out.
const CwdTooLong = "the working directory's path is longer than 65,536 bytes, more than the engine reports: cwd is left out until a command changes to a directory whose path is shorter"

// maxHead bounds what comes before the directory in a trailer: the status
// (at most 12 bytes), the shell's flags (a few dozen letters) and the
// spaces between.
const maxHead = 1 << 10

// maxTrailer bounds what follows a stdout marker (status, flags, directory)
// that a Scanner keeps: past it, the directory is too long to report.
const maxTrailer = maxHead + MaxCwd

// errBadTrailer says that what follows a marker is not an exit status, the
// shell's flags and a directory.
var errBadTrailer = errors.New("malformed end marker")

// End is what a command's stdout end marker reports.
type End struct {
	Status int
	// Flags are the shell's option letters ($-) after the command.
	Flags string
	Cwd   string
	// CwdTooLong says that the directory was longer than MaxCwd (or the
	// trailer longer than maxTrailer): Cwd is then empty, and Status and
	// Flags are what the end line wrote.
	CwdTooLong bool
	// Unreadable says that what followed the marker is not what an end
	// line writes: Status, Flags and Cwd are then zero, and StatusText
	// holds the first bytes of what stood where the status should, for a
	// message (see Scanner.Write).
	Unreadable bool
	StatusText string
}

// maxStatusText bounds End.StatusText.
const maxStatusText = 16

// ParseStatus reads an exit status as the end line writes it: the decimal
// digits of $? between underscores (see statusLead). Anything else is a
// status the shell's variable could not keep, because an earlier command
// changed how it reads (typeset -L1 keeps "_", -R2 "7_", an integer base
// "16#0"); bare digits are refused too, as they may be what is left of a
// longer status.
func ParseStatus(b []byte) (int, bool) {
	if len(b) < 3 || len(b) > 12 || b[0] != '_' || b[len(b)-1] != '_' {
		return 0, false // at most 10 digits: no status has more
	}
	st := 0
	for _, c := range b[1 : len(b)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		st = st*10 + int(c-'0')
	}
	return st, true
}

// Scanner splits one output stream of a command at its end marker: a shell
// command's stdout (its stderr has none: see EndLine), or either stream of a
// code cell. Bytes before the marker go to Out; the marker (and, on stdout,
// its trailer) is consumed; bytes after it are discarded, since they come
// from background jobs that outlived the command. Each byte is examined once: bytes that might
// begin a marker are held back only until the next write shows they do not.
type Scanner struct {
	// Out receives the command's own bytes. The slice is only valid during the call.
	Out func([]byte)
	// Trailer is true for stdout, whose marker is followed by
	// "STATUS FLAGS CWD\0".
	Trailer bool

	marker  []byte
	held    []byte // a suffix of the input that is a proper prefix of marker
	trailer []byte // bytes of the trailer read so far
	state   scanState
	end     End

	// The flags and working directory of the last end read, which the next
	// one most often repeats: kept across Reset, so that End shares them
	// rather than copying them anew.
	lastFlags, lastCwd string
}

type scanState uint8

const (
	scanning scanState = iota
	inTrailer
	done
)

// NewScanner returns a Scanner for the stream of the command with nonce n.
func NewScanner(n Nonce, trailer bool, out func([]byte)) *Scanner {
	return &Scanner{Out: out, Trailer: trailer, marker: n.Marker()}
}

// Reset makes s a Scanner for the stream of the command with nonce n, as
// NewScanner does, keeping the room it has: a stream's scanner serves each
// command that uses the stream.
func (s *Scanner) Reset(n Nonce, trailer bool, out func([]byte)) {
	s.Out, s.Trailer = out, trailer
	s.marker = append(append(s.marker[:0], markerPrefix...), n...) // n.Marker(), in the room s has
	s.held, s.trailer = s.held[:0], s.trailer[:0]
	s.state, s.end = scanning, End{}
}

// Done reports whether the end marker (with its trailer) has been read.
func (s *Scanner) Done() bool { return s.state == done }

// End returns what the stdout marker reported; valid once Done.
func (s *Scanner) End() End { return s.end }

// Write feeds the next bytes of the stream. It never fails, and always
// consumes all of p. A trailer whose directory passes MaxCwd is read up to
// the bound, and its End reports the status and flags without the
// directory (End.CwdTooLong). A marker whose trailer is not what an end
// line writes (see ParseStatus) ends the stream all the same, with an End
// that says it could not be read: it carries the command's
// nonce, which only the engine's end line and the command itself know (the
// frame's guard variable holds it while the command runs), so it is never
// output. Passed through, the shell's own marker reached the command's
// output, nonce and all, when its status could not be read, and the
// command ended only when the engine found the shell idle.
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		switch s.state {
		case done:
			return n, nil
		case inTrailer:
			i := bytes.IndexByte(p, 0)
			end := i
			if i < 0 {
				end = len(p)
			}
			room := maxTrailer - len(s.trailer)
			if end <= room && i < 0 {
				s.trailer = append(s.trailer, p...)
				return n, nil
			}
			// The trailer ends at its NUL, or at the bound: what passes it
			// is a directory too long to keep, whose rest is dropped with
			// what follows the marker.
			s.trailer = append(s.trailer, p[:min(end, room)]...)
			if s.parseTrailer(end > room) != nil {
				s.unreadable()
			}
			s.trailer, s.state = s.trailer[:0], done
			return n, nil
		case scanning:
			p = s.scan(p)
		}
	}
	return n, nil
}

// unreadable sets End to say that the trailer read is not an end line's.
func (s *Scanner) unreadable() {
	status, _, _ := bytes.Cut(s.trailer, []byte{' '})
	s.end = End{Unreadable: true, StatusText: string(status[:min(len(status), maxStatusText)])}
}

// scan looks for the marker in held+p, emits what cannot be part of it, and
// returns the bytes after the marker when it is found.
func (s *Scanner) scan(p []byte) []byte {
	if len(s.held) > 0 {
		// Does the held prefix continue into p?
		need := len(s.marker) - len(s.held)
		k := min(need, len(p))
		if bytes.Equal(p[:k], s.marker[len(s.held):len(s.held)+k]) {
			if k == need {
				s.held = s.held[:0]
				return s.found(p[k:])
			}
			s.held = append(s.held, p...)
			return nil
		}
		// Not a marker: the held bytes are output. The marker's lead byte
		// appears only at its start, so no later held byte can begin one.
		s.Out(s.held)
		s.held = s.held[:0]
	}
	for off := 0; ; {
		i := bytes.IndexByte(p[off:], MarkerLead)
		if i < 0 {
			s.emit(p)
			return nil
		}
		i += off
		rest := p[i:]
		if len(rest) >= len(s.marker) {
			if bytes.Equal(rest[:len(s.marker)], s.marker) {
				s.emit(p[:i])
				return s.found(rest[len(s.marker):])
			}
			off = i + 1
			continue
		}
		if bytes.Equal(rest, s.marker[:len(rest)]) {
			s.emit(p[:i])
			s.held = append(s.held[:0], rest...)
			return nil
		}
		off = i + 1
	}
}

func (s *Scanner) emit(p []byte) {
	if len(p) > 0 {
		s.Out(p)
	}
}

// found moves past the marker, to its trailer when it has one.
func (s *Scanner) found(rest []byte) []byte {
	if s.Trailer {
		s.state = inTrailer
		return rest
	}
	s.state = done
	return nil
}

// parseTrailer sets End from the trailer read, cut at maxTrailer when cut
// is true; what End keeps of it is copied. A directory longer than MaxCwd,
// or cut, is left out (End.CwdTooLong): the status and flags before it are
// reported all the same.
func (s *Scanner) parseTrailer(cut bool) error {
	status, rest, ok := bytes.Cut(s.trailer, []byte{' '})
	if !ok {
		return errBadTrailer
	}
	flags, cwd, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return errBadTrailer
	}
	st, ok := ParseStatus(status)
	if !ok {
		return errBadTrailer
	}
	s.lastFlags = reuse(s.lastFlags, flags)
	if cut || len(cwd) > MaxCwd {
		s.end = End{Status: st, Flags: s.lastFlags, CwdTooLong: true}
		return nil
	}
	s.lastCwd = reuse(s.lastCwd, cwd)
	s.end = End{Status: st, Flags: s.lastFlags, Cwd: s.lastCwd}
	return nil
}

// reuse returns last when it holds b, else a copy of b.
func reuse(last string, b []byte) string {
	if last == string(b) {
		return last
	}
	return string(b)
}

// Flush emits bytes held back as a possible marker start; call it when the
// stream ends without a marker.
func (s *Scanner) Flush() {
	if s.state == scanning && len(s.held) > 0 {
		s.Out(s.held)
		s.held = nil
	}
}
