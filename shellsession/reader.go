package shellsession

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/sentinel"
)

// readLoop reads a command's stdout and stderr into its log until the end
// marker of its stdout, then discards what background jobs write until
// they close them. Stderr has no marker: the shell has written all of the
// command's stderr before the end line that writes the stdout marker (see
// sentinel.EndLine), so once the marker is read what stderr holds is the
// rest of it.
//
// It reads both streams in the order they became readable: an epoll set of
// the two FIFOs, itself waited on through Go's poller, says which has data
// first. Two goroutines, one per FIFO, are woken together when both have
// data and run in an order of the runtime's, which put a command's stderr
// before the stdout it wrote first most of the time.
//
// The goroutine that runs the command reads its streams itself (see
// Command.await): the bytes that end a command wake the goroutine that
// goes on to the next one, with no hop between goroutines. Only streams
// still held open after the command's end — by a background job, or for the
// moment the shell takes to close them — are read on elsewhere: by the
// session's one goroutine for held streams (see heldStreams), or by a
// goroutine of their own (drain) when that cannot take them.
type readLoop struct {
	c    *Command
	ep   *epoller
	rs   [2]*streamReader
	live int   // readers in rs that have not returned
	err  error // why ep can no longer be waited on
	bp   *[]byte
}

// startReading makes the readers of the command's streams and puts them in
// an epoll set. A reader that cannot be made (the session ends) or watched
// has returned already.
func (c *Command) startReading(out, errs *stream) (*readLoop, error) {
	s := c.s
	l := &c.loop
	*l = readLoop{c: c, rs: [2]*streamReader{c.newStreamReader(out, logstore.Stdout), c.newStreamReader(errs, logstore.Stderr)}}
	for _, r := range l.rs {
		if r != nil {
			l.live++
		}
	}
	if l.live == 0 {
		return l, nil
	}
	ep, err := s.takeEpoller()
	if err == nil {
		err = s.watch(ep, l.rs)
	}
	if err == nil {
		// Before the command can write anything: what the set reports
		// now is stale, and an entry left on its ready list would keep a
		// stream ahead of one written to first.
		ep.flush()
	}
	if err != nil {
		if ep != nil {
			ep.close()
		}
		l.endAll(err) // the streams go: discarded
		return nil, fmt.Errorf("watch the streams: %w", err)
	}
	l.ep = ep
	l.bp = readBuffers.Get().(*[]byte)
	c.mu.Lock()
	c.ep = ep
	c.mu.Unlock()
	s.mu.Lock()
	s.awaiting = c
	s.mu.Unlock()
	return l, nil
}

// stopKicks ends the kicks of the command's wait: nothing waits in its
// epoll set for the command's end any more.
func (l *readLoop) stopKicks() {
	c, s := l.c, l.c.s
	c.mu.Lock()
	c.ep = nil
	c.mu.Unlock()
	s.mu.Lock()
	if s.awaiting == c {
		s.awaiting = nil
	}
	s.mu.Unlock()
}

// step waits until a stream has data, or the set's deadline, and reads what
// the streams hold. It returns the wait's error: os.ErrDeadlineExceeded
// after a kick (see Command.kick), or why the set can no longer be waited
// on (the session's end closed it), after which every reader has returned.
func (l *readLoop) step() error {
	evs, err := l.ep.wait()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if err != nil {
		l.err = err
		l.endAll(err)
		return err
	}
	l.take(evs)
	return nil
}

// take reads what the streams evs reports hold.
func (l *readLoop) take(evs []unix.EpollEvent) {
	l.c.stepping.Store(true)
	defer l.c.stepping.Store(false)
	buf := *l.bp
	marked := false // the stdout marker came in this step
	for _, ev := range evs {
		i := l.index(ev.Fd)
		if i < 0 {
			continue // a stream of the set that no command of this loop uses
		}
		// Until the stream is empty: the set reports a stream again
		// only when more comes. A short read says it is empty, unless the
		// set saw its writers gone too: their last bytes and their close
		// came as one report, and the end-of-file after the bytes gets no
		// report of its own.
		hup := ev.Events&unix.EPOLLHUP != 0
		for r := l.rs[i]; r != nil; {
			n, err := r.read(buf)
			over := r.over
			if (n > 0 && r.take(buf[:n])) || (err != nil && r.end(err)) {
				l.rs[i] = nil
				l.live--
			}
			marked = marked || i == 0 && !over && r.over
			if l.rs[i] == nil || n == 0 || n < len(buf) && !hup {
				break
			}
		}
	}
	if marked {
		l.endStderr(buf)
	}
}

