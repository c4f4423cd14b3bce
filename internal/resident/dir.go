package resident

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Dir is a private directory of a session or context: its FIFOs, its
// files, the files the shell or interpreter reads its commands from. It is
// made in a base directory, the daemon's instance directory
// (/dev/shm/conch-N) or another an embedder named, which lies in a
// directory every user may write (/dev/shm, the temp directory). A command
// may remove the base (rm -rf /dev/shm/conch-*) and another user make a
// directory of their own, or a symbolic link, at its name before the
// engine makes it anew; whoever owns the directory the engine works in can
// rename its files and put their own text where the shell sources its
// commands. So the engine makes its directories only in a base no other
// user can change (see usableBase) and uses a directory only as it made it
// (see ownDir):
// when what is at the base's name is not the engine's, it is left alone,
// never followed nor removed, and a new base is made beside it under a
// name no one can know in advance (see baseFor).
type Dir struct {
	base, pattern string
	mu            sync.Mutex
	path          string // guarded by mu
}

// NewDir makes a new directory in base, as os.MkdirTemp does, in base or
// in the directory used in its place (see baseFor); a missing base is made.
func NewDir(base, pattern string) (*Dir, error) {
	base = filepath.Clean(base) // its path's parent is base, for Remake
	in, err := baseFor(base)
	if err != nil {
		return nil, err
	}
	path, err := os.MkdirTemp(in, pattern)
	if err != nil {
		return nil, err
	}
	return &Dir{base: base, pattern: pattern, path: path}, nil
}

// Path returns the directory's path, which Remake may change.
func (d *Dir) Path() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.path
}

// Remake makes the directory anew if it was removed or something else was
// put in its place, as a command may do: a symbolic link or a file there is
// removed, never followed. It returns the directory's path, and whether
// that changed: when its base is no longer the engine's own, or another
// user's directory is at its name, the directory is made under a new name
// (see NewDir), and whatever names the old path must not be used again.
// Where the directory is as the engine made it, Remake costs one lstat.
func (d *Dir) Remake() (path string, moved bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := os.Lstat(d.path)
	if err == nil && ownDir(fi) {
		return d.path, false, nil
	}
	in, err := baseFor(d.base)
	if err != nil {
		return d.path, false, err
	}
	if in == filepath.Dir(d.path) {
		// The base is the engine's own, so whatever is at the name was put
		// there by the engine's user: a link or a file goes. A directory
		// stays, made anew under another name.
		if fi, err := os.Lstat(d.path); err == nil && !fi.IsDir() {
			os.Remove(d.path)
		}
		err := os.Mkdir(d.path, 0o700)
		if err == nil {
			return d.path, false, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return d.path, false, err
		}
	}
	path, err = os.MkdirTemp(in, d.pattern)
	if err != nil {
		return d.path, false, err
	}
	d.path = path
	return path, true, nil
}

// Remove removes the directory and what is in it, if it is still the one
// the engine made: a directory another user put at its name is left alone.
func (d *Dir) Remove() {
	d.mu.Lock()
	defer d.mu.Unlock()
	RemoveOwn(d.path)
}

// RemoveOwn removes the directory at path and what is in it if it is a
// directory of the engine's own as it made it (see ownDir); anything else
// there, another user's directory or a symbolic link, is left alone.
func RemoveOwn(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !ownDir(fi) {
		return &os.PathError{Op: "remove", Path: path, Err: errNotOwn}
	}
	return os.RemoveAll(path)
}

// errNotOwn says that a directory is not one the engine made.
var errNotOwn = errors.New("not a directory of this user's with no access for others")

// bases maps each base that a caller named and that was found not to be
// the engine's own to the directory made in its place, which every session
// and context of the process then shares.
var bases struct {
	sync.Mutex
	in map[string]string
}

// baseFor returns the directory to make directories in for base: base
// itself when no other user can change it (see usableBase), made when
// missing; else the directory made in its place, beside it, named base-N
// by os.MkdirTemp, made the first time and again when it is gone.
func baseFor(base string) (string, error) {
	bases.Lock()
	defer bases.Unlock()
	if in, ok := bases.in[base]; ok {
		if fi, err := os.Lstat(in); err == nil && ownDir(fi) {
			return in, nil
		}
		delete(bases.in, base)
	}
	fi, err := os.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
			return "", err
		}
		if err = os.Mkdir(base, 0o700); err == nil {
			return base, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		fi, err = os.Lstat(base) // another's, made in between
	}
	if err != nil {
		return "", err
	}
	if usableBase(fi) {
		return base, nil
	}
	in, err := os.MkdirTemp(filepath.Dir(base), filepath.Base(base)+"-")
	if err != nil {
		return "", &os.PathError{Op: "make directory in place of", Path: base, Err: err}
	}
	if bases.in == nil {
		bases.in = map[string]string{}
	}
	bases.in[base] = in
	return in, nil
}

// ownDir reports whether fi, of an lstat, is a directory as the engine
// makes its own: a directory, not a symbolic link, owned by the process's
// effective user, with no access for group or others.
func ownDir(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.IsDir() && int(st.Uid) == os.Geteuid() && fi.Mode().Perm()&0o077 == 0
}

// usableBase reports whether fi, of an lstat, is a directory the engine may
// make its directories in: a directory, not a symbolic link, owned by the
// engine's user or by root, which no other user may write (a 0755 one), or
// in which no other user can rename or remove what the engine made there,
// a shared one with the sticky bit (/dev/shm, /tmp). Read access for others
// does no harm: what the engine makes in it is its own and closed to them.
func usableBase(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.IsDir() && (int(st.Uid) == os.Geteuid() || st.Uid == 0) &&
		(fi.Mode().Perm()&0o022 == 0 || fi.Mode()&fs.ModeSticky != 0)
}
