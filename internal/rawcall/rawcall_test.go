package rawcall

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nonblockingPipe returns a pipe whose read end is a raw non-blocking
// descriptor and whose write end is an *os.File in the runtime's poller.
func nonblockingPipe(t *testing.T) (int, *os.File) {
	t.Helper()
	var p [2]int
	require.NoError(t, syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC))
	w := os.NewFile(uintptr(p[1]), "pipe")
	t.Cleanup(func() {
		syscall.Close(p[0])
		w.Close()
	})
	return p[0], w
}

func TestReadWrite(t *testing.T) {
	r, w := nonblockingPipe(t)
	buf := make([]byte, 16)
	_, err := Read(r, buf)
	require.Equal(t, syscall.EAGAIN, err, "an empty non-blocking pipe")

	rc, err := w.SyscallConn()
	require.NoError(t, err)
	var n int
	require.NoError(t, rc.Control(func(fd uintptr) { n, err = Write(int(fd), []byte("abc")) }))
	require.NoError(t, err)
	require.Equal(t, 3, n)

	n, err = Read(r, buf)
	require.NoError(t, err)
	require.Equal(t, "abc", string(buf[:n]))

	require.NoError(t, w.Close())
	n, err = Read(r, buf)
	require.NoError(t, err)
	require.Zero(t, n, "end-of-file once the writer closed")

	_, err = Read(-1, buf)
	require.Equal(t, syscall.EBADF, err)
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")

	require.NoError(t, WriteFile(path, []byte("hello, world"), 0o600))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	require.NoError(t, WriteFile(path, []byte("bye"), 0o600))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "bye", string(got), "a longer file is truncated")

	fd, err := Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	n, err := Pwrite(fd, []byte("ABCDEF"), 2)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	buf := make([]byte, 16)
	n, err = Pread(fd, buf, 1)
	require.NoError(t, err)
	require.Equal(t, "yABCDEF", string(buf[:n]))
	require.NoError(t, WriteAt(fd, []byte("xyz"), 9))
	n, err = Pread(fd, buf, 0)
	require.NoError(t, err)
	require.Equal(t, "byABCDEF\x00xyz", string(buf[:n]), "written past the end, with a hole")
	require.NoError(t, Ftruncate(fd, 4))
	n, err = Pread(fd, buf, 0)
	require.NoError(t, err)
	require.Equal(t, "byAB", string(buf[:n]))
	require.NoError(t, Close(fd))
	require.Equal(t, syscall.EBADF, Close(fd), "closed already")

	require.NoError(t, Unlink(path))
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorIs(t, Unlink(path), os.ErrNotExist)
	_, err = Open(path, syscall.O_RDONLY, 0)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorIs(t, WriteFile(filepath.Join(dir, "no", "such"), nil, 0o600), os.ErrNotExist)
	_, err = Open("a\x00b", syscall.O_RDONLY, 0)
	require.Error(t, err, "a path with a NUL")
}

// WriteExisting writes over the start of a file that is there, as a
// kernel's file takes a value, and neither creates one nor truncates it.
func TestWriteExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.ErrorIs(t, WriteExisting(path, []byte("500")), os.ErrNotExist)
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "a missing file is not made")
	require.NoError(t, os.WriteFile(path, []byte("hello"), 0o600))
	require.NoError(t, WriteExisting(path, []byte("HE")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "HEllo", string(got), "not truncated")

	// A process's oom_score_adj, raised as the daemon raises a child's.
	cmd := exec.Command("sleep", "10")
	require.NoError(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	adj := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/oom_score_adj"
	require.NoError(t, WriteExisting(adj, []byte("500")))
	got, err = os.ReadFile(adj)
	require.NoError(t, err)
	require.Equal(t, "500\n", string(got))
}

// A FIFO opened for writing without a reader fails at once rather than
// waiting for one, and opens once there is a reader.
func TestOpenFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, err := Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	require.Equal(t, syscall.ENXIO, err)
	r, err := Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer Close(r)
	w, err := Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, Close(w))
}

func TestEpollPoll(t *testing.T) {
	r, w := nonblockingPipe(t)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(ep)
	require.NoError(t, unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, r, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 7}))
	events := make([]unix.EpollEvent, 4)
	n, err := EpollPoll(ep, events)
	require.NoError(t, err)
	require.Zero(t, n, "nothing ready, and no wait")
	_, err = w.Write([]byte("x"))
	require.NoError(t, err)
	n, err = EpollPoll(ep, events)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int32(7), events[0].Fd)
	n, err = EpollPoll(ep, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = EpollPoll(-1, events)
	require.Equal(t, syscall.EBADF, err)
}

