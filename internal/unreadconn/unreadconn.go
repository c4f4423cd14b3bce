// Package unreadconn dials the connection of a client that reads nothing,
// for the tests of what a server does with one.
package unreadconn

import (
	"context"
	"net"
	"syscall"
)

// Dial connects to the TCP address addr with a receive buffer of 4 KiB
// asked for, the kernel's least, so that it does not take megabytes of an
// answer on behalf of a client that reads none of it: the server's writes
// then block, as they would for a slow or stuck client far away.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return d.DialContext(ctx, "tcp", addr)
}
