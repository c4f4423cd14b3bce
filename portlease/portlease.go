// Package portlease reserves loopback TCP ports for their holders, so that
// two processes on one machine are never handed the same port: each lease is
// an advisory lock on a file in a shared directory, which the kernel drops
// when the holding process exits, however it exits.
package portlease

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// leaseTries bounds how many candidate ports Acquire tries before giving up.
const leaseTries = 128

// ErrNoFreePort is wrapped by Acquire's error when none of the ports it
// tried could be leased: they were leased already, bound by something else,
// or something other than a lock file was at their lock paths. Another try
// may work once some leases are released.
var ErrNoFreePort = errors.New("no free port")

// ErrLockDir is wrapped by Acquire's error when the lease directory cannot
// be used by this process: it is no directory, or this user may not write
// it. No port can be leased until someone changes that.
var ErrLockDir = errors.New("the port lease directory cannot be used")

// Dir returns the directory holding one lock file per leased port:
// /tmp/conch-ports. Every process on the machine that leases ports through
// this package uses it, whichever user runs it and whatever its TMPDIR, so
// it is created world-writable with the sticky bit, like /tmp itself. It
// does not follow TMPDIR: two processes with different TMPDIRs (a CI job's,
// a user's) would not see each other's leases and could be handed the same
// port. Only where /tmp cannot hold it (no /tmp/conch-ports, and /tmp is
// not a directory this process can write) is it "conch-ports" under
// os.TempDir, shared with the processes that fall back to the same one.
func Dir() string {
	if fi, err := os.Stat(sharedDir); err == nil && fi.IsDir() {
		return sharedDir
	}
	if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() && syscall.Access("/tmp", 3) == nil { // W_OK|X_OK
		return sharedDir
	}
	return filepath.Join(os.TempDir(), "conch-ports")
}

// sharedDir is the machine's lease directory (see Dir).
const sharedDir = "/tmp/conch-ports"

// Lease is one loopback port reserved for its holder. The reservation is
// an advisory lock that other processes leasing through this package respect;
// nothing is bound to the port, so a program that ignores the locks can
// still take it.
type Lease struct {
	port int
	path string

	mu   sync.Mutex // guards lock
	lock *os.File   // the locked file; nil once released
}

// holding keeps every lease not yet released reachable. An *os.File that
// nothing refers to is closed by its finalizer, which drops its lock: a
// lease its holder dropped without Release ended at the next garbage
// collection, and another process could be handed the port its holder
// still meant to bind.
var holding sync.Map // *Lease → struct{}

// Acquire reserves a free TCP port on 127.0.0.1 until Release is called or
// the process exits. No other lease through this package, in this process or
// any other on the machine, is handed the same port while it is held; the
// port was free to bind when it was leased. A Lease dropped without Release
// stays held until the process exits, as a lock held by a file descriptor
// would.
func Acquire() (*Lease, error) {
	return acquire(Dir(), anyLoopbackPort)
}

// Port returns the leased port number, 0 for a nil Lease.
func (l *Lease) Port() int {
	if l == nil {
		return 0
	}
	return l.port
}

// Release gives the port back. It is idempotent and safe for concurrent
// use, and does nothing for a nil Lease (what a failed Acquire returns), so
// that it may be deferred before Acquire's error is looked at.
func (l *Lease) Release() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock == nil {
		return nil
	}
	// Unlink while still holding the lock: a process that opened the file
	// before this notices that the path is gone once it gets the lock, and
	// tries again rather than locking an orphaned inode (see lockPort). A
	// file owned by another user cannot be unlinked in the sticky directory;
	// leaving it is harmless.
	_ = os.Remove(l.path)
	err := l.lock.Close()
	l.lock = nil
	holding.Delete(l)
	if err != nil {
		return fmt.Errorf("release port %d: %w", l.port, err)
	}
	return nil
}

// Held reports whether the lease of port in dir is held, by this process or
// any other.
func Held(dir string, port int) (bool, error) {
	l, err := lockPort(dir, port)
	if err != nil || l == nil {
		return err == nil, err
	}
	return false, l.Release()
}

// anyLoopbackPort is the candidate source of Acquire: a port the kernel
// picks, held bound while it is being locked.
func anyLoopbackPort(int) (net.Listener, error) {
	return net.Listen("tcp", "127.0.0.1:0")
}

