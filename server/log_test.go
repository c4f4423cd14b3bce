package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/buftest"
	"github.com/conchsh/conch/server"
)

// logBuffer is a log destination the test reads while the server writes.
type logBuffer struct{ buftest.Buffer }

// records parses every line as a JSON object.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	text := b.String()
	var recs []map[string]any
	for line := range strings.Lines(text) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "not JSON: %s", line)
		recs = append(recs, rec)
	}
	return recs
}

// find returns the first record with msg whose fields include want.
func find(recs []map[string]any, msg string, want map[string]any) map[string]any {
	for _, r := range recs {
		if r["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && r[k] == v
		}
		if ok {
			return r
		}
	}
	return nil
}

// TestLogClientGone: the request line of a request whose client went away
// before its answer says 499, as the metrics count it; it said 0.
func TestLogClientGone(t *testing.T) {
	t.Parallel()
	var out logBuffer
	d := start(t, server.Options{Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	abandonWait(t, d)
	route := map[string]any{"route": "GET /v1/processes/{id}/wait"}
	require.Eventually(t, func() bool { return find(out.records(t), "request", route) != nil },
		30*time.Second, 20*time.Millisecond)
	require.Equal(t, 499.0, find(out.records(t), "request", route)["status"])
}

func TestJSONLog(t *testing.T) {
	t.Parallel()
	const secret = "json-log-secret"
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			var out logBuffer
			logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: level}))
			d := start(t, server.Options{Logger: logger})
			h := authed()
			h.Set("X-Request-Id", "req-42")
			code, body := d.raw(t, "POST", "/v1/processes/run", `{"cmd":"echo `+secret+`; exit 5"}`, h)
			require.Equal(t, http.StatusOK, code, body)
			var r client.RunResult
			require.NoError(t, json.Unmarshal([]byte(body), &r))
			require.NoError(t, d.srv.Drain(ctx(t)))

			recs := out.records(t)
			req := find(recs, "request", map[string]any{"requestId": "req-42"})
			require.NotNil(t, req, "a line for the request")
			require.Equal(t, "POST /v1/processes/run", req["route"])
			require.Equal(t, 200.0, req["status"])
			require.Contains(t, req, "durationMs")

			started := find(recs, "process started", map[string]any{"id": r.ProcessID})
			require.NotNil(t, started)
			require.Equal(t, "exec", started["kind"])
			ended := find(recs, "process ended", map[string]any{"id": r.ProcessID})
			require.NotNil(t, ended)
			require.Equal(t, "exec", ended["kind"])
			require.Equal(t, "exited", ended["reason"])
			require.Equal(t, 5.0, ended["exitCode"])
			require.Contains(t, ended, "durationMs")

			require.NotNil(t, find(recs, "drain started", nil))
			require.NotNil(t, find(recs, "drain finished", nil))

			var withText []map[string]any
			for _, rec := range recs {
				if b, _ := json.Marshal(rec); strings.Contains(string(b), secret) {
					withText = append(withText, rec)
				}
			}
			if level == slog.LevelInfo {
				require.Empty(t, withText, "command text only at debug level")
				return
			}
			require.Len(t, withText, 1)
			require.Equal(t, "DEBUG", withText[0]["level"])
			require.Equal(t, "process command", withText[0]["msg"])
			require.Equal(t, r.ProcessID, withText[0]["id"])
		})
	}
}

// pcs is a log handler that keeps each record's program counter by message.
type pcs struct {
	mu sync.Mutex
	by map[string][]uintptr
}

func (h *pcs) Enabled(context.Context, slog.Level) bool { return true }
func (h *pcs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *pcs) WithGroup(string) slog.Handler            { return h }
func (h *pcs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.by[r.Message] = append(h.by[r.Message], r.PC)
	return nil
}

// The lines of every request and of each process's start and end are made
// without looking up their caller (runtime.Callers, a quarter of their
// cost on a one-shot's path), which conch's handlers never write.
func TestHotLogLinesWithoutCaller(t *testing.T) {
	t.Parallel()
	h := &pcs{by: map[string][]uintptr{}}
	d := start(t, server.Options{Logger: slog.New(h)})
	code, body := d.raw(t, "POST", "/v1/processes/run", `{"cmd":"true"}`, authed())
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, d.srv.Drain(ctx(t)))
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, msg := range []string{"request", "process started", "process ended"} {
		require.NotEmpty(t, h.by[msg], "a %q line", msg)
		for _, pc := range h.by[msg] {
			require.Zero(t, pc, "the %q line looked up its caller", msg)
		}
	}
	require.NotZero(t, h.by["drain started"][0], "other lines are made as Logger makes them")
}
