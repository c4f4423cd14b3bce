package server_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

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

	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		answer()
	}
	runtime.ReadMemStats(&after)
	bytes, allocs := (after.TotalAlloc-before.TotalAlloc)/n, (after.Mallocs-before.Mallocs)/n
	t.Logf("%d bytes in %d allocations per answer", bytes, allocs)
	require.Less(t, bytes, uint64(8<<10), "bytes allocated per answer")
	require.Less(t, allocs, uint64(30), "allocations per answer")
}
