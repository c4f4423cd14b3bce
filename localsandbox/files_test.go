package localsandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestFiles(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	outside := t.TempDir()
	rel, err := filepath.Rel(s.Dir(), filepath.Join(outside, "via-dotdot.txt"))
	if err != nil {
		t.Fatal(err)
	}
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
			if err := s.WriteTextFile(tt.path, "text of "+tt.name); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(tt.where)
			if err != nil || string(got) != "text of "+tt.name {
				t.Fatalf("on disk at %s: %q, %v", tt.where, got, err)
			}
			text, ok, err := s.ReadTextFile(tt.path)
			if err != nil || !ok || text != "text of "+tt.name {
				t.Fatalf("ReadTextFile(%s) = %q, %v, %v", tt.path, text, ok, err)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	for _, path := range []string{"missing.txt", "no/such/dir/file", filepath.Join(s.Dir(), "missing")} {
		text, ok, err := s.ReadTextFile(path)
		if text != "" || ok || err != nil {
			t.Errorf("ReadTextFile(%s) = %q, %v, %v, want absent", path, text, ok, err)
		}
		data, ok, err := s.ReadFile(path)
		if data != nil || ok || err != nil {
			t.Errorf("ReadFile(%s) = %q, %v, %v, want absent", path, data, ok, err)
		}
	}
}

func TestReadDirectoryIsAnError(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	if _, ok, err := s.ReadTextFile("."); err == nil || ok {
		t.Fatalf("ReadTextFile of a directory: ok %v, err %v; want an error", ok, err)
	}
}

func TestBytesRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	data := []byte{0, 0xff, 0xfe, '\n', 0xc3} // not UTF-8
	if err := s.WriteFile("bin/blob", data); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.ReadFile("bin/blob")
	if err != nil || !ok || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile = %x, %v, %v, want %x", got, ok, err, data)
	}
	text, _, _ := s.ReadTextFile("bin/blob")
	if text != string(data) {
		t.Errorf("ReadTextFile changed the bytes: %x", text)
	}
	if err := s.WriteTextFile("bin/blob", "short"); err != nil {
		t.Fatal(err)
	}
	if text, _, _ := s.ReadTextFile("bin/blob"); text != "short" {
		t.Errorf("WriteTextFile did not replace the file: %q", text)
	}
}

// A write where a parent path is a file fails rather than doing something
// surprising.
func TestWriteUnderAFile(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	if err := s.WriteTextFile("f", "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTextFile("f/g", "y"); err == nil {
		t.Fatal("writing under a regular file succeeded")
	}
}