// readHeld reads what the streams hold now, without waiting, for a command
// whose end was given up (see Command.giveUp): the output it wrote before
// that. What comes after is a background job's, discarded.
func (l *readLoop) readHeld() {
	buf := *l.bp
	for i, r := range l.rs {
		for r != nil && !r.over {
			n, err := r.read(buf)
			if (n > 0 && r.take(buf[:n])) || (err != nil && r.end(err)) {
				l.rs[i] = nil
				l.live--
				break
			}
			if err != nil {
				break // kept until a late writer lets go (see end)
			}
			if n == 0 {
				if r.sc != nil {
					r.sc.Flush()
				}
				r.hold.flush()
				r.over = true
			}
		}
	}
}

// endStderr ends the command's stderr once its stdout marker has come. Its
// keeper goes first: the stream then holds the rest of the command's
// stderr, then end-of-file unless a background job holds it open.
func (l *readLoop) endStderr(buf []byte) {
	r := l.rs[1]
	if r == nil || r.over {
		return
	}
	r.c.closeKeeper(r.st.Keep)
	eof := false
	for {
		n, err := r.read(buf)
		if n > 0 {
			r.take(buf[:n])
		}
		if err == io.EOF {
			eof = true
			break
		}
		if err != nil {
			r.end(err)
			l.rs[1] = nil
			l.live--
			return
		}
		if n == 0 {
			break // held open: what comes next is a background job's
		}
	}
	r.release()
	if r.endedAt(eof && r.c.reusable()) {
		l.rs[1] = nil
		l.live--
	}
}

// index returns where in rs the reader of the stream with id is, or -1.
func (l *readLoop) index(id int32) int {
	for i, r := range l.rs {
		if r != nil && r.id == id {
			return i
		}
	}
	return -1
}

// endAll ends the readers still reading, with err.
func (l *readLoop) endAll(err error) {
	for i, r := range l.rs {
		if r != nil {
			r.end(err)
			l.rs[i] = nil
		}
	}
	l.live = 0
}

// done lets go of the epoll set once no reader is left: back to the session
// for the next command when it is still open.
func (l *readLoop) done() {
	if l.ep == nil {
		return
	}
	s := l.c.s
	l.stopKicks()
	s.h.DropDrain(l.ep.f)
	if l.err == nil {
		l.ep.f.SetReadDeadline(time.Time{})
		s.putEpoller(l.ep) // for the next command, with the streams back in the pool
	}
	readBuffers.Put(l.bp)
	l.ep, l.bp = nil, nil
}

// settleEOF bounds how long a command's end waits for end-of-file on a
// stream whose end marker has come: the shell closes the stream right after
// writing the marker, but the reader may see the marker first. Waiting for
// it here saves a hand-off (see handOff); a stream a background job holds
// open is left to the session's held streams after this.
const settleEOF = time.Millisecond

// settle reads on, for settleEOF at most, while the only readers left are
// past the command's end, waiting for the end-of-file that lets their
// streams serve the next command.
func (l *readLoop) settle() {
	if l.live == 0 || l.err != nil {
		return
	}
	for _, r := range l.rs {
		if r != nil && !r.over {
			return // the end was given up: no marker to settle after
		}
	}
	// The thread waits in the set itself, rather than the goroutine in
	// Go's poller with a deadline: the deadline's timer woke an idle
	// thread of the runtime's, and its clearing cost a call more, for a
	// wait that most often lasts only until the shell, woken by the
	// marker's read, runs again and closes the stream.
	until := time.Now().Add(settleEOF)
	for l.live > 0 {
		left := time.Until(until)
		if left <= 0 {
			return
		}
		evs, err := l.ep.waitFor(left)
		if err != nil {
			l.err = err
			l.endAll(err)
			return
		}
		l.take(evs)
	}
}

