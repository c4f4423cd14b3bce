package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHeaderBounded makes a session's cwd 25 KB deep, of names of 255
// control bytes, whose escapes are four bytes each: the text of an answer
// keeps its header to a few short lines, with the cwd's first and last
// bytes and how many were left out, and the structured content has the
// cwd whole. The text of `echo hi` under outputLimit 100 was 100 KB. A
// long session name is cut so too.
func TestHeaderBounded(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	c.run(map[string]any{"command": `mkdir deep && cd deep && n=$(printf '\001%.0s' $(seq 255)); ` +
		`for i in $(seq 100); do mkdir -p "$n" && cd "$n"; done`, "cwd": t.TempDir()})
	r, text := c.run(map[string]any{"command": "echo hi", "outputLimit": 100})
	name := strings.Repeat("\x01", 255)
	require.True(t, strings.HasSuffix(r.Cwd, "/deep/"+strings.Repeat(name+"/", 99)+name), "the structured cwd is whole: %d bytes", len(r.Cwd))
	require.Less(t, len(text), 1000, "%.2000q", text)
	line, _, _ := strings.Cut(text[strings.Index(text, "cwd: "):], "\n")
	require.Contains(t, line, `/deep/\x01\x01`, "the cwd's head")
	require.True(t, strings.HasSuffix(line, `\x01\x01\x01`), "the cwd's tail: %q", line)
	require.Regexp(t, `\[\.\.\. \d+ bytes omitted \.\.\.\]`, line)
	require.Contains(t, text, "output:\nhi\n")

	// A session's name, of the most bytes the daemon takes, all of them
	// control bytes.
	name = strings.Repeat("\x01", 1024)
	r, text = c.run(map[string]any{"command": "true", "session": name})
	require.Equal(t, name, r.Session)
	require.Less(t, len(text), 1000, "%.2000q", text)
	require.Regexp(t, `session: (\\x01)+\[\.\.\. \d+ bytes omitted \.\.\.\](\\x01)+\n`, text)
}
