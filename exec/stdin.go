package exec

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/process"
)

// feeder writes what WriteStdin queued to the process's stdin (its pipe or
// its terminal), so that a write never waits for the process to read. The
// queue is bounded by process.StdinQueueLimit. It is owned by the process's
// wait goroutine, which ends it and waits for it.
type feeder struct {
	w        *os.File
	closeEOF func() // closes the pipe at end-of-file; nil for a terminal
	done     chan struct{}

	mu       sync.Mutex // guards the fields below
	cond     sync.Cond
	chunks   [][]byte
	queue    process.StdinQueue
	eof      bool          // close once what is queued is written
	line     line          // a terminal's line being typed; the feeder's goroutine alone uses it
	stopped  bool          // the process ended: write nothing more
	progress chan struct{} // closed and replaced when bytes leave the queue or the feeder stops
	unread   int64         // what the pipe held, unread, once halted
	kept     *os.File      // a reader of the pipe that never reads, kept from end-of-file to the process's end (see rawcall.Keep)
}

func newFeeder(w *os.File, closeEOF func()) *feeder {
	f := &feeder{w: w, closeEOF: closeEOF, done: make(chan struct{}), progress: make(chan struct{})}
	f.cond.L = &f.mu
	go f.run()
	return f
}

// write queues p; a *process.StdinFullError when it does not all fit.
func (f *feeder) write(p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return process.ErrStdinNotOpen
	}
	n, err := f.queue.Admit(len(p))
	if n > 0 {
		f.chunks = append(f.chunks, append([]byte(nil), p[:n]...))
		f.cond.Signal()
	}
	return err
}

// writeEOF queues a terminal's end-of-file (see eofChar), which counts as one
// byte queued. The feeder writes it twice where the input before it left a
// line unfinished (see line), as one presses Ctrl-D twice at a terminal:
// the first hands the partial line to the reader, the second is the
// end-of-file; three times after a literal next, which makes the first a
// character of the line.
func (f *feeder) writeEOF() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return process.ErrStdinNotOpen
	}
	if _, err := f.queue.Admit(1); err != nil {
		return err
	}
	f.chunks = append(f.chunks, nil) // nil: the end-of-file
	f.cond.Signal()
	return nil
}

// closeWrite closes the pipe once what is queued has been written.
func (f *feeder) closeWrite() {
	f.mu.Lock()
	f.eof = true
	f.mu.Unlock()
	f.cond.Signal()
}

// pending reports whether written bytes have not reached the process's
// stdin yet: a process cannot be waiting for input then.
func (f *feeder) pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queue.Queued > 0
}

// queued returns the bytes queued and not yet written; none once the
// feeder stopped, since those will never be.
func (f *feeder) queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return 0
	}
	return f.queue.Queued
}

// ended reports whether the feeder writes nothing more: the process
// closed its stdin (a write failed), or it was closed at end-of-file, or
// the process ended.
func (f *feeder) ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// waitProgress returns a channel closed once bytes leave the queue or the
// feeder stops.
func (f *feeder) waitProgress() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.progress
}

// halt stops the feeder of a pipe at the process's end, before the pipe is
// closed: a write in progress is cut short (its deadline), and what the
// pipe then holds, which the process never read, is counted as dropped;
// also after end-of-file, when the feeder has closed the pipe and a reader
// kept tells.
func (f *feeder) halt() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.cond.Signal()
	_ = f.w.SetWriteDeadline(time.Now())
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kept != nil {
		f.unread = rawcall.Unread(f.kept)
		f.dropKept()
		return
	}
	f.unread = rawcall.Unread(f.w)
}

// dropKept closes the reader kept from end-of-file, if any; f.mu is held.
func (f *feeder) dropKept() {
	if f.kept != nil {
		f.kept.Close()
		f.kept = nil
	}
}

// stop makes the feeder write nothing more, once the process has ended;
// the caller closes the file under a write in progress. It waits for the
// feeder and returns the bytes it dropped.
func (f *feeder) stop() int64 {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.cond.Signal()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropKept() // halt has, for a pipe: the reader never outlives the feeder
	return int64(f.queue.Queued) + f.unread
}

func (f *feeder) run() {
	defer close(f.done)
	defer func() {
		f.mu.Lock()
		f.stopped = true
		close(f.progress)
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		for len(f.chunks) == 0 && !f.eof && !f.stopped {
			f.cond.Wait()
		}
		chunks, eof, stopped := f.chunks, f.eof, f.stopped
		f.chunks = nil
		f.mu.Unlock()
		if stopped {
			return
		}
		for _, p := range chunks {
			// What is not written stays counted as queued: dropped.
			n, err := f.writeChunk(p)
			f.mu.Lock()
			f.queue.Queued -= n
			close(f.progress)
			f.progress = make(chan struct{})
			stopped = f.stopped
			f.mu.Unlock()
			if err != nil || stopped {
				return
			}
		}
		if eof && len(chunks) == 0 {
			if f.closeEOF != nil {
				// What the pipe still holds at the process's end was
				// not read, and only a reader of the pipe's can tell
				// then (see halt).
				kept := rawcall.Keep(f.w)
				f.mu.Lock()
				f.kept = kept
				f.mu.Unlock()
				f.closeEOF()
			}
			return
		}
	}
}

// writeChunk writes p to the process, a terminal's end-of-file for nil,
// and returns how many of the queue's bytes it took.
func (f *feeder) writeChunk(p []byte) (int, error) {
	if p != nil {
		n, err := f.w.Write(p)
		if n > 0 && f.closeEOF == nil { // a terminal: a pipe has no line to leave open
			f.line.write(termios(f.w), p[:n])
			handOver(f.w)
		}
		return n, err
	}
	c := eofChar(f.w)
	eof := []byte{c}
	if f.line.lnext {
		eof = append(eof, c, c)
	} else if f.line.partial() {
		eof = append(eof, c)
	}
	n, err := f.w.Write(eof)
	if n == 0 {
		return 0, err
	}
	handOver(f.w)
	f.line.reset()
	return 1, err
}

// handOver has what was written to the terminal whose master is w reach its
// line discipline now, waking a reader it completes a line for. A write to
// a master returns with the bytes still in the terminal's buffer, handed
// over later by a kernel worker: on a busy machine the reader slept on in
// its read for tens of milliseconds after the write (a quarter of the
// writes at all, here), with nothing left queued, and was said to wait for
// input it had been given. A poll of the terminal's own end hands the
// buffer over at once.
func handOver(w *os.File) {
	rc, err := w.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		peer, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC)
		if errno != 0 {
			return
		}
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(peer), Events: unix.POLLIN}}, 0)
		unix.Close(int(peer))
	})
}

// eofChar is the byte that a terminal (its master, w) takes as
// end-of-file: its VEOF as stty eof set it, Ctrl-D by default, and Ctrl-D
// where it has none (in raw mode, or VEOF disabled), as one presses it.
func eofChar(w *os.File) byte {
	if t := termios(w); t != nil && t.Lflag&unix.ICANON != 0 && t.Cc[unix.VEOF] != 0 {
		return t.Cc[unix.VEOF]
	}
	return 4
}

// termios returns the settings of the terminal whose master is w; nil
// when they cannot be read.
func termios(w *os.File) *unix.Termios {
	rc, err := w.SyscallConn()
	if err != nil {
		return nil
	}
	var t *unix.Termios
	if cerr := rc.Control(func(fd uintptr) { t, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); cerr != nil || err != nil {
		return nil
	}
	return t
}
