package server

import (
	"bytes"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hungUp reports whether c's peer is known to be gone, without reading c:
// it closed or reset the connection, or the connection failed — TCP
// keepalive, which net.Listen's connections have, fails one whose peer
// vanished. The poll takes what is already known and does not wait. A
// connection whose socket it cannot reach (through NetConn methods) is not
// known to be gone.
func hungUp(c net.Conn) bool {
	for {
		switch u := c.(type) {
		case syscall.Conn:
			rc, err := u.SyscallConn()
			if err != nil {
				return false
			}
			var revents int16
			cerr := rc.Control(func(fd uintptr) {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
				if n, err := unix.Poll(fds, 0); err == nil && n == 1 {
					revents = fds[0].Revents
				}
			})
			// Control fails once the connection is closed: gone.
			return cerr != nil || revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
		case interface{ NetConn() net.Conn }:
			c = u.NetConn()
		default:
			return false
		}
	}
}

// outflow reports, for c's TCP socket, how many bytes written to it its
// peer has acknowledged in all, and how many it has not yet (sent or still
// queued): what a client took of what the daemon wrote, and what waits for
// it. ok is false when c's socket cannot be reached or is no TCP socket.
func outflow(c net.Conn) (acked int64, unacked int, ok bool) {
	for {
		switch u := c.(type) {
		case syscall.Conn:
			rc, err := u.SyscallConn()
			if err != nil {
				return 0, 0, false
			}
			cerr := rc.Control(func(fd uintptr) {
				info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
				if err != nil {
					return
				}
				if unacked, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err != nil {
					return
				}
				acked, ok = int64(info.Bytes_acked), true
			})
			return acked, unacked, cerr == nil && ok
		case interface{ NetConn() net.Conn }:
			c = u.NetConn()
		default:
			return 0, 0, false
		}
	}
}

// requestWaiting reports whether the bytes c's socket has received and
// not yet given to a read, peeked at without waiting, hold the end of a
// request's headers within their first len(buf): a whole request waits to
// be read. Not when c's socket cannot be reached.
func requestWaiting(c syscall.Conn, buf []byte) bool {
	return bytes.Contains(unread(c, buf), headersEnd)
}

// unread returns the first len(buf) bytes at most that c's socket has
// received and not yet given to a read, peeked at without waiting, in
// buf; none when it holds none, or cannot be reached.
func unread(c syscall.Conn, buf []byte) []byte {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	n := 0
	if rc.Control(func(fd uintptr) {
		n, _, err = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	}) != nil || err != nil {
		return nil
	}
	return buf[:n]
}

// connWaiting waits up to d for a connection to wait on ln to be
// accepted, and says whether one does; none when ln's socket cannot be
// reached. It fails once ln is closed. A listener's socket cannot be
// waited on in the runtime's poller without an accept, so it is polled
// here, which its close waits for.
func connWaiting(ln net.Listener, d time.Duration) (bool, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, err
	}
	waiting := false
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		waiting = err == nil && n > 0
	}); err != nil {
		return false, err
	}
	return waiting, nil
}
