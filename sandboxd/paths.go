package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"

	"github.com/conchsh/conch/process"
)

// errEscapes is the error of a path that resolves outside the root.
var errEscapes = errors.New("path escapes the sandbox root")

// pathMax is the longest path on disk the file API takes, in bytes:
// PATH_MAX less the NUL that ends it, as the kernel takes a path in one
// call (resolve looks each name up by its absolute path).
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

// lexical returns the client's path cleaned, relative to the root, as
// "/a/b" ("/" for the root itself). An absolute path is taken relative to
// the root, but one that begins with an absolute path of the root (its
// real one, or the one it was configured as) names what it says: the rest
// is relative to the root. A path whose ".." climbs above the root is
// refused with errEscapes, the root's own absolute path followed by ".."
// too. The names are read before any ".." is applied: cleaned first, such
// a path lost its climb (/.. is /) or came out under no root's name, and
// was then taken as a path under the root.
func (s *Server) lexical(userPath string) (string, error) {
	names := split(userPath)
	if filepath.IsAbs(userPath) {
		names = s.underRoot(names)
	}
	clean := make([]string, 0, len(names))
	for _, name := range names {
		if name != ".." {
			clean = append(clean, name)
			continue
		}
		if len(clean) == 0 {
			return "", fmt.Errorf("%q: %w", userPath, errEscapes)
		}
		clean = clean[:len(clean)-1]
	}
	return "/" + strings.Join(clean, "/"), nil
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
// path, see resolveRoot). The path is cleaned first (see lexical).
// Then it is walked one name at a time from the root, following
// every symlink met (dangling ones too, whose target a write or mkdir would
// create): the result holds no symlink in the part that exists, and is
// refused with errEscapes when it lies outside the root. The part that does
// not exist yet is kept as named, so a file created there later lands where
// the check saw it.
func (s *Server) resolve(userPath string) (string, error) {
	clean, err := s.lexical(userPath)
	if err != nil {
		return "", err
	}
	return walk(s.root, clean, userPath)
}

// walk is resolve of clean, a path lexical made of the client's userPath
// (which errors name): relative to root whatever it says, and never made
// so again. (Given to resolve, the parent of a path lexical had made
// relative, say /workspace/src's /workspace under that root, would be
// taken for the root's own absolute path.)
func walk(root, clean, userPath string) (string, error) {
	cur := root
	parts := split(clean)
	links := 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if name == ".." { // only from a link's target: cur is a real directory
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			// Nothing more to follow; an operation on it fails as it should.
			cur = next
			continue
		case err != nil:
			return "", fmt.Errorf("resolve %q: %w", userPath, err)
		case fi.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("resolve %q: %w", userPath, syscall.ELOOP)
		}
		target, err := os.Readlink(next)
		if errors.Is(err, syscall.EINVAL) {
			// No longer a link: something swapped it since the Lstat.
			return "", fmt.Errorf("resolve %q: %w", userPath, errChanged)
		}
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", userPath, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		parts = append(split(target), parts...)
	}
	if !within(root, cur) {
		return "", fmt.Errorf("%q: %w", userPath, errEscapes)
	}
	return cur, nil
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
		return pathFault{http.StatusBadRequest, codeInvalidArgument, codes.InvalidArgument, fmt.Sprintf("path %q is too long: %s", p, tooLong(p))}
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

// tooLong says which limit the client's path p, refused ENAMETOOLONG, is
// over: a name over NAME_MAX, else the whole path on disk (the sandbox
// root's path before it, and what its symlinks lead to) over PATH_MAX,
// which a path under 4096 bytes as sent can be.
func tooLong(p string) string {
	for _, name := range split(p) {
		if len(name) > 255 {
			return fmt.Sprintf("a name in it is %d bytes, over 255 (NAME_MAX)", len(name))
		}
	}
	return "the path on disk, with the sandbox root's path before it, is over 4095 bytes (PATH_MAX)"
}
