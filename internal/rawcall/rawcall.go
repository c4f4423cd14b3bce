// Package rawcall makes system calls that return at once without telling
// the Go scheduler: reads and writes of non-blocking descriptors, preads
// of /proc, writes to the small files of a session's directory, opens of
// FIFOs with O_NONBLOCK, closes, epoll waits that do not wait.
//
// A call through package syscall marks its goroutine as in a system call
// for the call's length. That costs little by itself, but the first such
// call after the whole process was idle (as it is each time it waits for a
// shell) wakes the runtime's monitor thread, which then looks at the
// scheduler every 20 µs until the process is idle again: for a session,
// one more thread woken one or more times for every command, as much as a
// fifth of the engine's CPU on a small machine. A call made raw leaves the
// monitor asleep.
//
// Only calls that return at once belong here. One that waited would hold
// its thread's P, and the goroutines queued on it, until it returned; the
// runtime could not hand the P to another thread meanwhile.
package rawcall

import (
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func errno(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func ptr(p []byte) uintptr {
	if len(p) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&p[0]))
}

// Read reads from fd, which must not wait: a non-blocking descriptor, or
// a file of /proc or of a memory file system.
func Read(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), ptr(p), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Write writes p to fd, which must not wait (see Read); a non-blocking
// descriptor may take fewer bytes than p holds, or none (EAGAIN).
func Write(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), ptr(p), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Pread reads from fd at off.
func Pread(fd int, p []byte, off int64) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(fd), ptr(p), uintptr(len(p)), uintptr(off), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Pwrite writes p to fd at off.
func Pwrite(fd int, p []byte, off int64) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, uintptr(fd), ptr(p), uintptr(len(p)), uintptr(off), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// WriteAt writes all of p to fd at off, in as many calls as it takes.
func WriteAt(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := Pwrite(fd, p, off)
		if err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Ftruncate sets the size of the file at fd.
func Ftruncate(fd int, size int64) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_FTRUNCATE, uintptr(fd), uintptr(size), 0)
	return errno(e)
}

// Close closes fd.
func Close(fd int) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0)
	return errno(e)
}

// atFDCWD is AT_FDCWD as the call takes it: a variable, since the constant
// is negative.
var atFDCWD = unix.AT_FDCWD

// Open opens path (relative to the working directory) with flags and,
// when it creates the file, mode. A FIFO must be opened with O_NONBLOCK.
func Open(path string, flags int, mode uint32) (int, error) {
	p, err := NewPath(path)
	if err != nil {
		return -1, err
	}
	return p.Open(flags, mode)
}

// Path is a file name in the form the kernel takes, made once for a file
// opened again and again.
type Path struct{ p *byte }

// NewPath makes path's Path. It fails when path holds a NUL byte.
func NewPath(path string) (Path, error) {
	p, err := syscall.BytePtrFromString(path)
	return Path{p}, err
}

// Open is the package's Open of the file at p.
func (p Path) Open(flags int, mode uint32) (int, error) {
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p.p)), uintptr(flags), uintptr(mode), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// Unlink removes the file at path.
func Unlink(path string) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_UNLINKAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), 0)
	return errno(e)
}

// WriteFile writes data to the file at path, creating it with mode perm
// or truncating it (as os.WriteFile does), in a memory file system.
func WriteFile(path string, data []byte, perm uint32) error {
	fd, err := Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	return writeAndClose(fd, data)
}

// WriteExisting writes data at the start of the file at path, which it
// neither creates nor truncates: a file of the kernel's, in /proc or a
// cgroup, written as a value. A path that is not there fails (ENOENT). On
// a new process's /proc entry, opened without O_CREAT and O_TRUNC, the
// call took 1.2-1.8 µs (10-13%) less than WriteFile's.
func WriteExisting(path string, data []byte) error {
	fd, err := Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return writeAndClose(fd, data)
}

// writeAndClose writes data at the start of the file open at fd, and
// closes it.
func writeAndClose(fd int, data []byte) error {
	err := WriteAt(fd, data, 0)
	if cerr := Close(fd); err == nil {
		err = cerr
	}
	return err
}

