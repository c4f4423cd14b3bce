package localsandbox

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/conchsh/conch/internal/rawpath"
)

// ErrNotRegularFile is wrapped by the error of a file helper given a path
// that is not a regular file (or a symbolic link to one): a directory, a
// FIFO, a socket or a device. A FIFO would block the helper until a
// writer or reader comes, for ever if none does, and a device such as
// /dev/zero never ends; use errors.Is.
var ErrNotRegularFile = errors.New("not a regular file")

// ErrFileTooLarge is wrapped by ReadFile's error for a file larger than
// MaxReadFileSize; use errors.Is.
var ErrFileTooLarge = errors.New("file too large")

// ErrEmptyPath is wrapped by the error of a file helper, or of New, given an
// empty path, which names no file or directory; use errors.Is.
var ErrEmptyPath = errors.New("the path is empty")

// MaxReadFileSize is the most bytes ReadFile and ReadTextFile return: a
// larger file is an error wrapping ErrFileTooLarge, not read into memory.
const MaxReadFileSize = 64 << 20

// resolve returns path, made absolute against the session's directory. It
// does not confine it there: an absolute path, a "..", or a symbolic link
// reaches anywhere the calling user can. It is joined as text, not
// cleaned, so that the kernel resolves it as it would for a command run in
// the directory: "link/../c" is the c beside where link leads, as cat
// link/../c opens, not the one beside link; "missing/../c" and "file/."
// fail as they would there (ENOENT, ENOTDIR); and a final "/", ".", or
// ".." names a directory.
func (s *Session) resolve(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return rawpath.Under(s.dir, path)
}

// openRegular opens the regular file at p with flag, never waiting: a FIFO
// is opened without blocking (O_NONBLOCK) and then refused, as is anything
// else that is not a regular file.
func openRegular(op, p string, flag int) (*os.File, error) {
	// O_NOCTTY: a terminal, refused below, does not become the
	// controlling terminal of a process that leads its session.
	f, err := os.OpenFile(p, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0o644)
	switch {
	case errors.Is(err, syscall.ENXIO):
		// A FIFO opened for writing with no reader, or a socket.
		return nil, fmt.Errorf("%s %s: %w", op, p, ErrNotRegularFile)
	case errors.Is(err, syscall.EISDIR):
		return nil, fmt.Errorf("%s %s: %w (a directory)", op, p, ErrNotRegularFile)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w (%s)", op, p, ErrNotRegularFile, fileKind(fi.Mode()))
	}
	return f, nil
}

// fileKind names what a mode that is not a regular file's is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}

