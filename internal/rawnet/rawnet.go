// Package rawnet makes a connection's reads and writes raw (see package
// rawcall): the daemon's connections, and the Go client's.
package rawnet

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/conchsh/conch/internal/rawcall"
)

// Conn is a connection whose reads and writes are made raw (see package
// rawcall), waiting in the runtime's poller only when the socket would
// block. Through net.Conn, every request's read and every answer's write
// marks its goroutine as in a system call, and the first such call after
// the daemon was idle — as it is while a command runs — wakes the Go
// runtime's monitor thread, which then polls until the daemon is idle
// again: a session's true over HTTP from another process cost the daemon
// 420-570 µs of CPU a request, a fifth of it in that thread, and 250-320
// µs raw.
type Conn struct {
	net.Conn
	rmu sync.Mutex // a hijacked connection may be read and written from
	wmu sync.Mutex // more than one goroutine: rawcall's are not safe so
	r   *rawcall.Reader
	w   *rawcall.Writer
}

// Of returns c with raw reads and writes when it is a TCP or Unix
// connection, else c itself.
func Of(c net.Conn) net.Conn {
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
	return &Conn{Conn: c, r: rawcall.NewReader(rc), w: rawcall.NewWriter(rc)}
}

func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	n, err := c.r.Read(p)
	c.rmu.Unlock()
	if err != nil {
		err = c.opError("read", err)
	}
	return n, err
}

// ReadSeen reads as Read does, and calls seen with what it read, under mu
// (see rawcall.Reader.ReadSeen).
func (c *Conn) ReadSeen(p []byte, mu sync.Locker, seen func([]byte)) (int, error) {
	c.rmu.Lock()
	n, err := c.r.ReadSeen(p, mu, seen)
	c.rmu.Unlock()
	if err != nil {
		err = c.opError("read", err)
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
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
func (c *Conn) opError(op string, err error) error {
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

// CloseWrite half-closes a TCP connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection c makes raw.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SyscallConn returns the raw connection under c, as the connection's own
// does (Of makes Conns of TCP and Unix connections only, which have one).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
