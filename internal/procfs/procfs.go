// Package procfs reads the files, directories and links of /proc with as
// few system calls as they allow: an open, reads until end-of-file and a
// close. os.ReadFile makes about three times as many of a /proc file: it
// sets the descriptor non-blocking, offers it to the runtime's poller,
// which refuses it, sets it back, asks for its size, which /proc does not
// give, and so reads it in pieces from 512 bytes; os.ReadDir the same
// before its reads. A look at a process tree or a scan of every process
// reads hundreds of them.
//
// The calls go through golang.org/x/sys/unix, which tells the Go scheduler
// (not internal/rawcall): a read of a process's environment or memory takes
// its memory map's lock, which can be held for long, and a thread waiting
// there must let the runtime run its goroutines on another.
//
// Errors are the calls' syscall.Errno values, which errors.Is matches
// against fs.ErrNotExist and fs.ErrPermission.
package procfs

import (
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ReadFile appends what the file at path holds to buf and returns it.
func ReadFile(path string, buf []byte) ([]byte, error) {
	fd, err := open(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return buf, err
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, cap(buf)))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == unix.EINTR:
		case err != nil:
			return buf, err
		case n == 0:
			return buf, nil
		default:
			buf = buf[:len(buf)+n]
		}
	}
}

// dirBufs are the buffers directories are read into.
var dirBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// ReadDir returns the names in the directory at path, "." and ".." left
// out, in the order the kernel gives them.
func ReadDir(path string) ([]string, error) {
	fd, err := open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	bp := dirBufs.Get().(*[]byte)
	defer dirBufs.Put(bp)
	var names []string
	for {
		n, err := unix.Getdents(fd, *bp)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return names, err
		case n <= 0:
			return names, nil
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
}

// Readlink returns the target of the link at path.
func Readlink(path string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlink(path, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

func open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Cwd returns this process's working directory as os.Getwd does, or, when
// that directory was removed (getcwd fails), the path it had (see CwdOf),
// with removed true. A process started with no directory of its own
// starts in it all the same.
func Cwd() (dir string, removed bool, err error) {
	dir, err = os.Getwd()
	if err == nil {
		return dir, false, nil
	}
	if d, removed, lerr := CwdOf("self"); lerr == nil && removed {
		return d, true, nil
	}
	return "", false, err
}

// CwdOf returns the working directory of process pid ("self": this one)
// as /proc/PID/cwd names it, and whether it was removed, as the kernel says
// by " (deleted)" after its path, which dir leaves out.
func CwdOf(pid string) (dir string, removed bool, err error) {
	link, err := Readlink("/proc/" + pid + "/cwd")
	if err != nil {
		return "", false, err
	}
	dir, removed = strings.CutSuffix(link, " (deleted)")
	return dir, removed, nil
}
