package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/conchsh/conch/internal/daemonrec"
)

func TestReadEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []Event
		err   string
	}{
		{"log", "id: 7\nevent: log\ndata: {\"cursor\":\"7\",\"channel\":\"stdout\",\"data\":\"hi\\n\",\"encoding\":\"text\",\"timestamp\":1}\n\n",
			[]Event{{Type: EventLog, ID: "7", Frame: &LogFrame{Cursor: "7", Channel: "stdout", Data: "hi\n", Encoding: "text", Timestamp: 1}}}, ""},
		{"comments and blank lines", ": ping\n\n: ping\n\nevent: eof\ndata: {}\n\n", []Event{{Type: EventEOF}}, ""},
		{"crlf", "event: state\r\ndata: {\"reason\":\"exited\",\"exitCode\":3}\r\n\r\n",
			[]Event{{Type: EventState, State: &WaitResult{Reason: "exited", ExitCode: ptr(3)}}}, ""},
		{"no space after colon", "event:warning\ndata:{\"message\":\"m\",\"firstAvailableCursor\":\"9\"}\n\n",
			[]Event{{Type: EventWarning, Warning: &Warning{Message: "m", FirstAvailableCursor: "9"}}}, ""},
		{"data over lines", "event: warning\ndata: {\"message\":\ndata: \"m\"}\n\n",
			[]Event{{Type: EventWarning, Warning: &Warning{Message: "m"}}}, ""},
		{"unfinished event", "event: eof\ndata: {}\n", nil, ""},
		{"unknown event", "event: surprise\ndata: {}\n\n", nil, "unknown event"},
		{"bad data", "event: log\ndata: {\n\n", nil, "log event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []Event
			var err error
			for ev, e := range readEvents(strings.NewReader(tt.input)) {
				if e != nil {
					err = e
					break
				}
				got = append(got, ev)
			}
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add("id: 1\nevent: log\ndata: {}\n\n")
	f.Add(": ping\n\nevent: eof\ndata: {}\n\n")
	f.Add("event: state\ndata: {\"reason\":\"exited\"}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		for ev, err := range readEvents(strings.NewReader(s)) {
			if err != nil {
				return
			}
			switch ev.Type {
			case EventLog:
				require.NotNil(t, ev.Frame)
			case EventWarning:
				require.NotNil(t, ev.Warning)
			case EventState:
				require.NotNil(t, ev.State)
			case EventEOF:
			default:
				t.Fatalf("event of unknown type %q yielded", ev.Type)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestError(t *testing.T) {
	t.Parallel()
	err := error(&Error{Status: 404, Code: CodeNotFound, Message: "process x: not found"})
	require.True(t, HasCode(err, CodeNotFound))
	require.False(t, HasCode(err, CodeInternal))
	require.ErrorIs(t, err, &Error{Code: CodeNotFound})
	require.Contains(t, err.Error(), "not_found")
}

// TestDiscover runs without t.Parallel: it sets the environment.
func TestDiscover(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(EnvURL, "")
	t.Setenv(EnvToken, "")
	dir := filepath.Join(state, "conch")

	_, err := Discover()
	require.ErrorContains(t, err, "no token")

	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, TokenFile), []byte("tok\n"), 0o600))
	c, err := Discover()
	require.NoError(t, err)
	require.Equal(t, DefaultURL, c.URL())
	require.Equal(t, "tok", c.token)

	other := filepath.Join(t.TempDir(), "other-token")
	require.NoError(t, os.WriteFile(other, []byte("tok2"), 0o600))
	require.NoError(t, WriteEndpoint(dir, Endpoint{URL: "http://127.0.0.1:9", TokenFile: other, PID: 1}))
	c, err = Discover()
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9", c.URL())
	require.Equal(t, "tok2", c.token)

	// A daemon that took its token from $CONCH_TOKEN, and runs (this
	// process stands in for it, with its instance record), wants it here
	// too.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, daemonrec.Dir), 0o700))
	rec, err := json.Marshal(daemonrec.Self())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, daemonrec.Dir, "self.json"), rec, 0o600))
	require.NoError(t, WriteEndpoint(dir, Endpoint{URL: "http://127.0.0.1:9", PID: os.Getpid()}))
	_, err = Discover()
	require.ErrorContains(t, err, "took its token from CONCH_TOKEN")
	// One whose pid another process holds (pid 1 runs, but no record
	// names it) is gone: its token matters no more.
	require.NoError(t, WriteEndpoint(dir, Endpoint{URL: "http://127.0.0.1:9", PID: 1}))
	_, err = Discover()
	require.ErrorIs(t, err, ErrNotRunning)

	// A daemon that runs but whose token file cannot be read (it was
	// removed) is said so, as the CLI and the SDKs say it: starting one
	// would be refused. One that no longer runs is no daemon.
	gone := filepath.Join(dir, "gone-token")
	require.NoError(t, WriteEndpoint(dir, Endpoint{URL: "http://127.0.0.1:9", TokenFile: gone, PID: os.Getpid()}))
	_, err = Discover()
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.EqualError(t, err, fmt.Sprintf("the daemon recorded in %s (pid %d) runs, but its token file %s cannot be read (no such file or directory): "+
		"set CONCH_TOKEN to its token, or stop it and start it again with 'conch serve', which writes a new one",
		filepath.Join(dir, EndpointFile), os.Getpid(), gone))
	require.NoError(t, WriteEndpoint(dir, Endpoint{URL: "http://127.0.0.1:9", TokenFile: gone, PID: 1}))
	_, err = Discover()
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "no token: set CONCH_TOKEN or start the daemon")

	t.Setenv(EnvURL, "http://localhost:8")
	t.Setenv(EnvToken, "tok3")
	c, err = Discover()
	require.NoError(t, err)
	require.Equal(t, "http://localhost:8", c.URL())
	require.Equal(t, "tok3", c.token)

	t.Setenv(EnvURL, "localhost:8")
	_, err = Discover()
	require.ErrorContains(t, err, "want http://host:port")
	t.Setenv(EnvURL, "127.0.0.1:8") // url.Parse fails on it, in words of its own
	_, err = Discover()
	require.ErrorContains(t, err, "want http://host:port")
}

