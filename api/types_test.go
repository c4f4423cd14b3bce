package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWireTypes(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(struct {
		T Time   `json:"t"`
		Z Time   `json:"z,omitzero"`
		M Millis `json:"m"`
	}{T: Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 6_789_000, time.FixedZone("x", 3600))}, M: Millis(1500 * time.Millisecond)})
	require.NoError(t, err)
	require.JSONEq(t, `{"t":"2026-01-02T02:04:05.006Z","m":1500}`, string(b))

	var v struct {
		T Time   `json:"t"`
		M Millis `json:"m"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"t":"2026-01-02T02:04:05.006Z","m":250}`), &v))
	require.Equal(t, 250*time.Millisecond, v.M.Duration())
	require.Equal(t, 6, v.T.Nanosecond()/1e6)
	for _, bad := range []string{`{"m":-1}`, `{"m":"1"}`, `{"m":1e300}`, `{"t":"yesterday"}`} {
		require.Error(t, json.Unmarshal([]byte(bad), &v), bad)
	}
}
