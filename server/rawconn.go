package server

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/rawcall"
)

// rawConn is a connection whose reads and writes are made raw (see package
// rawcall), waiting in the runtime's poller only when the socket would
// block. Through net.Conn, every request's read and every answer's write
// marks its goroutine as in a system call, and the first such call after
// the daemon was idle — as it is while a command runs — wakes the Go
// runtime's monitor thread, which then polls until the daemon is idle
// again: a session's true over HTTP from another process cost the daemon
// 420-570 µs of CPU a request, a fifth of it in that thread, and 250-320
// µs raw.
type rawConn struct {
	net.Conn
	rmu sync.Mutex // a hijacked connection may be read and written from
	wmu sync.Mutex // more than one goroutine: rawcall's are not safe so
	r   *rawcall.Reader
	w   *rawcall.Writer
}

// rawConnOf returns c with raw reads and writes when it is a TCP or Unix
// connection, else c itself.
func rawConnOf(c net.Conn) net.Conn {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return c
	}
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawConn{Conn: c, r: rawcall.NewReader(rc), w: rawcall.NewWriter(rc)}
}

func (c *rawConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	n, err := c.r.Read(p)
	c.rmu.Unlock()
	if err != nil {
		err = c.opError("read", err)
	}
	return n, err
}

func (c *rawConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	n, err := c.w.Write(p)
	c.wmu.Unlock()
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// opError gives err the form net.Conn's own errors have, which net/http
// looks at (a read error of Op "read" ends a connection quietly): the
// poller's (a deadline, a closed connection) come wrapped with Op
// "raw-read" or "raw-write", the calls' own as bare errnos.
func (c *rawConn) opError(op string, err error) error {
	if err == io.EOF {
		return err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// CloseWrite half-closes a TCP connection (see jsonErrorConn.CloseWrite).
func (c *rawConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection c makes raw.
func (c *rawConn) NetConn() net.Conn { return c.Conn }

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
