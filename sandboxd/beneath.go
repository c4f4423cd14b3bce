package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Every operation of the file API is made through an os.Root of the
// sandbox root, opened for the request, on the path resolve returned made
// relative to it. os.Root opens the path a name at a time, each relative
// to the descriptor of the directory before it, follows a symlink it
// meets only while the link stays beneath the root, and refuses one that
// leads out. A process in the sandbox that swaps a directory of the path
// for a symlink between the check and the operation can make the operation
// act where the link points beneath the root, never outside it: a link
// that leads out makes the operation fail (errChanged), where it was made
// wherever the link pointed.

// errChanged is the error of an operation on a path that changed since it
// was resolved: a process in the sandbox swapped a directory on it for a
// symlink that leads out of the root (or a symlink for something else
// while resolve read it).
var errChanged = errors.New("the path changed while it was used: a directory and a symlink on it were swapped")

// errRootEscapes is the error os.Root answers for a path that leads out of
// it, which package os does not export: the one its Stat of ".." answers
// (nil when "/" cannot be opened).
var errRootEscapes = sync.OnceValue(func() error {
	r, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer r.Close()
	_, err = r.Stat("..")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return nil
})

// beneath is the sandbox root opened as an os.Root for one request. Its
// methods take a path resolve returned, absolute and under the root, and
// are os.Root's of that path relative to the root; an error of one that
// left the root is errChanged.
type beneath struct {
	r    *os.Root
	root string // Server.root
}

// beneath opens the root as a beneath. When the root is missing, the
// error is errRootMissing.
func (s *Server) beneath() (*beneath, error) {
	r, err := os.OpenRoot(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", errRootMissing, err)
	}
	if err != nil {
		return nil, err
	}
	return &beneath{r: r, root: s.root}, nil
}

func (b *beneath) Close() error { return b.r.Close() }

// rel returns target relative to the root ("." for the root itself).
func (b *beneath) rel(target string) (string, error) {
	if !within(b.root, target) {
		return "", fmt.Errorf("%q: %w", target, errEscapes)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(target, b.root), "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// changed returns err, of an os.Root operation, with the path it names
// absolute, and wrapped in errChanged when the operation left the root or
// met a loop of links: the path resolve walked, which held no symlink,
// has one swapped onto it since.
func (b *beneath) changed(err error) error {
	if err == nil {
		return nil
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		pe.Path = filepath.Join(b.root, pe.Path)
	}
	if esc := errRootEscapes(); (esc != nil && errors.Is(err, esc)) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("%w (%w)", errChanged, err)
	}
	return err
}

// Stat is os.Root's Stat of target: a symlink followed beneath the root.
func (b *beneath) Stat(target string) (fs.FileInfo, error) {
	rel, err := b.rel(target)
	if err != nil {
		return nil, err
	}
	fi, err := b.r.Stat(rel)
	return fi, b.changed(err)
}

// Lstat is os.Root's Lstat of target: a symlink at its end not followed.
func (b *beneath) Lstat(target string) (fs.FileInfo, error) {
	rel, err := b.rel(target)
	if err != nil {
		return nil, err
	}
	fi, err := b.r.Lstat(rel)
	return fi, b.changed(err)
}

// OpenFile is os.Root's OpenFile of target.
func (b *beneath) OpenFile(target string, flag int, perm fs.FileMode) (*os.File, error) {
	rel, err := b.rel(target)
	if err != nil {
		return nil, err
	}
	f, err := b.r.OpenFile(rel, flag, perm)
	return f, b.changed(err)
}

// OpenRoot is os.Root's OpenRoot of target, a directory: what is opened
// through it stays beneath target.
func (b *beneath) OpenRoot(target string) (*os.Root, error) {
	rel, err := b.rel(target)
	if err != nil {
		return nil, err
	}
	r, err := b.r.OpenRoot(rel)
	return r, b.changed(err)
}

// Mkdir is os.Root's Mkdir of target.
func (b *beneath) Mkdir(target string, perm fs.FileMode) error {
	rel, err := b.rel(target)
	if err != nil {
		return err
	}
	return b.changed(b.r.Mkdir(rel, perm))
}

// Remove is os.Root's Remove of target, a file or an empty directory (a
// symlink at its end removed, not followed).
func (b *beneath) Remove(target string) error {
	rel, err := b.rel(target)
	if err != nil {
		return err
	}
	return b.changed(b.r.Remove(rel))
}

// RemoveAll is os.Root's RemoveAll of target, again, a few times, while
// something writing there adds entries as it goes (ENOTEMPTY). A symlink
// met in it is removed, never followed.
func (b *beneath) RemoveAll(target string) error {
	rel, err := b.rel(target)
	if err != nil {
		return err
	}
	for range 3 {
		if err = b.r.RemoveAll(rel); !errors.Is(err, syscall.ENOTEMPTY) {
			break
		}
	}
	return b.changed(err)
}
