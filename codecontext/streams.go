package codecontext

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/conchsh/conch/internal/resident"
)

// streams are the FIFOs of one cell: its stdout and stderr, which the engine
// reads, and, when open, its stdin, which it writes.
type streams struct {
	out, err  *stream
	stdin     *os.File // opened read-write, so the driver's open never blocks
	stdinPath string   // "" for /dev/null
}

// stream is one output FIFO of a cell (see resident.Stream).
type stream = resident.Stream

// newStreams makes the streams of cell number seq.
func (c *Context) newStreams(seq int, stdinOpen bool) (*streams, error) {
	// A cell may have removed the directory, or put a link there; when it
	// is made under a new name (see resident.Dir.Remake), the driver finds
	// the files it shares with the engine ("int", "failed") beside the
	// cell's streams.
	dir, _, err := c.dir.Remake()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(dir, strconv.Itoa(seq))
	st := &streams{}
	if st.out, err = resident.MakeStream(base + ".out"); err != nil {
		return nil, err
	}
	if st.err, err = resident.MakeStream(base + ".err"); err != nil {
		st.out.Close()
		return nil, err
	}
	if stdinOpen {
		path := base + ".in"
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			st.out.Close()
			st.err.Close()
			return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
		}
		if st.stdin, err = os.OpenFile(path, os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0); err != nil {
			st.out.Close()
			st.err.Close()
			os.Remove(path)
			return nil, err
		}
		st.stdinPath = path
	}
	return st, nil
}

// close closes the streams of a cell that will not run.
func (st *streams) close() {
	st.out.Close()
	st.err.Close()
	if st.stdin != nil {
		st.stdin.Close()
		os.Remove(st.stdinPath)
	}
}

// WriteStdin queues p for the cell's stdin. It fails with
// process.ErrStdinNotOpen unless the cell was submitted with stdin open,
// and with process.ErrUnsupported after CloseStdin or the cell's end.
func (cell *Cell) WriteStdin(p []byte) error { return cell.stdin.Write(p) }

// CloseStdin gives the cell end-of-file once what was written is read.
func (cell *Cell) CloseStdin() error { return cell.stdin.CloseWrite() }

// StdinQueued returns the bytes written to the cell's stdin that it has not
// taken yet.
func (cell *Cell) StdinQueued() int { return cell.stdin.Queued() }