// TestDiscoverNeverWaits: a FIFO where the endpoint or the token file
// should be, which any command the daemon runs can put there, is refused
// at once; read as a file it kept every client waiting for a writer.
func TestDiscoverNeverWaits(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(EnvURL, "")
	t.Setenv(EnvToken, "")
	dir := filepath.Join(state, "conch")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	discover := func() error {
		done := make(chan error, 1)
		go func() { _, err := Discover(); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			// Let the read go: open the FIFO for writing and close it.
			for _, name := range []string{EndpointFile, TokenFile} {
				if f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			<-done
			t.Fatal("Discover waited on a FIFO")
			return nil
		}
	}
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, TokenFile), 0o600))
	require.ErrorContains(t, discover(), "not a regular file")
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, EndpointFile), 0o600))
	require.ErrorContains(t, discover(), "not a regular file")
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{" 30 ", 30 * time.Second},
		{"Sat, 05 Dec 2026 10:00:05 GMT", 5 * time.Second},
		{"Sat, 05 Dec 2026 09:59:00 GMT", 0}, // past
		{"-1", 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, retryAfter(tt.header, now), "Retry-After: %q", tt.header)
	}
}

// TestErrorRetryAfter: an API error carries the answer's Retry-After, and
// the refused request is not sent again.
func TestErrorRetryAfter(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	d := newDaemonStub(t, func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"draining","message":"the daemon is stopping and takes no new work"}}`+"\n")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := d.c.Start(ctx, StartOptions{Cmd: "true"})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeDraining, e.Code)
	require.Equal(t, time.Second, e.RetryAfter)
	require.Equal(t, int32(1), posts.Load())
}
