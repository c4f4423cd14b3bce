package resident

import (
	"os"
	"sync/atomic"
	"syscall"

	"github.com/conchsh/conch/internal/rawcall"
)

// Stream is one output FIFO of a command: the engine's read end, opened
// without blocking before the command runs, and a keeper, a write end of
// the engine's own that keeps the reader from seeing end-of-file while the
// interpreter opens and closes the FIFO. The keeper is closed at the
// stream's end marker; end-of-file then means nothing the command started
// holds the FIFO any more.
type Stream struct {
	Path string
	R    *os.File
	Keep *Keeper
	path rawcall.Path // Path, for each keeper's open and InPlace
	id   rawcall.ID   // the FIFO's, for InPlace
	// unlinked is set once Unlink removed Path: whatever is there since is
	// not the FIFO.
	unlinked bool
	// Reader is the embedder's state for reading R, made once and kept
	// with the stream while a pool keeps it for command after command.
	Reader any
}

// MakeStream makes the FIFO at path and opens its read end and keeper.
func MakeStream(path string) (*Stream, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	st := &Stream{Path: path, R: r}
	st.path, err = rawcall.NewPath(path)
	if err == nil {
		var rc syscall.RawConn
		if rc, err = r.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { st.id, err = rawcall.IDOf(int(fd)) })
		}
	}
	if err == nil {
		err = st.Rekeep()
	}
	if err != nil {
		r.Close()
		os.Remove(path)
		return nil, err
	}
	return st, nil
}

// Rekeep opens a new keeper, for a stream used again.
func (st *Stream) Rekeep() (err error) {
	st.Keep, err = openKeeper(st.path, st.Path)
	return err
}

// InPlace reports whether the FIFO is still at its path: false once a
// command removed or moved it (rm -rf or mv of the session's directory),
// when no interpreter can open it by that path any more. Once false, Unlink
// and Close leave the path alone: what is there is not the FIFO, and may be
// another user's (in a directory put where the engine's was).
func (st *Stream) InPlace() bool {
	if st.path.Names(st.id) {
		return true
	}
	st.unlinked = true
	return false
}

// Unlink removes the FIFO's path, once: from then on no interpreter can
// open it (an open that creates makes a plain file there, which the
// embedder's directory goes with), so that once its writers have let go
// the read end sees end-of-file for good. The stream cannot be kept again.
func (st *Stream) Unlink() {
	if !st.unlinked {
		st.unlinked = true
		os.Remove(st.Path)
	}
}

// Close removes the FIFO and closes both ends. A nil Stream is a no-op. The
// path goes first: an interpreter's open of it after the read end's close,
// the path still there, would block for good, with no reader to come. An
// open before the path goes succeeds, and its writes get SIGPIPE once the
// read end is closed: an embedder that may still see the FIFO opened
// removes the path with Unlink, and reads on until end-of-file, before it
// closes.
func (st *Stream) Close() {
	if st != nil {
		st.Unlink()
		st.R.Close()
		st.Keep.Close()
	}
}

// Keeper is a write end held only to be closed: a raw descriptor, with no
// poller registration to pay for. Close is safe from any goroutine, once or
// more.
type Keeper struct{ fd atomic.Int64 }

// openKeeper opens a keeper of the FIFO at p, whose name is path.
func openKeeper(p rawcall.Path, path string) (*Keeper, error) {
	fd, err := p.Open(syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	k := &Keeper{}
	k.fd.Store(int64(fd))
	return k, nil
}

// Close closes the descriptor unless it is closed already. A nil Keeper is
// a no-op.
func (k *Keeper) Close() {
	if k == nil {
		return
	}
	if fd := k.fd.Swap(-1); fd >= 0 {
		rawcall.Close(int(fd))
	}
}