// A Writer writes all it is given, waiting while the pipe is full, in
// order; and fails when nobody reads any more.
func TestWriter(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	defer pw.Close()
	rc, err := pw.SyscallConn()
	require.NoError(t, err)
	w := NewWriter(rc)

	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: many pipes full
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(pr, int64(len(want))))
		got <- b
	}()
	n, err := w.Write(want)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	select {
	case b := <-got:
		require.True(t, bytes.Equal(want, b), "the bytes read are the bytes written, in order")
	case <-time.After(time.Minute):
		t.Fatal("the reader did not get every byte")
	}

	require.NoError(t, pr.Close())
	_, err = w.Write([]byte("more"))
	require.Equal(t, syscall.EPIPE, err, "the reader is gone")
	require.NoError(t, pw.Close())
	_, err = w.Write([]byte("more"))
	require.Error(t, err, "the file is closed")
}

// A Reader waits until there is something to read, returns what there
// is, and io.EOF once every writer closed.
func TestReader(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	rc, err := pr.SyscallConn()
	require.NoError(t, err)
	r := NewReader(rc)
	n, err := r.Read(nil)
	require.NoError(t, err)
	require.Zero(t, n)

	go func() {
		time.Sleep(10 * time.Millisecond) // the read waits first, most often
		pw.Write([]byte("one"))
		pw.Close()
	}()
	buf := make([]byte, 16)
	n, err = r.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "one", string(buf[:n]))
	n, err = r.Read(buf)
	require.Equal(t, io.EOF, err)
	require.Zero(t, n)

	require.NoError(t, pr.Close())
	_, err = r.Read(buf)
	require.Error(t, err, "the file is closed")
	require.NotEqual(t, io.EOF, err)
}

// A File rewrites and reads its file with raw calls; the zero File holds
// no descriptor, and closing it closes none (not descriptor 0).
func TestFile(t *testing.T) {
	var zero File
	require.False(t, zero.IsOpen())
	_, err := zero.ReadAt(make([]byte, 4), 0)
	require.Equal(t, syscall.EBADF, err)
	require.Equal(t, syscall.EBADF, zero.WriteAt([]byte("x"), 0))
	require.Equal(t, syscall.EBADF, zero.Truncate(0))
	var before unix.Stat_t
	stdin := unix.Fstat(0, &before) == nil
	zero.Close()
	if stdin {
		require.NoError(t, unix.Fstat(0, &before), "descriptor 0 is still open")
	}

	path := filepath.Join(t.TempDir(), "f")
	_, err = OpenFile(path, syscall.O_RDWR, 0)
	require.ErrorIs(t, err, os.ErrNotExist)
	f, err := OpenFile(path, syscall.O_RDWR|syscall.O_CREAT, 0o600)
	require.NoError(t, err)
	require.True(t, f.IsOpen())
	require.NoError(t, f.WriteAt([]byte("a longer text"), 0))
	require.NoError(t, f.WriteAt([]byte("short"), 0))
	require.NoError(t, f.Truncate(5))
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, "short", string(buf[:n]))
	f.Close()
	require.False(t, f.IsOpen())
	f.Close() // twice: nothing
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "short", string(got))
}

// TestCreateFile: CreateFile writes a new file in place of whatever is at
// its path, a file or a symbolic link, and never writes through the link.
func TestCreateFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("precious"), 0o600))
	path := filepath.Join(dir, "f")
	require.NoError(t, os.Symlink(target, path))
	require.NoError(t, CreateFile(path, []byte("one"), 0o600))
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "precious", string(b))
	require.NoError(t, CreateFile(path, []byte("two"), 0o600))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
}

func TestLinksTo(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "l")
	require.NoError(t, os.Symlink("/a/b", link))
	p, err := NewPath(link)
	require.NoError(t, err)
	require.True(t, p.LinksTo("/a/b"))
	for _, other := range []string{"/a/b/", "/a/bc", "/a/", "", strings.Repeat("/a", 3000)} {
		require.False(t, p.LinksTo(other), other)
	}
	f, err := NewPath(dir)
	require.NoError(t, err)
	require.False(t, f.LinksTo(dir), "not a link")
	self, err := NewPath("/proc/self/cwd")
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.True(t, self.LinksTo(wd), "a process's directory")
}
