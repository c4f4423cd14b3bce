package shellsession

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestLateOpenOfDiscardedStream: a given-up command's streams are discarded
// once the reader sees end-of-file on them, but the shell may still open
// one by its path to write the command's end line, which it held and runs
// late. An open that lands between that end-of-file and the discard must
// not leave the shell writing into a FIFO with no reader (SIGPIPE would kill
// it): the stream is read on, what comes discarded, until that writer lets
// go, then closed, and the session runs its next commands as before.
//
// The open comes as the reader is about to discard the first of the two
// streams; the write, and the close, as it is about to discard the second:
// after the first's discard, and together, as the shell's quick end line
// writes and closes, before the reader looks again.
func TestLateOpenOfDiscardedStream(t *testing.T) {
	const text = "echo kept; __conch=x" // bash's frame guard changed: the end is given up
	type late struct {
		path    string
		id      fileID
		openErr error
		removed bool // the path was gone by the write
		wrote   error
	}
	got := make(chan late, 1)
	var l late
	var f *os.File
	discardingAtEOF = func(c *Command, st *stream) {
		if c.text != text {
			return
		}
		// Only the reader of the command's streams calls it.
		if f == nil && l.openErr == nil {
			// As the shell's open for its end line would land.
			l.path = st.Path
			f, l.openErr = os.OpenFile(st.Path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if fi, err := st.R.Stat(); err == nil {
				l.id = idOf(fi.Sys().(*syscall.Stat_t))
			}
			return
		}
		if f != nil {
			_, err := os.Lstat(l.path)
			l.removed = errors.Is(err, fs.ErrNotExist)
			_, l.wrote = f.Write([]byte("a late end line\n"))
			f.Close()
			f = nil
			got <- l
		}
	}
	defer func() { discardingAtEOF = nil }()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	res, stdout, _ := run(t, s, CommandOptions{Cmd: text})
	require.Equal(t, process.Failed, res.Reason, "%+v", res)
	require.Equal(t, "kept\n", stdout)

	select {
	case l = <-got:
	case <-time.After(deadline):
		t.Fatal("the given-up command's streams were not both discarded at end-of-file")
	}
	require.NoError(t, l.openErr)
	require.NotZero(t, l.id)
	require.True(t, l.removed, "the first stream's path is still there")
	require.NoError(t, l.wrote, "the shell's write would have died of SIGPIPE")

	expectRun(t, s, "echo next; (exit 3)", 3, "next\n")
	expectRun(t, s, "echo after", 0, "after\n")
	// Its writer gone, the stream is closed: no descriptor of it is left.
	require.Eventually(t, func() bool { return !holds(t, l.id) }, deadline, time.Millisecond,
		"the stream a late writer opened is never closed")
}

// fileID tells a file apart from every other.
type fileID struct{ dev, ino uint64 }

func idOf(st *syscall.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// holds reports whether this process has a descriptor open on the file id.
func holds(t *testing.T, id fileID) bool {
	fds, err := filepath.Glob("/proc/self/fd/*")
	require.NoError(t, err)
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Stat(fd, &st) == nil && idOf(&st) == id {
			return true
		}
	}
	return false
}
