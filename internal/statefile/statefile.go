// Package statefile writes the files of a user's conch state directory
// that no other user may read (the token, the daemon's endpoint and
// instance records), reads them back without waiting, and makes the
// directory private.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MakeDir makes dir, with its parents, readable by the user only; a dir
// that was made before with access for others (a 0755 one, say, made under
// another umask) is narrowed to 0700, so that what is in it, the token's
// name included, is the user's alone. It fails when dir is not a directory
// or cannot be narrowed (another user's).
func MakeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make the state directory %s private (it is %v): %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}

// Write replaces the file at path with data, whole or not at all, readable
// by the user only: data goes to path.tmp, then takes path's name. The
// temporary file is always made new: a leftover one (of a start that
// failed, or put there) is removed first, since a file opened to be
// truncated keeps its mode, and a symbolic link there would be followed.
func Write(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) // else left for good
	}
	return err
}

// MaxSize bounds what Read reads of a state file; each is a few hundred
// bytes at most.
const MaxSize = 64 << 10

// Read returns the bytes of the state file at path, never waiting and
// never reading much: anything else found at its name (a FIFO, which
// opened as usual would wait for a writer for ever, a directory, a device),
// which any command the daemon runs as its user can put there, is
// refused, and so is a file larger than MaxSize.
func Read(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO returns at once, to be refused below.
	// O_NOCTTY: a terminal opened does not become the controlling
	// terminal of a daemon that leads its session (as in a container),
	// whose hangup would stop it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	// One byte past the bound tells a file that grew since its Stat.
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err == nil && len(b) > MaxSize {
		err = fmt.Errorf("%s is larger than a state file can be (%d bytes)", path, MaxSize)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}
