package localsandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// resolve returns path, made absolute against the session's directory. It
// does not confine it there: an absolute path, a "..", or a symbolic link
// reaches anywhere the calling user can.
func (s *Session) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(s.dir, path)
}

// ReadFile reads the file at path, relative to the session's directory
// unless absolute. The path is not confined to the directory: an absolute
// path, a "..", or a symbolic link reaches anywhere the calling user can.
// A missing file is reported with ok false and a nil error;
// any other failure, such as a directory at path, is an error.
func (s *Session) ReadFile(path string) (data []byte, ok bool, err error) {
	data, err = os.ReadFile(s.resolve(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// ReadTextFile is ReadFile returning the bytes as a string, unchanged: bytes
// that are not valid UTF-8 are kept as they are.
func (s *Session) ReadTextFile(path string) (text string, ok bool, err error) {
	data, ok, err := s.ReadFile(path)
	return string(data), ok, err
}

// WriteFile writes data to the file at path, relative to the session's
// directory unless absolute, replacing what it held. Like ReadFile, it does
// not confine the path to the directory. Missing parent
// directories are created. A new file gets mode 0644 and new directories
// 0755, less the umask.
func (s *Session) WriteFile(path string, data []byte) error {
	p := s.resolve(path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return os.WriteFile(p, data, 0o644)
}

// WriteTextFile is WriteFile with the bytes of text.
func (s *Session) WriteTextFile(path, text string) error {
	return s.WriteFile(path, []byte(text))
}
