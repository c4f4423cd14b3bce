package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A PUT's write to disk: atomic, its parents created, and undone whole
// when it fails.

// tempPrefix names the temporary files of writes in progress.
const tempPrefix = ".conch-sandboxd-"

// makeParentsTries bounds how often writeAtomic makes a file's parents
// again when they are removed before its temporary file is created in them.
const makeParentsTries = 3

// errParentRemoved is the error of a write whose directory was removed
// while it wrote (a recursive DELETE, a process in the sandbox): makeParentsTries
// times before its temporary file was created, or once after.
var errParentRemoved = errors.New("the directory was removed during the write")

// errRootMissing is the error of a write while the sandbox root itself is
// missing (a process in the sandbox removed it): the root is never made,
// so a write sent again meets the same, and is not retried.
var errRootMissing = errors.New("the sandbox root does not exist")

// writeAtomic writes src to target with mode: into a new file in target's
// directory (created with its parents as needed), synced, then renamed
// over target. A reader sees the old file or the new one, never a part; a
// failed write leaves target as it was, no temporary file, and none of
// the directories it created that are still empty.
func (s *Server) writeAtomic(target string, src io.Reader, mode os.FileMode) (err error) {
	dir := filepath.Dir(target)
	var created []string
	defer func() {
		if err != nil {
			removeCreated(created)
		}
	}()
	var f *os.File
	for try := 1; ; try++ {
		var made []string
		made, err = makeParents(s.root, dir)
		created = append(created, made...)
		if err == nil {
			if s.parentsMade != nil {
				s.parentsMade(dir)
			}
			f, err = createUnnamed(dir)
		}
		if err == nil {
			break
		}
		// Removed since it was made or seen: made again, as a write
		// that came a moment later would make it.
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, errRootMissing) {
			return err
		}
		if try == makeParentsTries {
			return fmt.Errorf("%w: %w", errParentRemoved, err)
		}
	}
	// The temporary file's name: none while it is unnamed (see
	// createUnnamed).
	tmp := ""
	if f.Name() != dir {
		tmp = f.Name() // the filesystem has no unnamed files
	}
	defer func() {
		if err != nil {
			f.Close()
			if tmp != "" {
				os.Remove(tmp)
			}
		}
	}()
	if err := f.Chmod(mode); err != nil { // exactly mode: the umask does not apply
		return err
	}
	if _, err := io.Copy(f, src); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if tmp == "" {
		if tmp, err = nameUnnamed(f, dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w: %w", errParentRemoved, err)
			}
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The temporary file went with its directory: the body has
			// been read, and cannot be written again.
			return fmt.Errorf("%w: %w", errParentRemoved, err)
		}
		return err
	}
	return nil
}

// createUnnamed creates the temporary file of a write in dir: unnamed
// (O_TMPFILE), so that a daemon killed as it writes leaves nothing behind,
// where a named one stayed for good; named (tempPrefix), as the name of a
// file that is not in dir, when the filesystem has no unnamed files. An
// unnamed file's Name is dir.
func createUnnamed(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_WRONLY|unix.O_TMPFILE|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EINVAL) {
		return os.CreateTemp(dir, tempPrefix+"*")
	}
	return f, err
}

// nameUnnamed gives f, unnamed in dir (see createUnnamed), a temporary name
// there, once it is whole, and returns it: the name stands only between
// the link and the rename over the target.
func nameUnnamed(f *os.File, dir string) (string, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	for {
		name := filepath.Join(dir, tempPrefix+strconv.FormatUint(rand.Uint64(), 36))
		var lerr error
		if err := rc.Control(func(fd uintptr) {
			lerr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
		}); err != nil {
			return "", err
		}
		if errors.Is(lerr, syscall.EEXIST) {
			continue
		}
		if lerr != nil {
			return "", &fs.PathError{Op: "link", Path: name, Err: lerr}
		}
		return name, nil
	}
}

// makeParents makes dir, a path under root, and its parents under root that
// are missing, as os.MkdirAll does, and returns those it made, outermost
// first. A directory that another writer made meanwhile is not one of them.
// root itself is never made: when it is missing, the error is
// errRootMissing.
func makeParents(root, dir string) (made []string, err error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if d == root || !within(root, d) {
			return nil, fmt.Errorf("%w: %w", errRootMissing, err)
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // made by another writer; if it is not a directory, the next step says so
		}
		if err != nil {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// removeCreated removes the directories of made, innermost first, that are
// still empty: what a failed write made, and nothing another writer put
// there since.
func removeCreated(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		_ = os.Remove(made[i]) // not empty, or gone: left as it is
	}
}