// settleLater leaves the settling of the command's streams (see settle) to
// the next command's start, and reports whether it did: when their
// end-of-file has not come yet and nothing was forked since the command
// started, so that only the shell holds them, and closes them right after
// the marker it just wrote. Waiting for that here kept the command's caller
// waiting too: after an idle moment the engine often read the marker before
// the shell, on the same processor, got to close its streams, and then
// waited for the shell to run again and wake it a second time. A
// command that forked settles at once, as a background job may hold its
// streams and write on: they are read on (and what comes discarded) rather
// than left full until the next command.
func (l *readLoop) settleLater() bool {
	if l.live == 0 || l.err != nil {
		return false
	}
	for _, r := range l.rs {
		if r != nil && !r.over {
			return false // the end was given up: no marker to settle after
		}
	}
	c, s := l.c, l.c.s
	c.mu.Lock()
	last := c.lastPID
	c.mu.Unlock()
	if last < 0 || proctree.LastPID() != last {
		return false
	}
	s.mu.Lock()
	taken := s.unsettled != nil
	if !taken {
		s.unsettled = l
	}
	s.mu.Unlock()
	if taken {
		return false
	}
	l.stopKicks()
	return true
}

// settleUnsettled settles the streams of the command before, if it left
// them to this moment (see settleLater): most often their end-of-file is
// there, and they go back to the pool for the command about to start.
func (s *Session) settleUnsettled() {
	if l := s.takeUnsettled(); l != nil {
		l.readEOF()
		l.settle()
		l.handOff()
	}
}

// takeUnsettled returns the readers a command left to be settled, if
// any, which are then the caller's.
func (s *Session) takeUnsettled() *readLoop {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.unsettled
	s.unsettled = nil
	return l
}

// readEOF ends the readers whose stream is at end-of-file now, without
// waiting or arming a deadline (whose timer wakes Go's poller): what
// settleUnsettled most often finds.
func (l *readLoop) readEOF() {
	if l.err != nil {
		return
	}
	buf := *l.bp
	for i, r := range l.rs {
		if r != nil && r.atEOF(buf) && r.end(io.EOF) {
			l.rs[i] = nil
			l.live--
		}
	}
}

// dropUnsettled lets go, at the session's end, of the streams a command
// left to be settled: the session's end closed them.
func (s *Session) dropUnsettled() {
	if l := s.takeUnsettled(); l != nil {
		l.err = os.ErrClosed
		l.endAll(os.ErrClosed)
		l.done()
	}
}

// handOff leaves the readers still reading after the command's end to the
// session's held streams (see heldStreams), or, those it cannot take, to a
// goroutine of their own.
func (l *readLoop) handOff() {
	if l.live == 0 {
		l.done()
		return
	}
	l.stopKicks() // the held streams are read until end-of-file or the session's end
	if l.c.s.holdOver(l); l.live == 0 {
		l.done() // its set serves the next commands
		return
	}
	l.c.s.wg.Add(1)
	go l.drain()
}

// drain reads the streams until every reader has returned.
func (l *readLoop) drain() {
	defer l.c.s.wg.Done()
	for l.live > 0 {
		if err := l.step(); errors.Is(err, os.ErrDeadlineExceeded) {
			l.ep.f.SetReadDeadline(time.Time{}) // a kick that came late
		}
	}
	l.done()
}

// watch puts the streams of rs in ep, and ep among the session's drains,
// which the session's end closes; or closes ep.
func (s *Session) watch(ep *epoller, rs [2]*streamReader) error {
	if !s.h.AddDrain(ep.f) {
		ep.close()
		return os.ErrClosed
	}
	for _, r := range rs {
		if r == nil {
			continue
		}
		r.ep = ep
		if r.in == ep {
			continue // it stayed in the set since a command before
		}
		if err := ep.add(r.rc, r.id); err != nil && !errors.Is(err, syscall.EEXIST) {
			s.h.DropDrain(ep.f)
			ep.close()
			return err
		}
		r.in = ep
	}
	return nil
}

// spareEpolls is how many empty epoll sets a session keeps for its next
// commands: two, since a command whose streams' settling is left to the
// next command's start keeps its set until then (see settleLater), and one
// whose streams the session's held streams could not take keeps it until
// its job lets go (see handOff), while the next command reads with another.
const spareEpolls = 2

// takeEpoller returns an epoll set a command before left, or a new one.
func (s *Session) takeEpoller() (*epoller, error) {
	s.mu.Lock()
	if n := len(s.epolls); n > 0 {
		e := s.epolls[n-1]
		s.epolls[n-1] = nil
		s.epolls = s.epolls[:n-1]
		s.mu.Unlock()
		return e, nil
	}
	s.mu.Unlock()
	return newEpoller()
}