// ReadFile reads the file at path, relative to the session's directory
// unless absolute, as a command run there would open it: the kernel
// resolves path, not cleaned first, so that a ".." after a symbolic link
// goes up from where the link leads. The path is not confined to the
// directory: an absolute path, a "..", or a symbolic link reaches anywhere
// the calling user can.
// A missing file is reported with ok false and a nil error; any other
// failure is an error. Only a regular file is read: a directory, FIFO,
// socket or device is an error wrapping ErrNotRegularFile, and a file
// larger than MaxReadFileSize one wrapping ErrFileTooLarge; neither
// blocks.
func (s *Session) ReadFile(path string) (data []byte, ok bool, err error) {
	if err := s.made(); err != nil {
		return nil, false, err
	}
	if path == "" {
		return nil, false, fmt.Errorf("read: %w", ErrEmptyPath)
	}
	p := s.resolve(path)
	f, err := openRegular("read", p, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	tooLarge := fmt.Errorf("read %s: %w: more than %d bytes (MaxReadFileSize)", p, ErrFileTooLarge, MaxReadFileSize)
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxReadFileSize {
		return nil, false, tooLarge
	}
	// Bounded still: the file may grow as it is read.
	data, err = io.ReadAll(io.LimitReader(f, MaxReadFileSize+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > MaxReadFileSize {
		return nil, false, tooLarge
	}
	return data, true, nil
}

// ReadTextFile is ReadFile returning the bytes as a string, unchanged: bytes
// that are not valid UTF-8 are kept as they are.
func (s *Session) ReadTextFile(path string) (text string, ok bool, err error) {
	data, ok, err := s.ReadFile(path)
	return string(data), ok, err
}

// WriteFile writes data to the file at path, relative to the session's
// directory unless absolute, replacing what it held. Like ReadFile, it does
// not confine the path to the directory, and writes only a regular file: a
// directory, FIFO, socket or device at path, or a path that names a
// directory by its text (ending in "/", "/." or "/.."), is an error
// wrapping ErrNotRegularFile. Missing parent directories are created, as
// mkdir -p makes the path's directory. A new file gets mode 0644 and new directories 0755, less the
// umask.
//
// The file is replaced whole: the data is written to a new file beside it,
// which is then renamed over it, so that a reader, or another WriteFile of
// the same path, never sees part of a write. The new file gets the old
// one's mode and owner, but it is a new file: other hard links to the old
// one, and processes holding it open, keep the old bytes. A symbolic link
// is followed, as opening the path would: the file it points to is
// replaced, or made when missing, and the link stays. Where no file can be
// made beside it (its directory is not writable, or is in /proc), or none
// renamed over it (a file mounted on its own), or its owner cannot be
// kept, the file is written in place instead, truncated first, as before.
// A new file that cannot be made for lack of room (space, inodes or quota,
// descriptors) is an error: truncated first, the file could be left with
// part of the data, or none.
func (s *Session) WriteFile(path string, data []byte) error {
	if err := s.made(); err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("write: %w", ErrEmptyPath)
	}
	p := s.resolve(path)
	if rawpath.NamesDir(p) {
		// A final "/", ".", or "..": only a directory is opened by it, and
		// a file made at the path without it ("sub/" writing sub) is not
		// what it names.
		return fmt.Errorf("write %s: %w (the path ends in /, /. or /..: it names a directory)", path, ErrNotRegularFile)
	}
	// The directory as text: filepath.Dir cleans "link/../c" to the
	// directory of link, where the kernel goes up from where link leads.
	dir, _ := rawpath.Split(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	target, old, err := writeTarget(p)
	if err != nil {
		return err
	}
	if replaced, err := replaceFile(target, old, data); replaced || err != nil {
		return err
	}
	return writeInPlace(p, data)
}

// writeTarget returns the file a write to p replaces, symbolic links
// followed, and what is there now: nil when nothing is. Opening it for
// writing checks, as a write in place would, that it is a regular file
// the caller may write.
func writeTarget(p string) (target string, old fs.FileInfo, err error) {
	f, err := openRegular("write", p, os.O_WRONLY)
	if errors.Is(err, fs.ErrNotExist) {
		li, lerr := os.Lstat(p)
		if lerr != nil || li.Mode()&fs.ModeSymlink == 0 {
			return p, nil, nil // a new file at p
		}
		// A symbolic link to a missing file: made where the link points,
		// as the kernel finds it, and then replaced as any other.
		f, err = openRegular("write", p, os.O_WRONLY|os.O_CREATE)
	}
	if err != nil {
		return "", nil, err
	}
	old, err = f.Stat()
	f.Close()
	if err != nil {
		return "", nil, err
	}
	if target, err = filepath.EvalSymlinks(p); err != nil {
		return "", nil, fmt.Errorf("write %s: %w", p, err)
	}
	return target, old, nil
}

// replaceFile writes data to a new file beside target and renames it over
// target, giving it the mode and owner of old when old is not nil. It
// reports false, with no error, when target should be written in place
// instead: no new file can be made beside it, none renamed over it, or
// old's owner cannot be kept.
func replaceFile(target string, old fs.FileInfo, data []byte) (replaced bool, err error) {
	// Split and joined as text: target, when new, is the path as given,
	// which cleaning could move elsewhere ("link/../c").
	dir, name := rawpath.Split(target)
	// Made with 0644, as a new file in place would be, so that the kernel
	// applies the umask; a hidden name, unlikely to be taken, within the
	// 255 bytes a name may have: with the whole of a name over 221 bytes
	// it was too long, and every write of such a file went in place.
	tmp := rawpath.Under(dir, "."+name[:min(len(name), 200)]+".write-"+rand.Text())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		if outOfRoom(err) {
			// No room for a new file: one written in place, truncated
			// first, could be left with part of the data, or none.
			return false, fmt.Errorf("write %s: %w", target, err)
		}
		return false, nil
	}
	defer func() {
		if !replaced {
			os.Remove(tmp)
		}
	}()
	if old != nil {
		// The owner first: a chown clears the setuid and setgid bits,
		// which the mode then gives back.
		st, ok := old.Sys().(*syscall.Stat_t)
		if ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
			if f.Chown(int(st.Uid), int(st.Gid)) != nil {
				f.Close()
				return false, nil
			}
		}
		if err := f.Chmod(old.Mode()); err != nil {
			f.Close()
			return false, fmt.Errorf("write %s: %w", target, err)
		}
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", target, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) {
			return false, nil // a mount point
		}
		return false, err
	}
	return true, nil
}

// writeInPlace truncates the file at p and writes data into it.
func writeInPlace(p string, data []byte) error {
	f, err := openRegular("write", p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteTextFile is WriteFile with the bytes of text.
func (s *Session) WriteTextFile(path, text string) error {
	return s.WriteFile(path, []byte(text))
}

// outOfRoom reports whether err says that no file could be made for lack of
// room: space, inodes or quota on the file system, descriptors in the
// process or the system, or memory.
func outOfRoom(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
