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
// the directories it created that are still empty. The parents are made
// through an os.Root of the root, and the file created, named and renamed
// through one of its directory (see beneath.go).
func (s *Server) writeAtomic(target string, src io.Reader, mode os.FileMode) (err error) {
	b, err := s.beneath()
	if err != nil {
		return err
	}
	defer b.Close()
	dir, name := filepath.Dir(target), filepath.Base(target)
	var created []string
	defer func() {
		if err != nil {
			removeCreated(b, created)
		}
	}()
	var d *os.Root // dir
	var f *os.File
	// The temporary file's name in dir: none while it is unnamed (see
	// createUnnamed).
	tmp := ""
	for try := 1; ; try++ {
		var made []string
		made, err = makeParents(b, dir)
		created = append(created, made...)
		if err == nil {
			if s.parentsMade != nil {
				s.parentsMade(dir)
			}
			if d, err = b.OpenRoot(dir); err == nil {
				if f, tmp, err = createUnnamed(d, s.namedTemporary); err != nil {
					d.Close()
				}
			}
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
	defer d.Close()
	defer func() {
		if err != nil {
			f.Close()
			if tmp != "" {
				_ = d.Remove(tmp)
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
		if tmp, err = nameUnnamed(f, d, dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w: %w", errParentRemoved, err)
			}
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := d.Rename(tmp, name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The temporary file went with its directory: the body has
			// been read, and cannot be written again.
			return fmt.Errorf("%w: %w", errParentRemoved, err)
		}
		return err
	}
	return nil
}

// createUnnamed creates the temporary file of a write in the directory d:
// unnamed (O_TMPFILE), so that a daemon killed as it writes leaves nothing
// behind, where a named one stayed for good; named (tempPrefix), as the
// name of a file that is not in the directory, when the filesystem has no
// unnamed files. It returns the file and its name in the directory, none
// for an unnamed one. With named, it is named whatever the filesystem has.
func createUnnamed(d *os.Root, named bool) (*os.File, string, error) {
	if !named {
		f, err := d.OpenFile(".", os.O_WRONLY|unix.O_TMPFILE, 0o600)
		if err == nil {
			return f, "", nil
		}
		if !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.EISDIR) && !errors.Is(err, syscall.EINVAL) {
			return nil, "", err
		}
	}
	for {
		name := tempPrefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return f, name, nil
	}
}

// nameUnnamed gives f, unnamed in the directory d (see createUnnamed), a
// temporary name there, once it is whole, and returns it: the name stands
// only between the link and the rename over the target. dir is the
// directory's path, for errors.
//
// os.Root links only a name to a name: the file, which has none, is named
// with linkat of its descriptor through the daemon's own /proc (the one
// magic link followed, to a file it holds), into a descriptor of d.
func nameUnnamed(f *os.File, d *os.Root, dir string) (string, error) {
	df, err := d.Open(".")
	if err != nil {
		return "", err
	}
	defer df.Close()
	drc, err := df.SyscallConn()
	if err != nil {
		return "", err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	for {
		name := tempPrefix + strconv.FormatUint(rand.Uint64(), 36)
		var lerr, ferr error
		if err := drc.Control(func(dfd uintptr) {
			ferr = rc.Control(func(fd uintptr) {
				lerr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), int(dfd), name, unix.AT_SYMLINK_FOLLOW)
			})
		}); err != nil {
			return "", err
		}
		if ferr != nil {
			return "", ferr
		}
		if errors.Is(lerr, syscall.EEXIST) {
			continue
		}
		if lerr != nil {
			return "", &fs.PathError{Op: "link", Path: filepath.Join(dir, name), Err: lerr}
		}
		return name, nil
	}
}

// makeParents makes dir, a path under the root that resolve returned, and
// its parents under the root that are missing, as os.MkdirAll does, and
// returns those it made, outermost first. A directory that another writer
// made meanwhile is not one of them. The root itself is never made: when
// it is missing, the error is errRootMissing. Each is looked at, and
// made, through b.
func makeParents(b *beneath, dir string) (made []string, err error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := b.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if d == b.root || !within(b.root, d) {
			return nil, fmt.Errorf("%w: %w", errRootMissing, err)
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := b.Mkdir(missing[i], 0o755)
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
func removeCreated(b *beneath, made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		_ = b.Remove(made[i]) // not empty, or gone: left as it is
	}
}