// putEpoller keeps an empty epoll set for a later command, or closes it.
func (s *Session) putEpoller(e *epoller) {
	s.mu.Lock()
	if len(s.epolls) < spareEpolls && !s.h.Closing() {
		s.epolls = append(s.epolls, e)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	e.close()
}

// streamReader reads one of a command's output streams.
type streamReader struct {
	c     *Command // the command it reads for now
	ch    logstore.Channel
	st    *stream
	rc    syscall.RawConn
	ep    *epoller
	sc    *sentinel.Scanner // stdout's end marker; nil for stderr, which has none
	sc0   *sentinel.Scanner // room for sc, kept for the next command
	over  bool              // the command's end was seen on the stream (see endedAt)
	hold  *newlineHold      // zsh's stderr only
	hold0 *newlineHold      // room for hold, kept for the next command
	// unlinked is set once the stream, discarded at end-of-file, had its
	// path removed (see writerCame): a writer that opened it before is
	// read, its bytes discarded, until it lets go.
	unlinked bool
	// late drops the end marker of the command that used the stream as its
	// stdout before, should it come after all (see sentinel.Late); lastOut
	// is that command's nonce.
	late    sentinel.Late
	lastOut sentinel.Nonce
	// id tags the stream in epoll sets. A stream stays in the set of the
	// last command that read it, in, while it waits in the pool, and the
	// next command that reads it with the same set saves two epoll_ctl
	// calls: it empties the set's ready list of what came before (see
	// startReading). Closing the stream takes it out of every set.
	id    int32
	in    *epoller
	outFn func([]byte) // out, made once

	// The buffer and results of the read in progress, and the function the
	// raw connection calls, made once (see epoller).
	buf    []byte
	n      int
	err    error
	readFn func(uintptr) bool
}

// newStreamReader returns the reader of st for the command, or nil when the
// session is ending and st was discarded. A stream's reader is made once and
// serves each command that uses the stream.
func (c *Command) newStreamReader(st *stream, ch logstore.Channel) *streamReader {
	s := c.s
	r, _ := st.Reader.(*streamReader)
	if r == nil {
		rc, err := st.R.SyscallConn()
		if err != nil {
			s.discard(st)
			return nil
		}
		r = &streamReader{st: st, rc: rc, id: s.readerIDs.Add(1)}
		r.readFn, r.outFn = r.readOnce, r.out
		st.Reader = r
	}
	if !s.h.AddDrain(st.R) {
		s.discard(st)
		return nil
	}
	c.addKeeper(st.Keep)
	c.mu.Lock()
	nonce := c.frame.Nonce
	c.mu.Unlock()
	r.c, r.ch, r.ep, r.over = c, ch, nil, false
	r.hold, r.sc = nil, nil
	r.late.Reset(r.lastOut)
	r.lastOut = ""
	if ch == logstore.Stderr {
		r.hold = c.stderrHold(r.hold0)
		r.hold0 = r.hold
		return r
	}
	if r.sc0 == nil {
		r.sc0 = sentinel.NewScanner(nonce, true, r.outFn)
	} else {
		r.sc0.Reset(nonce, true, r.outFn)
	}
	r.sc = r.sc0
	r.lastOut = nonce
	return r
}

// done lets go of the command the reader read for, as its stream goes back
// to the pool.
func (r *streamReader) done() {
	r.c, r.ep = nil, nil
	if r.hold != nil {
		r.hold.c, r.hold = nil, nil
	}
}

// out writes a command's own bytes to its log.
func (r *streamReader) out(b []byte) {
	if r.hold != nil {
		r.hold.write(b)
		return
	}
	r.c.log.Write(r.ch, b)
}

// read reads what the stream holds now, without waiting: 0 and no error
// when it holds nothing.
func (r *streamReader) read(buf []byte) (int, error) {
	r.buf = buf
	cerr := r.rc.Read(r.readFn)
	n, err := r.n, r.err
	r.buf, r.err = nil, nil
	if cerr != nil {
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

func (r *streamReader) readOnce(fd uintptr) bool {
	r.n, r.err = rawcall.Read(int(fd), r.buf)
	return true // one attempt: the epoll set does the waiting
}

// atEOF reports whether the stream is at end-of-file now, without waiting.
// Bytes it reads into buf are discarded: after an end marker they belong to
// no command.
func (r *streamReader) atEOF(buf []byte) bool {
	_, err := r.read(buf)
	return err == io.EOF
}

// take handles bytes read from the stream and reports whether the stream is
// done with: back in the pool, clean, right after its end marker. Stderr's
// bytes go to the log as they are, marker or not, until the stdout marker
// ends it (see readLoop.endStderr).
func (r *streamReader) take(p []byte) bool {
	if r.over || r.unlinked {
		return false // a background job's, or a late end line's: discarded
	}
	if r.late.On() {
		var held []byte
		if held, p = r.late.Skip(p); len(held) > 0 && r.take(held) {
			return true
		}
		if len(p) == 0 {
			return false
		}
	}
	sc := r.sc
	if sc == nil { // stderr
		r.out(p)
		return false
	}
	sc.Write(p) // never fails: an imitation of the marker is output
	if !sc.Done() {
		return false
	}
	return r.ended(p)
}

// release gives the command what late held back as the start of the
// stream's last user's marker, when nothing more comes for the command to
// show it its own (see sentinel.Late.Release): a stderr that ends with
// "\036" kept it.
func (r *streamReader) release() {
	held := r.late.Release()
	switch {
	case len(held) == 0:
	case r.sc != nil:
		r.sc.Write(held)
	default:
		r.out(held)
	}
}

// ended ends stdout for the command, its end marker come, and reports
// whether the stream is done with: back in the pool, clean. p is room to
// read into.
func (r *streamReader) ended(p []byte) bool {
	// From here on, end-of-file means no background job holds the stream.
	// It often has come already: then the stream goes back to the pool
	// before the command is reported ended, ready for the next one.
	r.c.closeKeeper(r.st.Keep)
	r.c.s.markedOut(r.st)
	return r.endedAt(r.c.reusable() && r.atEOF(p[:cap(p)]))
}

// endedAt reports the stream's end to the command, its keeper closed, and
// puts the stream back in the pool when clean: at end-of-file, and the
// command's streams reusable. It reports whether it did.
func (r *streamReader) endedAt(clean bool) bool {
	c, s, st := r.c, r.c.s, r.st
	r.over = true
	if clean {
		s.h.DropDrain(st.R)
		clean = st.Rekeep() == nil
	}
	var end sentinel.End
	ended := (*sentinel.End)(nil) // stderr's reports nothing
	if r.sc != nil {
		end = r.sc.End()
		ended = &end
	}
	c.streamEnded(ended)
	if !clean {
		return false
	}
	r.done()
	s.putStream(st) // staying in the set (see streamReader.in)
	return true
}

// end handles the end of reading: err is io.EOF, or why reading stopped. It
// reports whether the stream is done with: back in the pool or discarded.
// A stream discarded at end-of-file that a writer opened meanwhile is kept
// (see writerCame), and ended at its next end-of-file.
func (r *streamReader) end(err error) bool {
	c, s, st := r.c, r.c.s, r.st
	s.h.DropDrain(st.R)
	if !r.over && !r.unlinked {
		r.release()
		if r.sc != nil {
			r.sc.Flush()
		}
		r.hold.flush()
	}
	switch {
	case r.unlinked:
		// End-of-file again, or reading failed: nothing can open it now.
	case err == io.EOF && r.over && c.reusable() && st.Rekeep() == nil:
		if s.repool(r) { // staying in the set (see streamReader.in)
			return true
		}
		// A late end line may open it, with nobody to read: discarded,
		// its new keeper closed first, as a writer it would be.
		st.Keep.Close()
		fallthrough
	case err == io.EOF:
		if discardingAtEOF != nil {
			discardingAtEOF(c, st)
		}
		if r.writerCame() {
			return false
		}
	}
	s.discard(st)
	return true
}

// writerCame removes the path of a stream about to be discarded at
// end-of-file, then reads it again, and reports whether a writer opened it
// before that. Closing the read end then would kill the shell: a given-up
// command's end line, which bash may hold in its input and run later, opens
// the stream by its path to write its marker, and its write on a FIFO with
// no reader would get SIGPIPE. At end-of-file again nobody holds the stream
// and nobody can open it any more (a late end line makes a plain file at
// the path, which the session's end removes: stream names are never used
// again). Otherwise what came is read, and discarded, until the stream is
// empty, so that the edge-triggered set reports it again when more comes
// or the writer lets go. Only a discarded stream pays for this, never one
// going back to the pool.
func (r *streamReader) writerCame() bool {
	r.st.Unlink()
	r.unlinked = true
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	for {
		n, err := r.read(*bp)
		switch {
		case err != nil:
			return false // end-of-file, or it cannot be read: closed
		case n == 0:
			return true // held open, empty
		}
	}
}

// discardingAtEOF, when a test sets it, is called when a stream the reader
// saw at end-of-file is about to be discarded, with the command it read for.
var discardingAtEOF func(*Command, *stream)

// epollMade, when a test sets it, is called for each epoll set made.
var epollMade func()

// epoller is an epoll set whose readiness Go's poller waits for. It is
// edge-triggered: a descriptor joins the set's ready list when bytes come to
// it, so the list gives the order in which streams got data (one
// level-triggered would keep a stream read before at its old place).
type epoller struct {
	f      *os.File
	rc     syscall.RawConn
	events [4]unix.EpollEvent

	// The arguments and results of the call in progress, and the functions
	// the raw connections call, made once: only the goroutine reading the
	// set calls it, and a closure made per call would be an allocation.
	op, efd int
	src     syscall.RawConn
	ev      unix.EpollEvent
	n       int
	err     error
	outerFn func(uintptr)
	innerFn func(uintptr)
	waitFn  func(uintptr) bool
	flushFn func(uintptr)
	timedFn func(uintptr)
	msec    int // waitFor's timeout
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
	if epollMade != nil {
		epollMade()
	}
	e := &epoller{f: os.NewFile(uintptr(fd), "epoll")}
	if e.rc, err = e.f.SyscallConn(); err != nil {
		e.f.Close()
		return nil, err
	}
	e.outerFn, e.innerFn, e.waitFn, e.flushFn, e.timedFn = e.outer, e.inner, e.waitOnce, e.flushOnce, e.timedOnce
	return e, nil
}

// add puts the descriptor of rc in the set, tagged with id.
func (e *epoller) add(rc syscall.RawConn, id int32) error {
	return e.ctl(unix.EPOLL_CTL_ADD, rc, id)
}

// ctl changes the set for the descriptor of rc, with both descriptors held
// open for the call: the session's end may close either meanwhile.
func (e *epoller) ctl(op int, rc syscall.RawConn, id int32) error {
	e.op, e.src, e.err = op, rc, nil
	e.ev = unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: id}
	cerr := e.rc.Control(e.outerFn)
	err := e.err
	e.src, e.err = nil, nil
	if err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return err
}

func (e *epoller) outer(efd uintptr) {
	e.efd = int(efd)
	if cerr := e.src.Control(e.innerFn); e.err == nil {
		e.err = cerr
	}
}

func (e *epoller) inner(fd uintptr) { e.err = unix.EpollCtl(e.efd, e.op, int(fd), &e.ev) }

// wait returns the descriptors ready now, in the order they became ready,
// waiting until there is one.
func (e *epoller) wait() ([]unix.EpollEvent, error) {
	e.n = 0
	err := e.rc.Read(e.waitFn)
	return e.events[:e.n], err
}

// flush empties the set's ready list without waiting.
func (e *epoller) flush() {
	for {
		e.n = 0
		if e.rc.Control(e.flushFn) != nil || e.n < len(e.events) {
			return
		}
	}
}

func (e *epoller) flushOnce(fd uintptr) { e.waitOnce(fd) }

// waitFor returns the descriptors ready now, in the order they became
// ready, waiting up to d (rounded up to a millisecond) until there is one:
// the calling thread blocks in the set, which is held open meanwhile. Only
// for short waits: the thread keeps its processor, and kicks (see
// Command.kick) do not end the wait.
func (e *epoller) waitFor(d time.Duration) ([]unix.EpollEvent, error) {
	e.n, e.err = 0, nil
	e.msec = int((d + time.Millisecond - 1) / time.Millisecond)
	if err := e.rc.Control(e.timedFn); err != nil {
		return nil, err
	}
	err := e.err
	e.err = nil
	return e.events[:e.n], err
}

func (e *epoller) timedOnce(fd uintptr) {
	n, err := rawcall.EpollWait(int(fd), e.events[:], e.msec)
	if err == syscall.EINTR {
		n, err = 0, nil // a signal of the runtime's: the caller waits on
	}
	if err != nil {
		n, e.err = 0, os.NewSyscallError("epoll_pwait", err)
	}
	e.n = n
}

func (e *epoller) waitOnce(fd uintptr) bool {
	n, err := rawcall.EpollPoll(int(fd), e.events[:])
	if err != nil {
		n = 0
	}
	e.n = n
	return n > 0
}

func (e *epoller) close() { e.f.Close() }
