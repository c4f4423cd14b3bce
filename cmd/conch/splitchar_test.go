package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// framesOf waits until the log of process id holds n bytes, and returns its
// frames then.
func framesOf(t *testing.T, s *served, id string, n int) []client.LogFrame {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the log of %s holds %d bytes", id, n)
		page, err := s.c.Logs(t.Context(), id, client.LogsOptions{})
		require.NoError(t, err)
		got := 0
		for _, f := range page.Items {
			b, err := f.Bytes()
			require.NoError(t, err)
			got += len(b)
		}
		if got >= n {
			return page.Items
		}
	}
}

// conch logs --plain --cursor C, and conch interact --plain --cursor C,
// where C is inside a character (its first byte came in a frame of its
// own: the cursor after it is one conch logs --json names), print the
// character whole, read from its start before C: they printed U+FFFD for
// its rest.
func TestPlainFromACursorInsideACharacter(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	gate := filepath.Join(t.TempDir(), "gate")
	p, err := s.c.Start(t.Context(), client.StartOptions{
		Cmd: `printf 'a\342'; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '\202\254b\n'`})
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o600) })
	frames := framesOf(t, s, p.ID, 2)
	at := frames[len(frames)-1].Cursor // after the character's first byte
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	_, _, err = s.c.Wait(t.Context(), p.ID, time.Minute)
	require.NoError(t, err)

	for _, args := range [][]string{{"logs"}, {"interact"}} {
		cmd := s.command(append(args, "--plain", "--cursor", at, p.ID)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%v: %s", args, stderr.String())
		assert.Equal(t, "€b\n", string(out), "%v --plain --cursor %s", args, at)
	}
}

// conch logs --plain --cursor C, where C is inside a character whose first
// byte retention dropped, drops the rest of it rather than print it as
// U+FFFD.
func TestPlainFromACursorInsideADroppedCharacter(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "1K") // 64 frames
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	p, err := s.c.Start(t.Context(), client.StartOptions{
		Cmd: `printf '\342'; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '\202\254b\n'
i=1; while [ $i -le 200 ]; do
	while [ ! -e ` + gate + `$i ]; do sleep 0.01; done; printf "l$i\n"; i=$((i+1))
done`})
	require.NoError(t, err)
	t.Cleanup(func() {
		for i := range 201 {
			_ = os.WriteFile(gate+strconv.Itoa(i), nil, 0o600)
		}
		_ = os.WriteFile(gate, nil, 0o600)
	})
	at := framesOf(t, s, p.ID, 1)[0].Cursor // after the character's first byte
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	last := func() *client.LogsPage { // the log once the line last written is in it
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "the log of %s grows", p.ID)
			page, err := s.c.Logs(t.Context(), p.ID, client.LogsOptions{})
			require.NoError(t, err)
			if n := len(page.Items); n > 0 && page.Items[n-1].Cursor != at {
				return page
			}
		}
	}
	page := last()
	for i := 1; page.Items[0].Cursor == at; i++ {
		require.LessOrEqual(t, i, 200, "retention drops the first frame")
		prev := page.Items[len(page.Items)-1].Cursor
		require.NoError(t, os.WriteFile(gate+strconv.Itoa(i), nil, 0o600))
		for page = last(); page.Items[len(page.Items)-1].Cursor == prev; page = last() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	b, err := page.Items[0].Bytes()
	require.NoError(t, err)
	require.Equal(t, "\202\254b\n", string(b), "the frame after the character's first byte is kept: %+v", page.Items[0])
	cmd := s.command("logs", "--plain", "--cursor", at, p.ID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	require.True(t, strings.HasPrefix(string(out), "b\nl1\n"), "%q", out)
}
