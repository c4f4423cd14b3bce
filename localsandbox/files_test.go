package localsandbox

import (
	"bytes"
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
