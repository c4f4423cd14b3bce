package localsandbox

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestRunOutputMemoryBounded: a command that writes far more than Run
// returns costs Run about what it returns, not a multiple of all the
// command wrote (it kept every frame, joined them and made a string of
// that: three times the output, 790 MB for 270 MB of base64). The log
// allocates its retention (8 MiB) whoever follows it. Not parallel: the
// bytes allocated are counted over the whole process.
func TestRunOutputMemoryBounded(t *testing.T) {
	const total = 64_000_000
	s := newSession(t)
	ctx := hangGuard(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := s.Run(ctx, RunOptions{Command: "yes 0123456789abcdef | head -c 64000000"})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of output: Stdout of %d bytes, %d bytes allocated", total, len(res.Stdout), allocated)
	require.Less(t, allocated, uint64(32<<20), "bytes allocated by a Run of %d bytes of output", total)
	require.LessOrEqual(t, len(res.Stdout), DefaultOutputLimit)
	if !res.Truncated { // the follower kept up, as it does unless the machine is loaded
		require.EqualValues(t, total, int64(len(res.Stdout))+res.StdoutOmitted)
	}
}

// TestRunOutputLimit: an output longer than OutputLimit keeps its head and
// its tail, cut at line ends, and says how many bytes it left out between;
// a shorter one is whole. Stdout and Stderr are bounded each.
func TestRunOutputLimit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx := hangGuard(t)
	var whole strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintln(&whole, i)
	}
	full := whole.String()
	res, err := s.Run(ctx, RunOptions{Command: "seq 100000; seq 100000 >&2", OutputLimit: 1000})
	require.NoError(t, err)
	require.False(t, res.Truncated)
	for name, got := range map[string]struct {
		out     string
		omitted int64
	}{"stdout": {res.Stdout, res.StdoutOmitted}, "stderr": {res.Stderr, res.StderrOmitted}} {
		require.LessOrEqual(t, len(got.out), 1000, name)
		require.EqualValues(t, len(full), int64(len(got.out))+got.omitted, name)
		n := 0 // the head: as far as the output is the whole one's start
		for n < len(got.out) && got.out[n] == full[n] {
			n++
		}
		head := got.out[:n]
		require.True(t, strings.HasSuffix(head, "\n"), "%s: the head ends a line: %q", name, head)
		require.LessOrEqual(t, len(head), 500, name)
		require.Greater(t, len(head), 500-lineSlack, name)
		tail := got.out[len(head):]
		require.True(t, strings.HasSuffix(full, tail), "%s: tail %q", name, tail)
		require.True(t, strings.HasPrefix(tail, "99"), "%s: the tail starts a line: %q", name, tail)
	}

	res, err = s.Run(ctx, RunOptions{Command: "seq 1000", OutputLimit: len(full[:3893])})
	require.NoError(t, err)
	require.Equal(t, full[:3893], res.Stdout, "an output of the limit is whole")
	require.Zero(t, res.StdoutOmitted)

	_, err = s.Run(ctx, RunOptions{Command: "true", OutputLimit: -1})
	require.ErrorContains(t, err, "OutputLimit")
}

// TestRunOutputCutBetweenCharacters: with no line end near a cut, the head
// and the tail are cut between characters, never inside one.
func TestRunOutputCutBetweenCharacters(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	res, err := s.Run(hangGuard(t), RunOptions{Command: "for i in $(seq 3000); do printf 'é€'; done", OutputLimit: 1003})
	require.NoError(t, err)
	require.True(t, utf8.ValidString(res.Stdout), "%q", res.Stdout)
	require.EqualValues(t, 3000*5, int64(len(res.Stdout))+res.StdoutOmitted)
	require.Greater(t, len(res.Stdout), 990)
}
