package shellsession

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/sentinel"
)

// readStreams reads the command's stdout and stderr into its log until their
// end markers, then discards what background jobs write until they close
// them.
//
// One goroutine reads both, in the order they became readable: an epoll set
// of the two FIFOs, itself waited on through Go's poller, says which has
// data first. Two goroutines, one per FIFO, are woken together when both
// have data and run in an order of the runtime's, which put a command's
// stderr before the stdout it wrote first most of the time.
func (c *Command) readStreams(out, errs *stream) {
	s := c.s
	defer s.wg.Done()
	rs := [2]*streamReader{c.newStreamReader(out, logstore.Stdout, true), c.newStreamReader(errs, logstore.Stderr, false)}
	live := 0
	for _, r := range rs {
		if r != nil {
			live++
		}
	}
	if live == 0 {
		return
	}
	ep, err := s.takeEpoller()
	if err == nil {
		err = s.watch(ep, rs)
	}
	if err != nil {
		for _, r := range rs {
			if r != nil {
				r.end(err)
			}
		}
		return
	}
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	for live > 0 {
		evs, err := ep.wait()
		if err != nil { // the session ended: its release closed the set
			for i, r := range rs {
				if r != nil {
					r.end(err)
					rs[i] = nil
				}
			}
			s.h.DropDrain(ep.f)
			return
		}
		for _, ev := range evs {
			i := ev.Fd
			// Until the stream is empty: the set reports a stream again
			// only when more comes.
			for r := rs[i]; r != nil; {
				n, err := r.read(buf)
				if (n > 0 && r.take(buf[:n])) || (err != nil && r.end(err)) {
					rs[i] = nil
					live--
					break
				}
				if n < len(buf) {
					break
				}
			}
		}
	}
	s.h.DropDrain(ep.f)
	s.putEpoller(ep) // empty now: every stream left it
}

// watch puts the streams of rs in ep, and ep among the session's drains,
// which the session's end closes; or closes ep.
func (s *Session) watch(ep *epoller, rs [2]*streamReader) error {
	if !s.h.AddDrain(ep.f) {
		ep.close()
		return os.ErrClosed
	}
	for i, r := range rs {
		if r == nil {
			continue
		}
		r.ep = ep
		if err := ep.add(r.rc, int32(i)); err != nil {
			s.h.DropDrain(ep.f)
			ep.close()
			return err
		}
	}
	return nil
}

// takeEpoller returns the epoll set the last command left, or a new one.
func (s *Session) takeEpoller() (*epoller, error) {
	s.mu.Lock()
	e := s.epoll
	s.epoll = nil
	s.mu.Unlock()
	if e != nil {
		return e, nil
	}
	return newEpoller()
}

