package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/heaptest"
)

// TestReadBodyHeld: the buffer a body is read into, made at its declared
// size, counts against the bodies' budget before it is made: a
// Content-Length the budget cannot take is refused 429 without allocating
// it, and one it can is read whole and held.
func TestReadBodyHeld(t *testing.T) {
	budget := &bodyBudget{limit: 1 << 20}
	body := func(s string, declared int64) *http.Request {
		r, err := http.NewRequest("POST", "/v1/processes", nil)
		require.NoError(t, err)
		r.Body = &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(s)), limit: 16 << 20, held: budget}
		r.ContentLength = declared
		return r
	}
	var err error
	allocated := heaptest.Allocated(func() { _, err = readBody(body(`{"cmd":"true"}`, 16<<20)) })
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Less(t, allocated, uint64(1<<20), "the declared size was not allocated")
	require.Zero(t, budget.used.Load())

	r := body(`{"cmd":"true"}`, 14)
	b, err := readBody(r)
	require.NoError(t, err)
	require.Equal(t, `{"cmd":"true"}`, string(b))
	require.EqualValues(t, 15, budget.used.Load(), "its buffer is held until the request is answered")
}
