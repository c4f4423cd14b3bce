package localsandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangGuard bounds a blocking test: what the test starts with the returned
// context is killed once it ends.
func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSession returns a session in a new temporary directory, stopped when
// the test ends.
func newSession(t *testing.T, opts ...Option) *Session {
	t.Helper()
	s, err := New(t.TempDir(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name    string
		dir     string
		opts    []Option
		wantErr string
	}{
		{name: "directory", dir: dir},
		{name: "nil option", dir: dir, opts: []Option{nil, WithEnv(nil)}}, // it panicked
		{name: "missing", dir: filepath.Join(dir, "missing"), wantErr: "no such file or directory"},
		{name: "file", dir: file, wantErr: "is not a directory"},
		{name: "bad env name", dir: dir, opts: []Option{WithEnv(map[string]string{"A=B": "c"})}, wantErr: "bad environment variable name"},
		// Taken, it made a session whose every command failed to start.
		{name: "env value with NUL", dir: dir, opts: []Option{WithEnv(map[string]string{"A": "b\x00c"})}, wantErr: "bad environment variable A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tt.dir, tt.opts...)
			if tt.wantErr != "" {
				if !assert.ErrorContains(t, err, tt.wantErr, "New(%s)", tt.dir) {
					s.Stop()
					t.FailNow()
				}
				return
			}
			require.NoError(t, err)
			defer s.Stop()
			assert.Equal(t, tt.dir, s.Dir(), "Dir() = %s, want %s", s.Dir(), tt.dir)
			ports := s.Ports()
			require.Len(t, ports, 1, "Ports() = %v, want one port", ports)
			assert.True(t, held(t, ports[0]), "port %d of a live session is not locked", ports[0])
		})
	}
}

func TestNewRelativeDir(t *testing.T) {
	t.Parallel()
	s, err := New(".")
	require.NoError(t, err)
	defer s.Stop()
	wd, _ := os.Getwd()
	assert.Equal(t, wd, s.Dir(), "Dir() = %s, want %s", s.Dir(), wd)
}

func TestSessionsGetDistinctPorts(t *testing.T) {
	t.Parallel()
	var ports []int
	for range 8 {
		ports = append(ports, newSession(t).Ports()...)
	}
	assertDistinct(t, ports)
}

func TestPortEndpoint(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	port := s.Ports()[0]
	addr := "127.0.0.1:" + strconv.Itoa(port)
	other := port + 1
	if other > 65535 {
		other = port - 1
	}
	tests := []struct {
		port     int
		protocol string
		want     string
		wantErr  error
	}{
		{port: port, protocol: "", want: "http://" + addr},
		{port: port, protocol: "http", want: "http://" + addr},
		{port: port, protocol: "ws", want: "ws://" + addr},
		{port: port, protocol: "https", want: "https://" + addr},
		{port: other, protocol: "http", wantErr: ErrPortNotLeased},
		{port: 0, protocol: "ws", wantErr: ErrPortNotLeased},
		{port: port, protocol: "ws://x", wantErr: errAny},
		{port: port, protocol: "1ws", wantErr: errAny},
	}
	for _, tt := range tests {
		// Nothing listens on the port: the URL is returned all the same.
		got, err := s.PortEndpoint(tt.port, tt.protocol)
		switch tt.wantErr {
		case nil:
			if assert.NoError(t, err, "PortEndpoint(%d, %q)", tt.port, tt.protocol) {
				assert.Equal(t, tt.want, got, "PortEndpoint(%d, %q)", tt.port, tt.protocol)
			}
		case errAny:
			assert.Error(t, err, "PortEndpoint(%d, %q) = %q", tt.port, tt.protocol, got)
		default:
			assert.ErrorIs(t, err, tt.wantErr, "PortEndpoint(%d, %q) = %q", tt.port, tt.protocol, got)
		}
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

func TestRestrictedHidesSessionControls(t *testing.T) {
	t.Parallel()
	s := newSession(t, WithEnv(map[string]string{"SANDBOX_VAR": "from-session"}))
	r := s.Restricted()
	_, ok := r.(*Session)
	require.False(t, ok, "Restricted() is the *Session itself")
	_, ok = r.(interface{ Stop() error })
	assert.False(t, ok, "Restricted() has Stop")
	_, ok = r.(interface{ Destroy() error })
	assert.False(t, ok, "Restricted() has Destroy")
	_, ok = r.(interface{ Ports() []int })
	assert.False(t, ok, "Restricted() has Ports")
	_, ok = r.(interface {
		PortEndpoint(int, string) (string, error)
	})
	assert.False(t, ok, "Restricted() has PortEndpoint")
	_, ok = r.(interface{ Restricted() Sandbox })
	assert.False(t, ok, "Restricted() has Restricted")

	ctx := hangGuard(t)
	assert.Equal(t, s.Dir(), r.Dir(), "restricted Dir() = %s, want %s", r.Dir(), s.Dir())
	res, err := r.Run(ctx, RunOptions{Command: `printf '%s %s' "$PWD" "$SANDBOX_VAR"`})
	require.NoError(t, err)
	want := s.Dir() + " from-session"
	assert.Equal(t, want, res.Stdout, "restricted Run: %q, want %q", res.Stdout, want)
	require.NoError(t, r.WriteTextFile("sub/note.txt", "hi"))
	text, ok, err := s.ReadTextFile("sub/note.txt")
	assert.False(t, err != nil || !ok || text != "hi", "file written through the restricted view: %q, %v, %v", text, ok, err)
	p, err := r.Spawn(ctx, RunOptions{Command: "printf spawned"})
	require.NoError(t, err)
	code, err := p.Wait(ctx)
	require.False(t, err != nil || code != 0, "restricted Spawn: %d, %v", code, err)
}
