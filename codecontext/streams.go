package codecontext

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
)

// streams are the FIFOs of one cell: its stdout and stderr, which the engine
// reads, and, when open, its stdin, which it writes.
type streams struct {
	out, err  *stream
	stdin     *os.File // opened read-write, so the driver's open never blocks
	stdinPath string   // "" for /dev/null
}

// stream is one output FIFO: the read end, opened without blocking, and a
// keeper, a write end of the engine's own that keeps the reader from seeing
// end-of-file before the driver has opened the FIFO. The keeper is closed at
// the end marker; end-of-file then means no child holds the FIFO any more.
type stream struct {
	path string
	r    *os.File
	keep *keeper
}

// keeper is a write end held only to be closed. Close is safe from any
// goroutine, once or more.
type keeper struct{ fd atomic.Int64 }

// Close closes the descriptor unless it is closed already.
func (k *keeper) Close() {
	if fd := k.fd.Swap(-1); fd >= 0 {
		syscall.Close(int(fd))
	}
}

func (st *stream) close() {
	st.r.Close()
	st.keep.Close()
	os.Remove(st.path)
}

// newStream makes and opens a FIFO in the context's directory.
func (c *Context) newStream(path string) (*stream, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		r.Close()
		os.Remove(path)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	st := &stream{path: path, r: r, keep: &keeper{}}
	st.keep.fd.Store(int64(fd))
	return st, nil
}

// newStreams makes the streams of cell number seq.
func (c *Context) newStreams(seq int, stdinOpen bool) (*streams, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil { // a cell may have removed it
		return nil, err
	}
	base := filepath.Join(c.dir, strconv.Itoa(seq))
	st := &streams{}
	var err error
	if st.out, err = c.newStream(base + ".out"); err != nil {
		return nil, err
	}
	if st.err, err = c.newStream(base + ".err"); err != nil {
		st.out.close()
		return nil, err
	}
	if stdinOpen {
		path := base + ".in"
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			st.out.close()
			st.err.close()
			return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
		}
		if st.stdin, err = os.OpenFile(path, os.O_RDWR|syscall.O_CLOEXEC, 0); err != nil {
			st.out.close()
			st.err.close()
			os.Remove(path)
			return nil, err
		}
		st.stdinPath = path
	}
	return st, nil
}

// WriteStdin queues p for the cell's stdin. It fails with
// process.ErrStdinNotOpen unless the cell was submitted with stdin open,
// and with process.ErrUnsupported after CloseStdin or the cell's end.
func (cell *Cell) WriteStdin(p []byte) error { return cell.stdin.Write(p) }

// CloseStdin gives the cell end-of-file once what was written is read.
func (cell *Cell) CloseStdin() error { return cell.stdin.CloseWrite() }
