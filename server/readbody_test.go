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

// TestReadBodyHeld: the buffer a body is read into counts against the
// bodies' budget before it is made, and is made for what came of the body,
// not for its declared size: a body that declared 16 MiB and sent 2 MiB
// is refused 429 once what came is past a budget of 1 MiB, without
// allocating its declared size, and one the budget takes is read whole
// and held.
func TestReadBodyHeld(t *testing.T) {
	budget := &bodyBudget{limit: 1 << 20}
	body := func(s string, declared int64) *http.Request {
		r, err := http.NewRequest("POST", "/v1/processes", nil)
		require.NoError(t, err)
		r.Body = &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(s)), limit: 16 << 20, held: budget}
		r.ContentLength = declared
		return r
	}
	sent := strings.Repeat(" ", 2<<20)
	var err error
	allocated := heaptest.Allocated(func() { _, err = readBody(body(sent, 16<<20)) })
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Less(t, allocated, uint64(2<<20), "the declared size was not allocated")

	budget.used.Store(0) // what the refused body held, its request answered
	r := body(`{"cmd":"true"}`, 14)
	b, err := readBody(r)
	require.NoError(t, err)
	require.Equal(t, `{"cmd":"true"}`, string(b))
	require.EqualValues(t, 15, budget.used.Load(), "its buffer is held until the request is answered")

	// A large one grows to its size, no further.
	budget.used.Store(0)
	big := `"` + strings.Repeat("x", 700<<10) + `"`
	b, err = readBody(body(big, int64(len(big))))
	require.NoError(t, err)
	require.Equal(t, big, string(b))
	require.EqualValues(t, len(big)+1, budget.used.Load())
}
