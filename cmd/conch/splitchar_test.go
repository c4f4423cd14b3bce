package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
)

// conch interact --plain, answering while the command runs, holds back a
// character whose first bytes the daemon sent in a frame of their own (the
// rest comes later): it prints no U+FFFD for them, and names the cursor
// before them, from which the next answer prints the character whole. The
// answers joined showed a U+FFFD for the first bytes and another for the
// rest.
func TestPlainHoldsBackACharacterSplitAcrossFrames(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	gate := filepath.Join(t.TempDir(), "gate")
	p, err := s.c.Start(t.Context(), client.StartOptions{
		Cmd: `printf 'x\342\202'; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '\254y\n'`})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o600) })
	// The daemon sends the first bytes once the rest is a while late.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the daemon has the character's first bytes")
		page, err := s.c.Logs(t.Context(), p.ID, client.LogsOptions{})
		require.NoError(t, err)
		n := 0
		for _, f := range page.Items {
			b, err := f.Bytes()
			require.NoError(t, err)
			n += len(b)
		}
		if n == 3 {
			break
		}
	}
	cmd := s.command("interact", "--plain", "--timeout", "200ms", "--cursor", "0", p.ID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	first, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", stderr.String())
	require.Equal(t, 123, ee.ExitCode(), "%s", stderr.String())
	require.Equal(t, "x", string(first), "no piece of the character while it is unfinished")
	i := strings.Index(stderr.String(), "--cursor ")
	require.Positive(t, i, "%s", stderr.String())
	next := strings.TrimRight(strings.Fields(stderr.String()[i+len("--cursor "):])[0], "]")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	_, _, err = s.c.Wait(t.Context(), p.ID, time.Minute)
	require.NoError(t, err)
	cmd = s.command("interact", "--plain", "--cursor", next, p.ID)
	stderr.Reset()
	cmd.Stderr = &stderr
	rest, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	require.Equal(t, "x€y\n", string(first)+string(rest), "the answers joined")
}
