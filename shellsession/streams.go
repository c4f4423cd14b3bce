package shellsession

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// streams are the FIFOs of one command: its stdout and stderr, which the
// engine reads, and, when open, its stdin. They are fresh for every command,
// so that a background job still holding a command's streams can never write
// into a later command's output.
type streams struct {
	out, err stream
	stdin    string // FIFO path, or "" for /dev/null
	script   string // the file the command's text is written to and sourced from
}

// stream is one output FIFO, opened by the engine before the command: the
// read end without blocking, and a keeper, a write end of our own that keeps
// the reader from seeing end-of-file while the shell opens and closes the
// FIFO (once for the command, once for its end line).
type stream struct {
	path string
	r    *os.File
	keep *os.File
}

// prepareStreams makes the output FIFOs of a command.
func (s *Session) prepareStreams() (*streams, error) {
	if err := os.MkdirAll(s.fifoDir, 0o700); err != nil { // a command may have removed it
		return nil, err
	}
	s.mu.Lock()
	s.seq++
	n := strconv.Itoa(s.seq)
	s.mu.Unlock()
	st := &streams{}
	var err error
	if st.out, err = openStream(filepath.Join(s.fifoDir, n+".o")); err != nil {
		return nil, err
	}
	if st.err, err = openStream(filepath.Join(s.fifoDir, n+".e")); err != nil {
		st.out.close()
		return nil, err
	}
	return st, nil
}

func openStream(path string) (stream, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return stream{}, &os.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return stream{}, err
	}
	keep, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		r.Close()
		os.Remove(path)
		return stream{}, err
	}
	return stream{path: path, r: r, keep: keep}, nil
}

func (st stream) close() {
	if st.r != nil {
		st.r.Close()
		st.keep.Close()
		os.Remove(st.path)
	}
}

// close releases streams no command used.
func (st *streams) close() {
	if st == nil {
		return
	}
	st.out.close()
	st.err.close()
	for _, p := range []string{st.stdin, st.script} {
		if p != "" {
			os.Remove(p)
		}
	}
}

// takeStreams returns the streams prepared after the last command, or makes
// them now, and the stdin FIFO when the command's stdin is open.
func (s *Session) takeStreams(stdinOpen bool) (*streams, error) {
	s.mu.Lock()
	st := s.spare
	s.spare = nil
	s.mu.Unlock()
	if st == nil {
		var err error
		if st, err = s.prepareStreams(); err != nil {
			return nil, err
		}
	}
	// A new file for every command: mksh keeps pointers into a sourced
	// file's text (for aliases defined in it), which a rewrite corrupts.
	base := st.out.path[:len(st.out.path)-2]
	st.script = base + ".sh"
	if stdinOpen {
		st.stdin = base + ".i"
		if err := syscall.Mkfifo(st.stdin, 0o600); err != nil {
			st.stdin = ""
			st.close()
			return nil, &os.PathError{Op: "mkfifo", Path: st.stdin, Err: err}
		}
	}
	return st, nil
}

// prepareSpare makes the next command's streams while the caller of the
// last one reads its result, off the next command's path.
func (s *Session) prepareSpare() {
	st, err := s.prepareStreams()
	if err != nil {
		return // the next command makes them, and reports why if it cannot
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare != nil || s.closing {
		st.close()
		return
	}
	s.spare = st
}
