package server

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// discardConn is a connection whose writes go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// TestAnswerPassesUncopied: the writes of an ordinary answer, which begin
// as net/http's own errors do, go through the connection as they are,
// without a copy made to look for an error's headers.
func TestAnswerPassesUncopied(t *testing.T) {
	c := &jsonErrorConn{Conn: discardConn{}}
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 01:00:00 GMT\r\nContent-Length: 2\r\n\r\n{}")
	allocs := testing.AllocsPerRun(100, func() {
		n, err := c.Write(answer)
		if err != nil || n != len(answer) {
			t.Fatal(n, err)
		}
	})
	require.Zero(t, allocs)
}
