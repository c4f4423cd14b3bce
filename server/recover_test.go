package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPanicAnswersInternal(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s, err := New(Options{Token: "t", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	h := s.wrap(route{pattern: "GET /boom", public: true, handler: func(http.ResponseWriter, *http.Request) error {
		panic("boom")
	}})
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/boom", nil))
		require.Equal(t, http.StatusInternalServerError, w.Code)
		var body struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.NewDecoder(w.Body).Decode(&body))
		require.Equal(t, "internal", body.Error.Code)
	}
	require.Contains(t, log.String(), "boom")
	require.Contains(t, log.String(), "stack")
}

func TestAbandonedRequest(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Token: "t", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "http://127.0.0.1/v1/processes/x/wait", nil).WithContext(ctx)

	// The client went away: nothing is written, nothing is logged as a bug.
	w := httptest.NewRecorder()
	s.writeError(w, r, context.Canceled)
	require.Zero(t, w.Body.Len())

	// The daemon is stopping: the client is told so.
	s.cancel()
	w = httptest.NewRecorder()
	s.writeError(w, r, context.Canceled)
	require.Equal(t, http.StatusConflict, w.Code)
	require.Contains(t, w.Body.String(), `"unsupported_operation"`)
	require.Contains(t, w.Body.String(), "shutting down")
}
