package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conchsh/conch/internal/daemonrec"
	"github.com/conchsh/conch/internal/statefile"
)

// DefaultURL is where a daemon listens when nothing else is said.
const DefaultURL = "http://127.0.0.1:7070"

// Files in the state directory.
const (
	TokenFile    = "token"       // the generated token, mode 0600
	EndpointFile = "daemon.json" // the running daemon's Endpoint
)

// Environment variables that override discovery.
const (
	EnvURL   = "CONCH_URL"
	EnvToken = "CONCH_TOKEN"
)

// StateDir returns the directory where a daemon leaves its token and
// endpoint for clients of the same user: $XDG_STATE_HOME/conch, or
// ~/.local/state/conch.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "conch"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "conch"), nil
}

// Endpoint is what a running daemon writes to EndpointFile so that clients
// find it.
type Endpoint struct {
	URL       string `json:"url"`
	TokenFile string `json:"tokenFile"`
	PID       int    `json:"pid"`
}

// WriteEndpoint records e in dir, readable by the user only.
func WriteEndpoint(dir string, e Endpoint) error {
	if err := statefile.MakeDir(dir); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return statefile.Write(filepath.Join(dir, EndpointFile), b)
}

// ReadEndpoint reads the endpoint recorded in dir; anything but a small
// regular file there is refused at once (see statefile.Read).
func ReadEndpoint(dir string) (Endpoint, error) {
	var e Endpoint
	b, err := statefile.Read(filepath.Join(dir, EndpointFile))
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("%s: %w", EndpointFile, err)
	}
	return e, nil
}

// ReadToken reads a token file a daemon recorded, without surrounding
// blanks; anything but a small regular file there is refused at once (see
// statefile.Read): a client never waits on one.
func ReadToken(path string) (string, error) {
	b, err := statefile.Read(path)
	if err != nil {
		return "", err
	}
	return tokenIn(path, b)
}

// ReadGivenToken reads the token file a daemon's user named
// (--token-file), without surrounding blanks: a pipe too, whose writer it
// waits for (a FIFO a secret store fills, or a shell's <(...)), as the
// user chose it. It reads statefile.MaxSize bytes at most.
func ReadGivenToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, statefile.MaxSize+1))
	if err == nil && len(b) > statefile.MaxSize {
		err = fmt.Errorf("%s is larger than a token file can be (%d bytes)", path, statefile.MaxSize)
	}
	if err != nil {
		return "", err
	}
	return tokenIn(path, b)
}

// tokenIn is the token the file at path holds, b.
func tokenIn(path string, b []byte) (string, error) {
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// ErrNotRunning says that the daemon recorded in the state directory is no
// longer running (it was killed, or crashed, before it could say so).
var ErrNotRunning = errors.New("the daemon recorded is no longer running")

// Discover returns a Client for the daemon this user runs: the URL from
// $CONCH_URL, else the state directory's endpoint, else DefaultURL; the
// token from $CONCH_TOKEN, else the endpoint's token file, else the state
// directory's token file. A daemon that took its token from $CONCH_TOKEN
// left no file: its clients need $CONCH_TOKEN too, unless it is no longer
// running (ErrNotRunning): no record of a live instance in the state
// directory names its pid, which a zombie or a later program may hold.
// A token file that cannot be read while the daemon recorded runs (it was
// removed) is said so, with the daemon's pid and the file's path: set
// $CONCH_TOKEN, or restart it; the error unwraps to the read's.
func Discover(opts ...Option) (*Client, error) {
	base, token := os.Getenv(EnvURL), os.Getenv(EnvToken)
	dir, dirErr := StateDir()
	var ep Endpoint
	if dirErr == nil {
		var err error
		ep, err = ReadEndpoint(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if base == "" {
		base = ep.URL
	}
	if base == "" {
		base = DefaultURL
	}
	if token == "" {
		path := ep.TokenFile
		if ep.URL != "" && path == "" {
			if !daemonrec.Running(dir, ep.PID) {
				// Its token matters no more than its address. Its pid
				// alone does not say: a zombie or a later program can
				// hold it.
				return nil, fmt.Errorf("the daemon at %s (pid %d): %w", ep.URL, ep.PID, ErrNotRunning)
			}
			return nil, fmt.Errorf("the daemon at %s took its token from %s: set it here too", ep.URL, EnvToken)
		}
		if path == "" && dirErr == nil {
			path = filepath.Join(dir, TokenFile)
		}
		if path == "" {
			return nil, fmt.Errorf("no token: set %s (%v)", EnvToken, dirErr)
		}
		tok, err := ReadToken(path)
		var pe *fs.PathError
		if err != nil && errors.As(err, &pe) && dirErr == nil && daemonrec.Running(dir, ep.PID) {
			// Starting the daemon, as said below, would be refused: this
			// one runs. The conch CLI and the SDKs say the same.
			return nil, &tokenError{err: err, msg: fmt.Sprintf(
				"the daemon recorded in %s (pid %d) runs, but its token file %s cannot be read (%v): set %s to its token, or stop it and start it again with 'conch serve', which writes a new one",
				filepath.Join(dir, EndpointFile), ep.PID, pe.Path, pe.Err, EnvToken)}
		}
		if err != nil {
			return nil, fmt.Errorf("no token: set %s or start the daemon (%w)", EnvToken, err)
		}
		token = tok
	}
	return New(base, token, opts...)
}

// tokenError is a token file that cannot be read, said in words of its
// own; it unwraps to the read's error (an *fs.PathError).
type tokenError struct {
	err error
	msg string
}

func (e *tokenError) Error() string { return e.msg }
func (e *tokenError) Unwrap() error { return e.err }
