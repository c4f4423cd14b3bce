package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/conchsh/conch/internal/rawpath"
	"github.com/conchsh/conch/process"
)

// errEscapes is the error of a path that resolves outside the root.
var errEscapes = errors.New("path escapes the sandbox root")

// pathMax is the longest path the file API takes, in bytes, as the
// client sent it: PATH_MAX less the NUL that ends it, as the kernel takes
// a path in one call. What the path is on disk, under the root's path and
// what its symlinks lead to, is not counted: resolve and the operations
// look a name up at a time, each beneath the directory before it.
const pathMax = 4095

// maxLinks bounds the symlinks followed in one path, as the kernel's
// ELOOP does.
const maxLinks = 40

// resolveRoot returns root as an absolute path (named, as configured) and
// with its symlinks evaluated (real: the prefix every resolved path must
// have).
func resolveRoot(root string) (named, real string, err error) {
	named, err = filepath.Abs(root)
	if err != nil {
		return "", "", fmt.Errorf("sandbox root: %w", err)
	}
	real, err = filepath.EvalSymlinks(named)
	if err != nil {
		return "", "", fmt.Errorf("sandbox root: %w", err)
	}
	return named, real, nil
}

// within reports whether p is root or lies under it.
func within(root, p string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// lexical returns the client's path relative to the root, as "/a/b" ("/"
// for the root itself), its names as given: only empty ones and "." are
// left out, and a ".." is kept for walk to take as the kernel does. An
// absolute path is taken relative to the root, but one that begins with
// an absolute path of the root (its real one, or the one it was configured
// as) names what it says: the rest is relative to the root. A path whose
// ".." climbs above the root by its text is refused with errEscapes, the
// root's own absolute path followed by ".." too (cleaned first, such a path
// lost its climb, /.. being /, or came out under no root's name, and was
// then taken as a path under the root); and one longer than pathMax with
// ENAMETOOLONG, as the kernel refuses it.
func (s *Server) lexical(userPath string) (string, error) {
	switch {
	case strings.ContainsRune(userPath, 0):
		// As package os refuses it, before its length: a NUL, which no
		// path the kernel takes holds, is what is wrong with it.
		return "", &fs.PathError{Op: "resolve", Path: userPath, Err: syscall.EINVAL}
	case len(userPath) > pathMax:
		return "", &fs.PathError{Op: "resolve", Path: userPath, Err: syscall.ENAMETOOLONG}
	}
	names := split(userPath)
	if filepath.IsAbs(userPath) {
		names = s.underRoot(names)
	}
	depth := 0
	for _, name := range names {
		if name != ".." {
			depth++
			continue
		}
		if depth == 0 {
			return "", fmt.Errorf("%q: %w", userPath, errEscapes)
		}
		depth--
	}
	return "/" + strings.Join(names, "/"), nil
}

// underRoot returns the names of an absolute path less those of the
// longest absolute path of the root they begin with: what is left is
// relative to the root. A path that begins with none is relative to the
// root whole.
func (s *Server) underRoot(names []string) []string {
	matched := -1
	for _, root := range s.rootNames {
		r := split(root)
		if len(r) > matched && len(r) <= len(names) && slices.Equal(r, names[:len(r)]) {
			matched = len(r)
		}
	}
	if matched < 0 {
		return names
	}
	return names[matched:]
}

// resolve maps a client's path to a path on disk under the root (its real
// path, see resolveRoot): see lexical, then walk.
func (s *Server) resolve(userPath string) (string, error) {
	rel, err := s.lexical(userPath)
	if err != nil {
		return "", err
	}
	return s.walk(rel, userPath)
}

// walk resolves rel, a path lexical made of the client's userPath (which
// errors name), from the root, whatever it says (given to resolve, the parent
// of a path lexical had made relative, say /workspace/src's /workspace
// under that root, would be taken for the root's own absolute path again).
//
// It is walked as the kernel walks a path, one name at a time, each looked
// up in the directory before it (open as a descriptor, so that how long
// the path is on disk does not matter), following every symlink met
// (dangling ones too, whose target a write or mkdir would create): a ".."
// goes up from where the names before it lead, a link's target included,
// and fails after a name that is missing (ENOENT) or not a directory
// (ENOTDIR), as the kernel fails it; a path cleaned first went on from the
// name before, and plain/../x named x. The result holds no symlink in the
// part that exists, and is refused with errEscapes when it lies outside
// the root. The part that does not exist yet is kept as named, so a file
// created there later lands where the check saw it; a name after a file
// is refused ENOTDIR. A name removed while it is walked is missing, as
// one that was never there (ENOENT); one that became something else than
// what it was looked at as is errChanged.
func (s *Server) walk(rel, userPath string) (string, error) {
	root := s.root
	cur := root
	// fail is the walk's error, err; one met outside the root, where a link
	// led, is errEscapes, as the path it was walking is: which names exist
	// out there, and what they are, is not the client's to learn (a 404 or
	// a 400 told it).
	fail := func(err error) (string, error) {
		if !within(root, cur) {
			return "", fmt.Errorf("%q: %w", userPath, errEscapes)
		}
		return "", fmt.Errorf("resolve %q: %w", userPath, err)
	}
	const dirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// dir is cur, open, while cur is a directory that exists; once it is
	// not, dir is -1 and gone says why (ENOENT or ENOTDIR).
	var gone error
	dir, err := unix.Open(root, dirFlags, 0)
	if err == syscall.ENOENT {
		// The root itself is missing (a process in the sandbox removed
		// it): the operation says so.
		dir, gone = -1, err
	} else if err != nil {
		return fail(err)
	}
	defer func() {
		if dir >= 0 {
			unix.Close(dir)
		}
	}()
	leave := func(why error) {
		unix.Close(dir)
		dir, gone = -1, why
	}
	parts := split(rel)
	links := 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if dir < 0 {
			if name == ".." || gone != syscall.ENOENT {
				return fail(gone)
			}
			// Nothing more to follow; an operation on it fails as it
			// should, or a write makes it.
			cur = rawpath.Under(cur, name)
			continue
		}
		if name == ".." {
			up, err := unix.Openat(dir, "..", dirFlags, 0)
			if err != nil {
				return fail(err)
			}
			unix.Close(dir)
			dir, cur = up, filepath.Dir(cur) // cur holds no link: its .. is its parent
			continue
		}
		next := rawpath.Under(cur, name)
		var st unix.Stat_t
		err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == syscall.ENOENT:
			leave(syscall.ENOENT)
			cur = next
			continue
		case err != nil:
			return fail(err)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			if s.looked != nil {
				s.looked(next)
			}
			sub, err := unix.Openat(dir, name, dirFlags, 0)
			if err == syscall.ENOENT {
				// Removed since the look: missing, as for a name that
				// was not there.
				leave(syscall.ENOENT)
				cur = next
				continue
			}
			if err == syscall.ENOTDIR || err == syscall.ELOOP {
				// No longer a directory: something swapped it since the
				// look.
				return fail(errChanged)
			}
			if err != nil {
				return fail(err)
			}
			unix.Close(dir)
			dir, cur = sub, next
			continue
		case st.Mode&unix.S_IFMT != unix.S_IFLNK:
			leave(syscall.ENOTDIR)
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return fail(syscall.ELOOP)
		}
		target, err := readlinkat(dir, name)
		if err == syscall.ENOENT {
			// Removed since the look: missing.
			leave(syscall.ENOENT)
			cur = next
			continue
		}
		if err == syscall.EINVAL {
			// No longer a link: something swapped it since the look.
			return fail(errChanged)
		}
		if err != nil {
			return fail(err)
		}
		if filepath.IsAbs(target) {
			top, err := unix.Open("/", dirFlags, 0)
			if err != nil {
				return fail(err)
			}
			unix.Close(dir)
			dir, cur = top, "/"
		}
		parts = append(split(target), parts...)
	}
	if !within(root, cur) {
		return "", fmt.Errorf("%q: %w", userPath, errEscapes)
	}
	return cur, nil
}

