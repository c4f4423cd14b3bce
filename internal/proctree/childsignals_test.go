package proctree

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// When run as the helper (CONCH_PROCTREE_HELPER set), the test binary prints
// the SigIgn mask of a child started through Start, or, when the variable
// says "plain", through os/exec alone.
func TestMain_helper(t *testing.T) {
	mode := os.Getenv("CONCH_PROCTREE_HELPER")
	if mode == "" {
		t.Skip("only run as a helper process")
	}
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "grep SigIgn /proc/self/status")
	cmd.Stdout = os.Stdout
	if mode == "plain" {
		require.NoError(t, cmd.Run()) // no reaper runs here (see TestMain)
		return
	}
	require.NoError(t, Start(cmd))
	require.NoError(t, Wait(cmd))
}

func TestChildrenStartWithDefaultSignals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		ignored map[int]bool // by signal number
	}{
		{"start", map[int]bool{1: false, 2: false, 3: false, 13: false}},
		// The control: started by os/exec alone, the child inherits SIG_IGN
		// of the signals the Go runtime leaves ignored.
		{"plain", map[int]bool{1: true, 2: true}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			// bash's trap '' ignores the signals, and exec passes that on to
			// the test binary as a daemon started under nohup would get it.
			cmd := exec.CommandContext(t.Context(), "bash", "-c",
				`trap '' HUP INT QUIT PIPE; exec "$0" -test.run='^TestMain_helper$' -test.count=1`, os.Args[0])
			cmd.Env = append(os.Environ(), "CONCH_PROCTREE_HELPER="+tc.mode)
			var out strings.Builder
			cmd.Stdout = &out
			require.NoError(t, Start(cmd))
			require.NoError(t, Wait(cmd), ": %s", out.String())
			var mask uint64
			for line := range strings.SplitSeq(out.String(), "\n") {
				if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
					mask, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				}
			}
			for sig, want := range tc.ignored {
				assert.Equal(t, want, mask&(1<<(sig-1)) != 0, "signal %d ignored in the child (output %q)", sig, out.String())
			}
		})
	}
}