// leasePort takes candidates from candidate, each bound to a listener so
// that no other process can bind it meanwhile, until one can be locked in
// dir. The listener is closed once the lock is held: the lease reserves the
// number, it does not occupy the port.
func acquire(dir string, candidate func(try int) (net.Listener, error)) (*Lease, error) {
	if err := makeLockDir(dir); err != nil {
		return nil, fmt.Errorf("lease port: %w: %w", ErrLockDir, err)
	}
	var lastErr error
	for try := range leaseTries {
		ln, err := candidate(try)
		if err != nil {
			lastErr = err // taken by something outside this package
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		lease, err := lockPort(dir, port)
		ln.Close()
		if err != nil {
			// This port's lock path cannot be locked: something else is
			// there (a directory, a FIFO, a file of another user's that
			// cannot be opened), which any user of the shared directory
			// can put there. Another port may do.
			lastErr = err
			continue
		}
		if lease != nil {
			return lease, nil
		}
	}
	if lastErr == nil {
		// Every candidate was leased: the error of no try says why, and
		// "(last: <nil>)" told the caller nothing.
		return nil, fmt.Errorf("lease port: %w in %d tries: each port tried is leased already (locks in %s); release the leases no longer needed, or end the processes holding them", ErrNoFreePort, leaseTries, dir)
	}
	return nil, fmt.Errorf("lease port: %w in %d tries (last: %w)", ErrNoFreePort, leaseTries, lastErr)
}

// lockPort takes the lock of port in dir without waiting. It returns a nil
// lease and no error when another holder has it.
func lockPort(dir string, port int) (*Lease, error) {
	path := filepath.Join(dir, strconv.Itoa(port)+".lock")
	for {
		f, err := openLockFile(path)
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil // a link someone put there: not ours to take
		}
		if err != nil {
			return nil, err
		}
		// flock locks belong to the open file description, so a second
		// lease in this same process conflicts just as another process's
		// does; Go opens files close-on-exec, so no child inherits it.
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// The previous holder may have unlinked the file between our open
		// and our lock; then the lock is on an inode nobody else will find.
		if sameFile(f, path) {
			l := &Lease{port: port, path: path, lock: f}
			holding.Store(l, struct{}{})
			return l, nil
		}
		f.Close()
	}
}

// openLockFile opens path for locking, creating it if need be, and returns
// it only when it is a regular file. A file another user created is not
// writable by us, but a read-only descriptor is enough for flock. A
// symbolic link there is never followed (ELOOP): in a directory every user
// writes to, it could make this process create a file wherever the link
// points. Nothing else another user may put there is taken for a lock file
// either, and no open waits: opening a FIFO for reading waits for a writer,
// for ever if none comes, so every open is non-blocking (and O_NOCTTY, so
// that no terminal becomes this process's), and what it opened is checked
// to be a regular file before it is used. The file is never read or
// written, whatever its size.
func openLockFile(path string) (*os.File, error) {
	const flags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flags, 0o666)
	if errors.Is(err, fs.ErrPermission) {
		var readErr error
		f, readErr = os.OpenFile(path, os.O_RDONLY|flags, 0)
		switch {
		case readErr == nil:
			err = nil
		case !errors.Is(readErr, fs.ErrNotExist):
			err = readErr
		}
		// A file that is not there was not created: the refusal to
		// create it says why, its absence does not.
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("lock file %s is no regular file (mode %v): something else made it", path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// makeLockDir creates dir world-writable and sticky, so that users share it
// but only remove their own files. A dir that is there already must be one
// this process can make lock files in: else every port would fail alike,
// and the error of the last would hide why.
func makeLockDir(dir string) error {
	err := os.Mkdir(dir, 0o777)
	if errors.Is(err, fs.ErrExist) {
		fi, serr := os.Stat(dir)
		if serr != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		if err := syscall.Access(dir, 3); err != nil { // W_OK|X_OK
			owner := "?"
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				owner = strconv.FormatUint(uint64(st.Uid), 10)
			}
			return fmt.Errorf("%s (owner uid %s, mode %v) is not writable by uid %d (%w): its owner or root must make it world-writable and sticky (chmod 1777), or remove it",
				dir, owner, fi.Mode(), os.Geteuid(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return os.Chmod(dir, 0o777|fs.ModeSticky) // Mkdir's mode is cut by the umask
}