// EpollPoll fills events with what is ready on the epoll set epfd now,
// without waiting, and returns how many it filled.
func EpollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// EpollWait fills events with what is ready on the epoll set epfd, waiting
// up to msec milliseconds until something is, and returns how many it
// filled. The thread blocks in the call without the runtime's knowledge,
// its processor held: only for waits of a millisecond or so.
func EpollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Writer writes to a non-blocking descriptor raw, waiting in the
// runtime's poller only when the descriptor is full. It is not safe for
// concurrent use.
type Writer struct {
	rc  syscall.RawConn
	p   []byte
	err error
	fn  func(uintptr) bool // w.once, made once: a closure per call would be an allocation
}

// NewWriter returns a Writer to the descriptor of rc, which must be in the
// runtime's poller (an *os.File of a pipe or socket made non-blocking).
func NewWriter(rc syscall.RawConn) *Writer {
	w := &Writer{rc: rc}
	w.fn = w.once
	return w
}

// Write writes all of p, or fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.p, w.err = p, nil
	for len(w.p) > 0 && w.err == nil {
		if err := w.rc.Write(w.fn); w.err == nil {
			w.err = err
		}
	}
	n, err := len(p)-len(w.p), w.err
	w.p, w.err = nil, nil
	return n, err
}

func (w *Writer) once(fd uintptr) bool {
	n, err := Write(int(fd), w.p)
	if err == syscall.EAGAIN {
		return false // full: the poller waits, then calls again
	}
	if err == syscall.EINTR {
		return true // the loop in Write calls again
	}
	w.p, w.err = w.p[n:], err
	return true
}

// Reader reads from a non-blocking descriptor raw, waiting in the
// runtime's poller only when there is nothing to read. It is not safe for
// concurrent use.
type Reader struct {
	rc  syscall.RawConn
	p   []byte
	n   int
	err error
	fn  func(uintptr) bool // r.once, made once
	// mu and seen, when set, are ReadSeen's.
	mu   sync.Locker
	seen func([]byte)
}

// NewReader returns a Reader of the descriptor of rc, which must be in the
// runtime's poller (see NewWriter).
func NewReader(rc syscall.RawConn) *Reader {
	r := &Reader{rc: rc}
	r.fn = r.once
	return r
}

// Read reads into p what there is, waiting until there is something; at
// end-of-file it returns io.EOF.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	n, rerr := r.n, r.err
	r.p, r.err = nil, nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *Reader) once(fd uintptr) bool {
	if r.mu != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	for {
		r.n, r.err = Read(int(fd), r.p)
		switch r.err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			r.err = nil
			return false // nothing yet: the poller waits, then calls again
		}
		if r.n > 0 && r.seen != nil {
			r.seen(r.p[:r.n])
		}
		return true
	}
}

// ReadSeen reads as Read does, and calls seen with what it read, each
// read's system call and that call made with mu held, which the wait for
// something to read is not: one who holds mu meanwhile knows that what the
// descriptor received and no longer holds was seen.
func (r *Reader) ReadSeen(p []byte, mu sync.Locker, seen func([]byte)) (int, error) {
	r.mu, r.seen = mu, seen
	defer func() { r.mu, r.seen = nil, nil }()
	return r.Read(p)
}

// CreateFile writes data to a new file at path, made with mode perm, in
// place of whatever was there: a file, or a symbolic link, which is never
// followed.
func CreateFile(path string, data []byte, perm uint32) error {
	p, err := NewPath(path)
	if err != nil {
		return err
	}
	const flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := p.Open(flags, perm)
	if err == syscall.EEXIST {
		Unlink(path)
		fd, err = p.Open(flags, perm)
	}
	if err != nil {
		return err
	}
	return writeAndClose(fd, data)
}

// File is a descriptor kept open for raw calls: a small file of /proc, of
// a cgroup or of a session's directory, read or rewritten around each
// command. The zero File is not open: it reads and writes nothing (EBADF),
// and closing it closes no descriptor. Close is not safe beside the other
// calls; its owner serializes them.
type File struct {
	fd   int
	open bool
	id   ID // the file it opened, at name
	name Path
}

// OpenFile opens the file at path with flags (O_CLOEXEC added) and, when
// it creates the file, mode.
func OpenFile(path string, flags int, mode uint32) (File, error) {
	name, err := NewPath(path)
	if err != nil {
		return File{}, err
	}
	fd, err := name.Open(flags|syscall.O_CLOEXEC, mode)
	if err != nil {
		return File{}, err
	}
	id, err := IDOf(fd)
	if err != nil {
		Close(fd)
		return File{}, err
	}
	return File{fd: fd, open: true, id: id, name: name}, nil
}

