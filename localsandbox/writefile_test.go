package localsandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFileWhole: WriteFile replaces a file whole. Two writers of one
// path leave one's bytes or the other's, never the short one over the head
// of the long one (which truncating and writing in place left, 46 rounds in
// 200), and a reader meanwhile sees one file written whole.
func TestWriteFileWhole(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	long := bytes.Repeat([]byte("L"), 100000)
	short := bytes.Repeat([]byte("s"), 10)
	require.NoError(t, s.WriteFile("f", short))
	for round := range 200 {
		var wg sync.WaitGroup
		var readErr error
		var torn []byte
		wg.Go(func() { require.NoError(t, s.WriteFile("f", long)) })
		wg.Go(func() { require.NoError(t, s.WriteFile("f", short)) })
		wg.Go(func() {
			for range 5 {
				got, ok, err := s.ReadFile("f")
				switch {
				case err != nil || !ok:
					readErr = err
				case !bytes.Equal(got, long) && !bytes.Equal(got, short):
					torn = got
				}
			}
		})
		wg.Wait()
		require.NoError(t, readErr)
		require.Nil(t, torn, "round %d: a reader saw %d bytes, neither write", round, len(torn))
		got, err := os.ReadFile(filepath.Join(s.Dir(), "f"))
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, long) || bytes.Equal(got, short), "round %d: %d bytes, neither write", round, len(got))
	}
	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left: %v", entries)
}

// TestWriteFileReplacesLongNames: a file whose name takes nearly all of the
// 255 bytes a name may have is replaced whole, a new file renamed over it,
// as any other. The new file's name held the whole of it: past 221 bytes
// that was too long, and every write went in place, readers seeing part.
func TestWriteFileReplacesLongNames(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	name := strings.Repeat("n", 255)
	require.NoError(t, s.WriteFile(name, []byte("old")))
	before, err := os.Stat(filepath.Join(s.Dir(), name))
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(name, []byte("new")))
	after, err := os.Stat(filepath.Join(s.Dir(), name))
	require.NoError(t, err)
	require.False(t, os.SameFile(before, after), "the file was written in place, not replaced")
	got, err := os.ReadFile(filepath.Join(s.Dir(), name))
	require.NoError(t, err)
	require.Equal(t, "new", string(got))
	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left: %v", entries)
}

// TestWriteFileKeepsWhatItReplaces: the file written over keeps its mode
// and owner, and a symbolic link is written through, as opening the path
// would: the file it points to is replaced (or made), the link stays.
func TestWriteFileKeepsWhatItReplaces(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	dir := s.Dir()
	exe := filepath.Join(dir, "run.sh")
	require.NoError(t, os.WriteFile(exe, []byte("old"), 0o755))
	require.NoError(t, os.Chmod(exe, 0o750)) // not what the umask would give
	require.NoError(t, s.WriteFile("run.sh", []byte("#!/bin/sh\n")))
	fi, err := os.Stat(exe)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode())

	if os.Geteuid() == 0 {
		owned := filepath.Join(dir, "owned")
		require.NoError(t, os.WriteFile(owned, nil, 0o644))
		require.NoError(t, os.Chown(owned, 65534, 65534))
		// Set after the chown, which clears them; the new file's chown
		// cleared them too, before its mode was set after it.
		require.NoError(t, syscall.Chmod(owned, 0o6755))
		require.NoError(t, s.WriteFile("owned", []byte("x")))
		fi, err := os.Stat(owned)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.EqualValues(t, 65534, st.Uid)
		require.EqualValues(t, 65534, st.Gid)
		require.Equal(t, os.FileMode(0o755)|os.ModeSetuid|os.ModeSetgid, fi.Mode(), "setuid and setgid kept")
	}

	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "link")))
	require.NoError(t, s.WriteFile("link", []byte("through the link")))
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "through the link", string(got))
	li, err := os.Lstat(filepath.Join(dir, "link"))
	require.NoError(t, err)
	require.NotZero(t, li.Mode()&os.ModeSymlink, "the link is still a link")
	fi, err = os.Stat(target)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode())

	// A relative link, to a file not there yet, in a directory reached
	// through another link.
	require.NoError(t, os.Mkdir(filepath.Join(outside, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "sub"), filepath.Join(dir, "sublink")))
	require.NoError(t, os.Symlink("../made", filepath.Join(outside, "sub", "dangling")))
	require.NoError(t, s.WriteFile("sublink/dangling", []byte("made")))
	got, err = os.ReadFile(filepath.Join(outside, "made"))
	require.NoError(t, err)
	require.Equal(t, "made", string(got))
	li, err = os.Lstat(filepath.Join(outside, "sub", "dangling"))
	require.NoError(t, err)
	require.NotZero(t, li.Mode()&os.ModeSymlink, "the dangling link is a link still")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 3, "no temporary file left: %v", entries)
}

// TestWriteFileInPlaceWhereNoneCanBeMade: a file beside which no file can
// be made, as in /proc, is written in place, as WriteFile always did.
func TestWriteFileInPlaceWhereNoneCanBeMade(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	comm, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	require.NoError(t, s.WriteFile("/proc/self/comm", comm), "the same name written back")
}
