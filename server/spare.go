package server

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// spareFD is a descriptor a listener holds in reserve (/dev/null, open),
// to let go of when an accept fails for want of one (EMFILE, ENFILE), so
// that the connection waiting is accepted in its place. Sessions,
// processes and the streams their background jobs hold can take every
// descriptor the daemon may open; a client then connected and waited in
// the kernel's accept queue, never answered, even to delete the sessions
// that held them, and /healthz never answered the probes.
type spareFD struct {
	mu     sync.Mutex
	fd     int  // -1 when not held
	closed bool // its listener is closed: held no more
}

// newSpareFD returns a spare, held when a descriptor can be had now.
func newSpareFD() *spareFD {
	s := &spareFD{fd: -1}
	s.take()
	return s
}

// take holds the spare again, when it is not held and a descriptor can
// be had.
func (s *spareFD) take() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 || s.closed {
		return
	}
	if fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		s.fd = fd
	}
}

// held reports whether the spare is held.
func (s *spareFD) held() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd >= 0
}

// release closes the spare, if held, and says whether it was.
func (s *spareFD) release() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return false
	}
	_ = unix.Close(s.fd)
	s.fd = -1
	return true
}

// close lets the spare go for good, as its listener closes.
func (s *spareFD) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true // no take holds it again
	s.mu.Unlock()
	s.release()
}