// readlinkat is readlinkat(2) of name in the directory dirfd: the target
// of the symlink there, which is less than PATH_MAX long.
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, pathMax+1)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// split returns the names of p, without empty ones and ".".
func split(p string) []string {
	var out []string
	for name := range strings.SplitSeq(p, "/") {
		if name != "" && name != "." {
			out = append(out, name)
		}
	}
	return out
}

// pathFault is how both surfaces answer a client's path that cannot be
// used: REST with status and code, gRPC with grpc, each saying msg. One
// classification, so that a path refused 400 over REST is not INTERNAL as
// a cwd over gRPC.
type pathFault struct {
	status int    // REST's HTTP status
	code   string // REST's error code
	grpc   codes.Code
	msg    string
}

// classifyPath is the pathFault of err, met in an operation on the
// client's path p.
func classifyPath(p string, err error) pathFault {
	switch {
	case errors.Is(err, errEscapes):
		return pathFault{http.StatusForbidden, codePermissionDenied, codes.PermissionDenied, fmt.Sprintf("path %q is outside the sandbox root", p)}
	case errors.Is(err, errChanged):
		return pathFault{http.StatusConflict, codeConflict, codes.Aborted, fmt.Sprintf("path %q changed while it was used (something swapped a directory and a symlink on it): send the request again", p)}
	case errors.Is(err, fs.ErrNotExist):
		return pathFault{http.StatusNotFound, codeNotFound, codes.NotFound, fmt.Sprintf("path %q does not exist in the sandbox", p)}
	case errors.Is(err, fs.ErrPermission):
		return pathFault{http.StatusForbidden, codePermissionDenied, codes.PermissionDenied, fmt.Sprintf("permission denied: %q", p)}
	case errors.Is(err, syscall.ENOTDIR):
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, fmt.Sprintf("a parent of %q is not a directory", p)}
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		return pathFault{http.StatusConflict, codeConflict, codes.FailedPrecondition, fmt.Sprintf("directory %q is not empty: pass recursive=true to remove it", p)}
	case errors.Is(err, syscall.ENXIO):
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, fmt.Sprintf("%q is a special file (a socket): it cannot be read", p)}
	case errors.Is(err, syscall.ELOOP):
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, fmt.Sprintf("path %q: too many levels of symbolic links", p)}
	case errors.Is(err, syscall.ENAMETOOLONG):
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, tooLong(p, err)}
	case strings.ContainsRune(p, 0):
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, fmt.Sprintf("path %q holds a NUL byte", p)}
	case process.OutOfFiles(err):
		// Said without err, which names the path on disk.
		return pathFault{http.StatusTooManyRequests, codeResourceExhausted, codes.ResourceExhausted,
			fmt.Sprintf("%q could not be opened: %s, then retry", "/"+strings.TrimPrefix(p, "/"), process.OutOfFilesWhy(err))}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// Said of the client's path and the errno alone: err names the
		// write's temporary file, on disk.
		errno := syscall.ENOSPC
		if errors.Is(err, syscall.EDQUOT) {
			errno = syscall.EDQUOT
		}
		return pathFault{http.StatusInsufficientStorage, codeResourceExhausted, codes.ResourceExhausted,
			fmt.Sprintf("no room to write %q (%v): the file system of the sandbox root is full, of bytes or of inodes, or at a quota: free some room there, then send the request again", p, errno)}
	}
	return pathFault{http.StatusInternalServerError, codeInternal, codes.Internal, err.Error()}
}

