package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadBodyGrowsAsItComes: a body's buffer grows with what has come,
// not to its Content-Length at once: a declared size alone, of a body that
// never comes, costs nothing.
func TestReadBodyGrowsAsItComes(t *testing.T) {
	r, err := http.NewRequest("POST", "/v1/processes", strings.NewReader(`{"cmd":"true"}`))
	require.NoError(t, err)
	r.ContentLength = 16 << 20 // declared, never sent
	b, err := readBody(r)
	require.NoError(t, err)
	require.Equal(t, `{"cmd":"true"}`, string(b))
	require.LessOrEqual(t, cap(b), firstBodyRead+1)

	whole := strings.Repeat("x", 3<<20+5)
	r, err = http.NewRequest("POST", "/v1/processes", strings.NewReader(whole))
	require.NoError(t, err)
	b, err = readBody(r)
	require.NoError(t, err)
	require.Equal(t, whole, string(b))
	require.LessOrEqual(t, cap(b), 2*len(whole), "grown by doubling, up to its size")
}
