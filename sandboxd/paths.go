package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// errEscapes is the error of a path that resolves outside the root.
var errEscapes = errors.New("path escapes the sandbox root")

// maxLinks bounds the symlinks followed in one path, as the kernel's
// ELOOP does.
const maxLinks = 40

// resolveRoot returns root as an absolute path with its symlinks evaluated:
// the prefix every resolved path must have.
func resolveRoot(root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("sandbox root: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sandbox root: %w", err)
	}
	return real, nil
}

// within reports whether p is root or lies under it.
func within(root, p string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// lexical returns the client's path cleaned, relative to root, as "/a/b"
// ("/" for root itself). An absolute path is taken relative to root, but
// root's own absolute path, or one under it, names what it says. A path
// whose ".." climbs above root is refused with errEscapes.
func lexical(root, userPath string) (string, error) {
	clean := filepath.Clean(userPath)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", userPath, errEscapes)
	}
	abs := filepath.IsAbs(clean)
	clean = filepath.Clean("/" + clean)
	if abs && root != "/" && within(root, clean) {
		clean = "/" + strings.TrimPrefix(clean[len(root):], "/")
	}
	return clean, nil
}

// resolve maps a client's path to a path on disk under root (itself
// resolved, see resolveRoot). The path is cleaned first (see lexical).
// Then it is walked one name at a time from root, following
// every symlink met (dangling ones too, whose target a write or mkdir would
// create): the result holds no symlink in the part that exists, and is
// refused with errEscapes when it lies outside root. The part that does not
// exist yet is kept as named, so a file created there later lands where the
// check saw it.
func resolve(root, userPath string) (string, error) {
	clean, err := lexical(root, userPath)
	if err != nil {
		return "", err
	}
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
