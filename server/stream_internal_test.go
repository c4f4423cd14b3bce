package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/logstore"
)

// TestEventWriterAsWriteEvent: a stream writes a frame's event a piece at a
// time, and every byte as writeEvent writes its api.LogFrame, text and
// base64 alike, escapes cut across pieces included.
func TestEventWriterAsWriteEvent(t *testing.T) {
	long := strings.Repeat("a<b>&c\"d\\e\x01\t\n\r\b\f\u2028\u2029é€😀\x7f", 3000)
	cases := []string{
		"", "x", "hello\n", long, long[:eventPiece-1], long[:logstore.MaxFrame],
		strings.Repeat("\x00", logstore.MaxFrame), strings.Repeat("é", eventPiece),
		"bad \xff utf-8", string([]byte{0xe2, 0x80}),
	}
	for _, data := range cases {
		for _, ch := range []logstore.Channel{logstore.Stdout, logstore.Stderr} {
			for _, b64 := range []bool{false, true} {
				f := &logstore.Frame{Cursor: 1234, Channel: ch, Time: time.UnixMilli(1700000000123), Data: []byte(data)}
				var want, got bytes.Buffer
				require.NoError(t, writeEvent(&want, api.EventLog, f.Cursor.String(), frameDTO(f, b64)))
				e := eventWriter{w: &got, buf: make([]byte, 0, eventPiece)}
				require.NoError(t, e.frame(f, b64))
				require.True(t, bytes.Equal(want.Bytes(), got.Bytes()), "the event of %d bytes (base64 %v) differs from writeEvent's", len(data), b64)
				require.LessOrEqual(t, cap(e.buf), eventPiece, "the pieces grew")
			}
		}
	}
}