// putEpoller keeps an empty epoll set for the next command, or closes it.
func (s *Session) putEpoller(e *epoller) {
	s.mu.Lock()
	if s.epoll == nil && !s.h.Closing() {
		s.epoll = e
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	e.close()
}

// streamReader reads one of a command's output streams.
type streamReader struct {
	c    *Command
	st   *stream
	rc   syscall.RawConn
	ep   *epoller
	sc   *sentinel.Scanner
	hold *newlineHold // stderr only
}

// newStreamReader returns the reader of st, or nil when the session is
// ending and st was discarded.
func (c *Command) newStreamReader(st *stream, ch logstore.Channel, trailer bool) *streamReader {
	s := c.s
	rc, err := st.R.SyscallConn()
	if err != nil || !s.h.AddDrain(st.R) {
		s.discard(st)
		c.readerReturned()
		return nil
	}
	c.addKeeper(st.Keep)
	c.mu.Lock()
	nonce := c.frame.Nonce
	c.mu.Unlock()
	r := &streamReader{c: c, st: st, rc: rc}
	write := func(b []byte) { c.log.Write(ch, b) }
	if ch == logstore.Stderr {
		write, r.hold = c.stderrWriter()
	}
	r.sc = sentinel.NewScanner(nonce, trailer, write)
	return r
}

// read reads what the stream holds now, without waiting: 0 and no error
// when it holds nothing.
func (r *streamReader) read(buf []byte) (int, error) {
	var n int
	var err error
	if cerr := r.rc.Read(func(fd uintptr) bool {
		n, err = syscall.Read(int(fd), buf)
		return true // one attempt: the epoll set does the waiting
	}); cerr != nil {
		return 0, cerr
	}
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, nil
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// take handles bytes read from the stream and reports whether the stream is
// done with: back in the pool, clean, right after its end marker.
func (r *streamReader) take(p []byte) bool {
	c, s, st, sc := r.c, r.c.s, r.st, r.sc
	if sc.Done() {
		return false // a background job's: discarded
	}
	_, werr := sc.Write(p)
	if werr == nil && !sc.Done() {
		return false
	}
	// From here on, end-of-file means no background job holds the stream.
	// It often has come already: then the stream goes back to the pool
	// before the command is reported ended, ready for the next one.
	c.closeKeeper(st.Keep)
	clean := werr == nil && c.reusable() && atEOF(st.R)
	if clean {
		s.h.DropDrain(st.R)
		clean = st.Rekeep() == nil
	}
	end := sc.End()
	c.streamEnded(&end)
	if !clean {
		return false
	}
	r.ep.remove(r.rc)
	s.putStream(st)
	c.readerReturned()
	return true
}

// end handles the end of reading: err is io.EOF, or why reading stopped. It
// returns true.
func (r *streamReader) end(err error) bool {
	c, s, st, sc := r.c, r.c.s, r.st, r.sc
	s.h.DropDrain(st.R)
	if !sc.Done() {
		sc.Flush()
		r.hold.flush()
	}
	if r.ep != nil {
		r.ep.remove(r.rc)
	}
	if err == io.EOF && sc.Done() && c.reusable() && st.Rekeep() == nil {
		s.putStream(st)
	} else {
		s.discard(st)
	}
	c.readerReturned()
	return true
}

// epoller is an epoll set whose readiness Go's poller waits for. It is
// edge-triggered: a descriptor joins the set's ready list when bytes come to
// it, so the list gives the order in which streams got data (one
// level-triggered would keep a stream read before at its old place).
type epoller struct {
	f      *os.File
	rc     syscall.RawConn
	events [4]unix.EpollEvent
}

func newEpoller() (*epoller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	e := &epoller{f: os.NewFile(uintptr(fd), "epoll")}
	if e.rc, err = e.f.SyscallConn(); err != nil {
		e.f.Close()
		return nil, err
	}
	return e, nil
}

// add puts the descriptor of rc in the set, tagged with id.
func (e *epoller) add(rc syscall.RawConn, id int32) error {
	return e.ctl(unix.EPOLL_CTL_ADD, rc, id)
}

// remove takes the descriptor of rc out of the set, before its stream serves
// another command.
func (e *epoller) remove(rc syscall.RawConn) { e.ctl(unix.EPOLL_CTL_DEL, rc, 0) }

func (e *epoller) ctl(op int, rc syscall.RawConn, id int32) error {
	var err error
	cerr := e.rc.Control(func(efd uintptr) {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.EpollCtl(int(efd), op, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: id})
		})
		if err == nil {
			err = cerr
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return err
}

// wait returns the descriptors ready now, in the order they became ready,
// waiting until there is one.
func (e *epoller) wait() ([]unix.EpollEvent, error) {
	var n int
	err := e.rc.Read(func(fd uintptr) bool {
		var werr error
		n, werr = unix.EpollWait(int(fd), e.events[:], 0)
		if werr != nil {
			n = 0
		}
		return n > 0
	})
	return e.events[:n], err
}

func (e *epoller) close() { e.f.Close() }
