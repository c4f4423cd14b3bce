package mcpserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/mcpserver"
)

// run with language makes a code context: its runs are cells whose state
// carries over, an exception is a result, and a language that does not fit
// the session is a tool error saying what to do.
func testCode(t *testing.T, c *conn) {
	r, text := c.run(map[string]any{"command": "x = 6*7", "session": "py", "language": "python"})
	require.Equal(t, 0, *r.ExitCode, text)
	r, text = c.run(map[string]any{"command": "x", "session": "py"})
	require.Equal(t, 0, *r.ExitCode, text)
	require.Equal(t, "42\n", r.Output, "the value of x, kept from the last run")
	require.Contains(t, text, "exit code 0")

	// node is javascript; a later run names the language again.
	r, text = c.run(map[string]any{"command": "let y = 5", "session": "js", "language": "node"})
	require.Equal(t, 0, *r.ExitCode, text)
	r, text = c.run(map[string]any{"command": "y*2", "session": "js", "language": "javascript"})
	require.Equal(t, 0, *r.ExitCode, text)
	require.Equal(t, "10\n", r.Output)

	r, text = c.run(map[string]any{"command": "1/0", "session": "py"})
	require.False(t, r.Running)
	require.Equal(t, 1, *r.ExitCode, text)
	require.Contains(t, text, "exit code 1")
	require.Contains(t, r.Output, "Traceback")
	require.Contains(t, r.Output, "ZeroDivisionError")
	r, _ = c.run(map[string]any{"command": "print(x + 1)", "session": "py"})
	require.Equal(t, "43\n", r.Output, "the context lives on with its state")

	// A cell waiting in input() comes back, and interact answers it.
	done := c.waitsThenAnswers(map[string]any{"command": "n = input('name? ')\nprint('hi', n, x)", "session": "py"}, "ada\n")
	require.Contains(t, done.Output, "hi ada 42")

	text = c.toolError("run", map[string]any{"command": "1", "session": "both", "shell": "bash", "language": "python"})
	require.Contains(t, text, "shell and language together")
	require.Contains(t, text, "only one")

	c.run(map[string]any{"command": "true", "session": "sh"})
	text = c.toolError("run", map[string]any{"command": "1", "session": "sh", "language": "python"})
	require.Contains(t, text, `session "sh" is a bash shell session`)
	require.Contains(t, text, `another session (e.g. session "sh-py")`)
	text = c.toolError("run", map[string]any{"command": "1", "session": "py", "language": "js"})
	require.Contains(t, text, `session "py" is a python code context, not a javascript code context`)
	text = c.toolError("run", map[string]any{"command": "1", "session": "py2", "language": "cobol"})
	require.Contains(t, text, "use python or javascript")

	var l mcpserver.ListOutput
	text = c.ok("list", nil, &l)
	kinds := map[string][2]string{} // name → shell, language
	for _, s := range l.Sessions {
		kinds[s.Name] = [2]string{s.Shell, s.Language}
	}
	require.Equal(t, [2]string{"", "python"}, kinds["py"], "%+v", l.Sessions)
	require.Equal(t, [2]string{"", "javascript"}, kinds["js"], "%+v", l.Sessions)
	require.Equal(t, [2]string{"bash", ""}, kinds["sh"], "%+v", l.Sessions)
	require.True(t, slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
		return strings.HasPrefix(line, "  py (") && strings.Contains(line, "python code")
	}), text)
	require.Contains(t, text, "  js (")
	require.Contains(t, text, "javascript code")
}
