// Package unreadconn dials the connection of a client that reads nothing,
// for the tests of what a server does with one, and looks at the server's
// end of it (its state, what it has queued to send) as the kernel shows it.
package unreadconn

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
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

// Established is the state /proc/net/tcp gives an established socket.
const Established = "01"

// ServerEnd returns the state and send queue, as /proc/net/tcp shows them,
// of the server's end of c, an IPv4 connection this process dialed, and
// whether there is one: once the server closes its end, with what it sent
// still unread, its state is no longer Established, which the client
// cannot see without reading all of it.
func ServerEnd(c net.Conn) (state string, sendQueue int, found bool, err error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", 0, false, err
	}
	hexAddr := func(a net.Addr) (string, error) {
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return "", err
		}
		ip := ap.Addr().Unmap().As4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port()), nil
	}
	l, err := hexAddr(c.RemoteAddr())
	if err != nil {
		return "", 0, false, err
	}
	r, err := hexAddr(c.LocalAddr())
	if err != nil {
		return "", 0, false, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) > 4 && f[1] == l && f[2] == r {
			tx, _, _ := strings.Cut(f[4], ":")
			n, err := strconv.ParseUint(tx, 16, 32)
			if err != nil {
				return "", 0, false, fmt.Errorf("/proc/net/tcp: %q: %w", line, err)
			}
			return f[3], int(n), true, nil
		}
	}
	return "", 0, false, nil
}