// tooLong is the message of the client's path p, refused ENAMETOOLONG
// (err): which limit it is over. A name over NAME_MAX, else the whole path
// as sent over PATH_MAX, else (a process's working directory, which the
// kernel is given whole) the path on disk, with the sandbox root's path
// before it and what its symlinks lead to, which err names: that one is
// said with its length and what to do instead, p and it with their middle
// left out, so that a status bounded to maxMessage keeps the advice.
func tooLong(p string, err error) string {
	for _, name := range split(p) {
		if len(name) > 255 {
			return fmt.Sprintf("path %q is too long: a name in it is %d bytes, over 255 (NAME_MAX)", p, len(name))
		}
	}
	if len(p) > pathMax {
		return fmt.Sprintf("path %q is too long: it is %d bytes, over %d (PATH_MAX)", p, len(p), pathMax)
	}
	onDisk := "its path on disk, with the sandbox root's path before it, is"
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && len(pe.Path) > pathMax {
		onDisk = fmt.Sprintf("its path on disk, %q, is %d bytes,", shortPath(pe.Path), len(pe.Path))
	}
	return fmt.Sprintf("path %q is too long: %s over %d (PATH_MAX), longer than the kernel takes for a process's working directory: "+
		"name a directory with a shorter path under the sandbox root, or start the process in a directory above it and have it cd there by a relative path",
		shortPath(p), onDisk, pathMax)
}

// shortPath is p, a path a message quotes, with its middle left out when
// it is over 200 bytes: its start and its end say which path it is.
func shortPath(p string) string {
	if len(p) <= 200 {
		return p
	}
	return cutMiddle(p, 200)
}
