package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/racetest"
	"github.com/conchsh/conch/server"
	"github.com/conchsh/conch/shellsession"
)

// TestRunAnswerAllocatesLittle: the answer of a short command's run
// allocates far less than the 32 KiB of the buffer it is written through,
// which answers reuse, and its small members are written without
// encoding/json's reflection.
func TestRunAnswerAllocatesLittle(t *testing.T) {
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := shellsession.New(c, shellsession.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		<-s.Done()
	})
	p, r, err := s.Run(c, shellsession.CommandOptions{Cmd: "echo hello"})
	require.NoError(t, err)
	require.Equal(t, 0, *r.ExitCode)

	answer := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		require.NoError(t, server.WriteRunAnswer(d.srv, rec, p))
		return rec
	}
	rec := answer()
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"exitCode":0`)
	require.Contains(t, rec.Body.String(), `"output":"hello\n"`)

	// The fewest over a few batches: what else runs in the process (the
	// daemon's own check that a shell starts, other tests' cleanups)
	// only adds.
	const n = 50
	bytes, allocs := uint64(1<<63), uint64(1<<63)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			answer()
		}
		runtime.ReadMemStats(&after)
		bytes = min(bytes, (after.TotalAlloc-before.TotalAlloc)/n)
		allocs = min(allocs, (after.Mallocs-before.Mallocs)/n)
	}
	t.Logf("%d bytes in %d allocations per answer", bytes, allocs)
	if !racetest.Enabled { // the race detector's own allocations count too (6-11 KB)
		require.Less(t, bytes, uint64(8<<10), "bytes allocated per answer")
	}
	require.Less(t, allocs, uint64(24), "allocations per answer")
}

// heldLog holds the daemon's log line of each request until released.
type heldLog struct {
	slog.Handler
	release chan struct{}
}

func (h heldLog) Enabled(context.Context, slog.Level) bool { return true }

func (h heldLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request" {
		<-h.release
	}
	return nil
}

// TestRunAnswerSentBeforeTheRequestEnds: a run's answer reaches the client
// as soon as it is written, with its length, before the daemon's
// bookkeeping of the request (its log line, its metrics) is done.
func TestRunAnswerSentBeforeTheRequestEnds(t *testing.T) {
	release := make(chan struct{})
	d := start(t, server.Options{Logger: slog.New(heldLog{slog.DiscardHandler, release})})
	defer close(release)
	c := ctx(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	api, err := client.New(d.url, testToken, client.WithHTTPClient(hc))
	require.NoError(t, err)
	// Creating the session logs a request too: let it through.
	created := make(chan error, 1)
	var id string
	go func() {
		s, err := api.CreateSession(c, client.SessionOptions{})
		if err == nil {
			id = s.ID
		}
		created <- err
	}()
	release <- struct{}{}
	require.NoError(t, <-created)

	answered := make(chan error, 1)
	go func() {
		r, _, err := api.RunCommand(c, id, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo hi"}})
		if err == nil && (r == nil || r.Output != "hi\n") {
			err = fmt.Errorf("answer %+v", r)
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		release <- struct{}{}
		t.Fatalf("the run's answer waited for the request's log line: %v", <-answered)
	}
	release <- struct{}{}
}
