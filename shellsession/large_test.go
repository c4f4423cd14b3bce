package shellsession

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLargeTextAndOutput: a command text far larger than a pipe's buffer
// (a 1 MiB here-document) and an output far larger than one read come
// through whole.
func TestLargeTextAndOutput(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	body := strings.Repeat("0123456789abcdef\n", 64<<10) // 1 MiB
	res, out, _ := run(t, s, CommandOptions{Cmd: "wc -c <<'EOF'\n" + body + "EOF"})
	require.Equal(t, 0, code(res))
	require.Equal(t, "1114112", strings.TrimSpace(out))
	res, out, _ = run(t, s, CommandOptions{Cmd: "seq 200000"})
	require.Equal(t, 0, code(res))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 200000)
	require.Equal(t, "200000", lines[len(lines)-1])
}
