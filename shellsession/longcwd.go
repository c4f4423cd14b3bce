package shellsession

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/conchsh/conch/sentinel"
	"golang.org/x/sys/unix"
)

// longCwd is lookCwd's way for a directory whose path is longer than
// PATH_MAX, where a stat of $PWD and a readlink of /proc/PID/cwd both fail
// (ENAMETOOLONG) but a stat of /proc/PID/cwd, which follows the link
// without naming the path, does not. It returns reported when $PWD, opened
// one name at a time, is the shell's directory; else the shell's directory,
// named by walking up from it. It fails when neither can be done (a
// directory removed, or one on the way that cannot be read), and with
// errCwdTooLong when the path walked up passes sentinel.MaxCwd.
func longCwd(pid, reported string) (string, error) {
	var there unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/cwd", &there); err != nil {
		return "", err
	}
	if strings.HasPrefix(reported, "/") {
		if at, err := statByNames(reported); err == nil && sameFile(&at, &there) {
			return reported, nil
		}
	}
	return walkUp("/proc/" + pid + "/cwd")
}

// errCwdTooLong says that a directory's path is longer than the engine
// reports (sentinel.MaxCwd).
var errCwdTooLong = errors.New("the directory's path is longer than the engine reports")

// errNotFound says that a directory was not found in its parent.
var errNotFound = errors.New("the directory is not in its parent")

func sameFile(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

// statByNames stats the directory at the absolute path, opening it one
// name at a time, each relative to the last, so that no call sees more
// than one name of it. Symbolic links on the way are followed.
func statByNames(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return st, err
	}
	for name := range strings.SplitSeq(path, "/") {
		if name == "" {
			continue
		}
		next, err := unix.Openat(fd, name, flags, 0)
		unix.Close(fd)
		if err != nil {
			return st, err
		}
		fd = next
	}
	defer unix.Close(fd)
	return st, unix.Fstat(fd, &st)
}

// walkUp names the directory at dir as getcwd(3) once did: from it up to
// the root through "..", finding at each step the entry of the parent that
// is the directory below (by device and inode, a mount point's too). It
// stops with errCwdTooLong once the names found pass sentinel.MaxCwd: a
// command can make its directory as deep as it likes.
func walkUp(dir string) (string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer func() { f.Close() }()
	var names []string
	size := 0
	for {
		var here, up unix.Stat_t
		fd, err := unix.Openat(int(f.Fd()), "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		parent := os.NewFile(uintptr(fd), "..")
		if err := unix.Fstat(int(f.Fd()), &here); err != nil {
			parent.Close()
			return "", err
		}
		if err := unix.Fstat(fd, &up); err != nil {
			parent.Close()
			return "", err
		}
		if sameFile(&here, &up) { // the root
			parent.Close()
			break
		}
		name, err := entryOf(parent, &here)
		f.Close()
		f = parent
		if err != nil {
			return "", err
		}
		if size += 1 + len(name); size > sentinel.MaxCwd {
			return "", errCwdTooLong
		}
		names = append(names, name)
	}
	slices.Reverse(names)
	return "/" + strings.Join(names, "/"), nil
}

// entryOf returns the name of the directory st in the directory dir.
func entryOf(dir *os.File, st *unix.Stat_t) (string, error) {
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		var at unix.Stat_t
		if e.IsDir() && unix.Fstatat(int(dir.Fd()), e.Name(), &at, unix.AT_SYMLINK_NOFOLLOW) == nil && sameFile(&at, st) {
			return e.Name(), nil
		}
	}
	return "", errNotFound
}