// IsOpen reports whether f holds a descriptor.
func (f File) IsOpen() bool { return f.open }

// ReadAt reads at off with one call: a file of /proc or of a cgroup is
// made anew by each read from offset 0.
func (f File) ReadAt(p []byte, off int64) (int, error) {
	if !f.open {
		return 0, syscall.EBADF
	}
	return Pread(f.fd, p, off)
}

// WriteAt writes all of p at off.
func (f File) WriteAt(p []byte, off int64) error {
	if !f.open {
		return syscall.EBADF
	}
	return WriteAt(f.fd, p, off)
}

// Truncate sets the file's size.
func (f File) Truncate(size int64) error {
	if !f.open {
		return syscall.EBADF
	}
	return Ftruncate(f.fd, size)
}

// InPlace reports whether the file f holds is still the one at the path
// it was opened by, and its size: false once it was removed or moved (or
// when f is not open).
func (f File) InPlace() (size int64, ok bool) {
	if !f.open {
		return 0, false
	}
	st, ok := f.name.stat()
	return st.Size, ok && f.id.of(&st)
}

// ID tells a file apart from every other: its device and inode.
type ID struct{ dev, ino uint64 }

// of reports whether st is the file id.
func (id ID) of(st *syscall.Stat_t) bool { return st.Dev == id.dev && st.Ino == id.ino }

// IDOf returns the ID of the file open at fd: one fstat.
func IDOf(fd int) (ID, error) {
	var st syscall.Stat_t
	_, _, e := syscall.RawSyscall(syscall.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(&st)), 0)
	if e != 0 {
		return ID{}, e
	}
	return ID{st.Dev, st.Ino}, nil
}

// Names reports whether p names the file id: one stat, which does not
// follow a last symbolic link. A file removed or moved while open (a
// command ran rm -rf or mv on its directory) keeps its data for whoever
// holds it, but no one can open it by its path any more, or opens another.
func (p Path) Names(id ID) bool {
	st, ok := p.stat()
	return ok && id.of(&st)
}

// ID returns the ID of the file p names, following a last symbolic link
// (stat(2)), and whether there is one.
func (p Path) ID() (ID, bool) {
	var st syscall.Stat_t
	_, _, e := syscall.RawSyscall6(syscall.SYS_NEWFSTATAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p.p)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
	return ID{st.Dev, st.Ino}, e == 0
}

// LinksTo reports whether p is a symbolic link whose target is target:
// one readlink(2). A target longer than PATH_MAX is never one.
func (p Path) LinksTo(target string) bool {
	var buf [4096]byte
	if len(target) == 0 || len(target) >= len(buf) {
		return false
	}
	n, _, e := syscall.RawSyscall6(syscall.SYS_READLINKAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p.p)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	return e == 0 && int(n) == len(target) && string(buf[:n]) == target
}

// stat is lstat(2) of p, and whether it succeeded.
func (p Path) stat() (syscall.Stat_t, bool) {
	var st syscall.Stat_t
	_, _, e := syscall.RawSyscall6(syscall.SYS_NEWFSTATAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p.p)), uintptr(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	return st, e == 0
}

// Close closes the descriptor, if f holds one; f is the zero File after.
func (f *File) Close() {
	if f.open {
		Close(f.fd)
		*f = File{}
	}
}

// Unread returns the bytes a pipe or FIFO holds that its reader has not
// read yet (FIONREAD, which is TIOCINQ, on either end; f must be one of a
// pipe's); zero when f is closed.
func Unread(f *os.File) int64 {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	if rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil || err != nil {
		return 0
	}
	return int64(n)
}

// Keep opens another read end of the pipe or FIFO that f is an end of,
// through f's /proc/self/fd link (not the FIFO's path, which may name
// another file by now), for Unread to ask once f is closed: a reader that
// never reads, which neither takes bytes nor changes the end-of-file of
// the pipe's other readers. nil when it cannot be opened.
func Keep(f *os.File) *os.File {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	kept := -1
	if rc.Control(func(fd uintptr) {
		kept, err = Open("/proc/self/fd/"+strconv.Itoa(int(fd)), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	}) != nil || err != nil {
		return nil
	}
	return os.NewFile(uintptr(kept), "")
}
