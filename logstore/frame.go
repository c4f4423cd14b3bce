package logstore

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/api"
)

// Channel names the stream a frame came from.
type Channel uint8

// The channels.
const (
	Stdout Channel = iota + 1
	Stderr
	PTY
)

func (c Channel) String() string {
	switch c {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case PTY:
		return "pty"
	}
	return "channel(" + strconv.Itoa(int(c)) + ")"
}

// valid reports whether c is one of the channels above.
func (c Channel) valid() bool { return c >= Stdout && c <= PTY }

// KeepLogs is a retention policy for a process's frames.
type KeepLogs = api.KeepLogs

// The keep-logs policies. The zero value means KeepUntilCleanup. A Log only
// records the policy and, for KeepNone, keeps nothing for pages: removing a
// record after exit (KeepOnExitTTL) is the job of whoever owns the record.
const (
	KeepUntilCleanup = api.KeepUntilCleanup // until the process is deleted
	KeepOnExitTTL    = api.KeepOnExitTTL    // until a configured time after exit
	KeepNone         = api.KeepNone         // no frames kept; live followers still get them
)

// ParseKeepLogs parses a policy name; "" is KeepUntilCleanup.
func ParseKeepLogs(s string) (KeepLogs, error) {
	switch k := KeepLogs(s); k {
	case "":
		return KeepUntilCleanup, nil
	case KeepUntilCleanup, KeepOnExitTTL, KeepNone:
		return k, nil
	}
	return "", fmt.Errorf("unknown keepLogs %q", s)
}

// Cursor identifies a frame; cursors strictly increase within a Log, by one
// per frame. The zero Cursor is before the first frame. On the wire it is an
// opaque string.
type Cursor uint64

func (c Cursor) String() string { return strconv.FormatUint(uint64(c), 10) }

// ParseCursor parses a cursor's string form; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad cursor %q", s)
	}
	return Cursor(n), nil
}

// Frame is one piece of output. A frame never splits a valid UTF-8 sequence
// of its channel's bytes, so a channel whose output is valid UTF-8 has only
// text frames.
type Frame struct {
	Cursor  Cursor
	Channel Channel
	Data    []byte    // never modified after it is appended; do not modify it
	Time    time.Time // when the bytes arrived; never earlier than the frame before
}

// IsText reports whether the frame's bytes are valid UTF-8. On the wire a
// text frame has encoding "text", any other "base64".
func (f Frame) IsText() bool { return utf8.Valid(f.Data) }

// BytesPerFrame bounds the frames a log keeps: at most one per BytesPerFrame
// bytes of retention, rounded down to a power of two (and at least
// minFrames), so that a flood of tiny frames that readers saw one by one, and
// could not be merged, keeps the memory of their bookkeeping (a frame table
// of 64 bytes a slot, as many slots as the cap at most) within half the
// retention. Retention itself counts output bytes only; a [Budget] counts
// the frame tables too.
const BytesPerFrame = 128

// MaxFrame bounds the bytes of one frame, so that a huge write becomes several
// frames that retention can drop one by one.
const MaxFrame = 64 << 10
