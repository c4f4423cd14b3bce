package rawcall

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// conn is a connection whose reads and writes are made raw, waiting in the
// runtime's poller only when the socket would block. Through net.Conn,
// every request's read and every answer's write marks its goroutine as in
// a system call, and the first such call after the process was idle — as
// a daemon is while a command runs, and its client while it waits for the
// answer — wakes the Go runtime's monitor thread, which then polls until
// the process is idle again.
type conn struct {
	net.Conn
	sc  syscall.Conn
	rmu sync.Mutex // a hijacked connection may be read and written from
	wmu sync.Mutex // more than one goroutine: Reader and Writer are not safe so
	r   *Reader
	w   *Writer
}

// ConnOf returns c with raw reads and writes when it is a TCP or Unix
// connection, else c itself. Deadlines, Close and the rest are c's own.
func ConnOf(c net.Conn) net.Conn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	sc := c.(syscall.Conn)
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &conn{Conn: c, sc: sc, r: NewReader(rc), w: NewWriter(rc)}
}

func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	n, err := c.r.Read(p)
	c.rmu.Unlock()
	if err != nil {
		err = c.opError("read", err)
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
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
func (c *conn) opError(op string, err error) error {
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

// CloseWrite half-closes a TCP or Unix connection.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn is the connection's own.
func (c *conn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// Peek reports, without waiting, how many bytes c holds to be read (at most
// one is looked at): 1, 0 at its end, or an error (EAGAIN: nothing yet). It
// reads nothing. One raw call.
func Peek(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, syscall.EAGAIN
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		b [1]byte
		n uintptr
		e syscall.Errno
	)
	if cerr := rc.Read(func(fd uintptr) bool {
		n, _, e = syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		return true
	}); cerr != nil {
		return 0, cerr
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
