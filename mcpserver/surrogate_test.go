package mcpserver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoneSurrogateScanAllocatesNothing: every tool call's arguments are
// scanned for a lone surrogate, and clients that escape all that is not
// ASCII (Python's json.dumps does by default) send a \u escape for each
// such character. The scan copied each escape into a string of its own, a
// lone surrogate or not: 1000 accented letters cost 1000 allocations.
func TestLoneSurrogateScanAllocatesNothing(t *testing.T) {
	args := []byte(`{"command":"echo ` + strings.Repeat(`\u00e9\ud83d\ude00`, 1000) + `"}`)
	require.Equal(t, "", loneSurrogate(args))
	require.Zero(t, testing.AllocsPerRun(10, func() { loneSurrogate(args) }))
	for in, want := range map[string]string{
		`"a\udc80b"`:        `\udc80`,
		`"\ud800x"`:         `\ud800`,
		`"\ud83d\u0041"`:    `\ud83d`,
		`"\\ud800"`:         "",
		`"\ud83d\ude00\ud8`: "", // cut short: not JSON, not this scan's to refuse
	} {
		require.Equal(t, want, loneSurrogate([]byte(in)), in)
	}
}
