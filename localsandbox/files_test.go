package localsandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFiles(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	outside := t.TempDir()
	rel, err := filepath.Rel(s.Dir(), filepath.Join(outside, "via-dotdot.txt"))
	require.NoError(t, err)
	tests := []struct {
		name  string
		path  string // written and read back through the session
		where string // where it must land on disk
	}{
		{"relative", "a.txt", filepath.Join(s.Dir(), "a.txt")},
		{"nested parents created", "x/y/z/b.txt", filepath.Join(s.Dir(), "x/y/z/b.txt")},
		{"absolute outside the directory", filepath.Join(outside, "abs.txt"), filepath.Join(outside, "abs.txt")},
		{"dotdot outside the directory", rel, filepath.Join(outside, "via-dotdot.txt")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, s.WriteTextFile(tt.path, "text of "+tt.name))
			got, err := os.ReadFile(tt.where)
			require.False(t, err != nil || string(got) != "text of "+tt.name, "on disk at %s: %q, %v", tt.where, got, err)
			text, ok, err := s.ReadTextFile(tt.path)
			require.False(t, err != nil || !ok || text != "text of "+tt.name, "ReadTextFile(%s) = %q, %v, %v", tt.path, text, ok, err)
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, path := range []string{"missing.txt", "no/such/dir/file", filepath.Join(s.Dir(), "missing")} {
		text, ok, err := s.ReadTextFile(path)
		assert.False(t, text != "" || ok || err != nil, "ReadTextFile(%s) = %q, %v, %v, want absent", path, text, ok, err)
		data, ok, err := s.ReadFile(path)
		assert.False(t, data != nil || ok || err != nil, "ReadFile(%s) = %q, %v, %v, want absent", path, data, ok, err)
	}
}

// TestEmptyPathRefused: an empty path names no file or directory, and the
// helpers and New say so: ReadFile read the session's directory (a directory, refused), and
// WriteFile's error read "write : not a regular file (the path ends in
// /...)", naming neither a path nor what was wrong.
func TestEmptyPathRefused(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	err := s.WriteFile("", []byte("x"))
	require.ErrorIs(t, err, ErrEmptyPath)
	require.Equal(t, "write: the path is empty", err.Error())
	_, ok, err := s.ReadFile("")
	require.False(t, ok)
	require.ErrorIs(t, err, ErrEmptyPath)
	require.Equal(t, "read: the path is empty", err.Error())
	// A session's directory too: New("") made one in the process's own.
	_, err = New("")
	require.ErrorIs(t, err, ErrEmptyPath)
}

func TestReadDirectoryIsAnError(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	_, ok, err := s.ReadTextFile(".")
	require.False(t, err == nil || ok, "ReadTextFile of a directory: ok %v, err %v; want an error", ok, err)
}

func TestBytesRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	data := []byte{0, 0xff, 0xfe, '\n', 0xc3} // not UTF-8
	require.NoError(t, s.WriteFile("bin/blob", data))
	got, ok, err := s.ReadFile("bin/blob")
	require.False(t, err != nil || !ok || !bytes.Equal(got, data), "ReadFile = %x, %v, %v, want %x", got, ok, err, data)
	text, _, _ := s.ReadTextFile("bin/blob")
	assert.Equal(t, string(data), text, "ReadTextFile changed the bytes: %x", text)
	require.NoError(t, s.WriteTextFile("bin/blob", "short"))
	text, _, _ = s.ReadTextFile("bin/blob")
	assert.Equal(t, "short", text, "WriteTextFile did not replace the file: %q", text)
}

// A write where a parent path is a file fails rather than doing something
// surprising.
func TestWriteUnderAFile(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.NoError(t, s.WriteTextFile("f", "x"))
	err := s.WriteTextFile("f/g", "y")
	require.Error(t, err, "writing under a regular file succeeded")
}

// The file helpers read and write regular files only, without blocking: a
// FIFO a command made blocked ReadFile and WriteFile until someone opened
// its other end, for ever if nobody did, and ReadFile of /dev/zero read
// until memory ran out. A file larger than MaxReadFileSize is refused
// rather than read into memory.
func TestFilesRefuseWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	res, err := s.Run(ctx, RunOptions{Command: "mkfifo pipe && mkdir dir && ln -s pipe link"})
	require.False(t, err != nil || res.ExitCode != 0, "%+v, %v", res, err)
	calls := map[string]func() error{
		"read a FIFO":        func() error { _, _, err := s.ReadFile("pipe"); return err },
		"read a link to one": func() error { _, _, err := s.Restricted().ReadFile("link"); return err },
		"write a FIFO":       func() error { return s.WriteFile("pipe", []byte("x")) },
		"read /dev/zero":     func() error { _, _, err := s.ReadFile("/dev/zero"); return err },
		"write /dev/null":    func() error { return s.WriteTextFile("/dev/null", "x") },
		"read a directory":   func() error { _, _, err := s.ReadFile("dir"); return err },
		"write a directory":  func() error { return s.WriteFile("dir", []byte("x")) },
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrNotRegularFile, name)
		case <-ctx.Done():
			// Let it go: a writer and a reader end the FIFO's opens.
			s.Run(context.Background(), RunOptions{Command: "exec 3<>pipe; exec 3>&-"})
			t.Fatalf("%s blocks", name)
		}
	}
	fi, err := os.Lstat(filepath.Join(s.Dir(), "pipe"))
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type())

	// A sparse file one byte over the bound costs nothing to make.
	big := filepath.Join(s.Dir(), "big")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, MaxReadFileSize+1))
	data, ok, err := s.ReadFile("big")
	require.ErrorIs(t, err, ErrFileTooLarge)
	require.False(t, ok || data != nil)
	require.NoError(t, os.Truncate(big, MaxReadFileSize))
	data, ok, err = s.ReadFile("big")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, data, MaxReadFileSize)
}

// A path ending in "/" names a directory, never a file: WriteFile("sub/")
// wrote a file named sub, and ReadFile("sub/") read it.
func TestTrailingSlashNamesADirectory(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	err := s.WriteFile("sub/", []byte("x"))
	require.ErrorIs(t, err, ErrNotRegularFile)
	_, err = os.Lstat(filepath.Join(s.Dir(), "sub"))
	require.ErrorIs(t, err, os.ErrNotExist, "something was made at sub")
	require.NoError(t, s.WriteTextFile("file", "x"))
	_, ok, err := s.ReadFile("file/")
	require.Error(t, err)
	require.False(t, ok)
	require.NoError(t, os.Mkdir(filepath.Join(s.Dir(), "dir"), 0o755))
	_, _, err = s.ReadFile("dir/")
	require.ErrorIs(t, err, ErrNotRegularFile)
}
