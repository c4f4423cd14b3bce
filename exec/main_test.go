package exec

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs the tests as the daemon runs: a subreaper with the reaper on,
// and a CONCH_TOKEN in its environment that no child may see.
func TestMain(m *testing.M) {
	os.Setenv(tokenEnv, "secret-token")
	reapertest.Main(m)
}

// start starts a process and makes sure it and its tree are gone when the
// test ends.
func start(t *testing.T, opts Options) *Process {
	t.Helper()
	p, err := Start(opts)
	require.NoError(t, err, "Start")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = proctree.SignalTagged(p.ID(), syscall.SIGKILL)
		assert.NoError(t, p.Stop(ctx), "stop")
	})
	return p
}

// wait waits for p to be done, at most 20 s, and returns its result.
func wait(t *testing.T, p process.Process) process.Result {
	t.Helper()
	return processtest.Wait(t, p, 20*time.Second)
}

// logText returns every retained byte of ch (0: every channel) of l.
func logText(l *logstore.Log, ch logstore.Channel) string {
	var b strings.Builder
	for _, f := range l.Page(0, 0).Frames {
		if ch == 0 || f.Channel == ch {
			b.Write(f.Data)
		}
	}
	return b.String()
}

// waitOutput waits until the output of p holds s, at most 20 s.
func waitOutput(t *testing.T, p process.Process, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("output holds %q", s), func() bool {
		return strings.Contains(logText(p.Log(), 0), s)
	})
}

// requireGone fails t unless every process of ids ends within 20 s.
func requireGone(t *testing.T, ids []proctree.Ident) {
	t.Helper()
	for _, id := range ids {
		eventually(t, fmt.Sprintf("pid %d gone", id.PID), func() bool { return !id.Alive() })
	}
}

// eventually fails t unless cond holds within 20 s: a hang guard, not a
// timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline) || t.Context().Err() != nil, "not true after 20 s: %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

// pids parses the whitespace-separated numbers in s.
func pids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for f := range strings.FieldsSeq(s) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err, "not a pid: %q in %q", f, s)
		out = append(out, n)
	}
	return out
}

func code(n int) *int { return &n }
