package mcpserver_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/mcpserver"
)

// TestEndedSessionKeepsItsKind ends a code context and a dash session from
// within: the answer says the session ended, the next run's error says what
// the run after it starts, and that one starts the same kind again (a
// python context came back as bash, which took the code for shell text).
// A language that does not match is refused as for a running session, and
// close_session forgets the kind.
func TestEndedSessionKeepsItsKind(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()

	c.run(map[string]any{"command": "x = 41", "session": "py", "language": "python"})
	r, text := c.run(map[string]any{"command": "import sys; sys.exit(4)", "session": "py"})
	require.Equal(t, 4, *r.ExitCode, text)
	require.Contains(t, r.Note, "the session has ended: its python interpreter is gone", text)
	text = c.toolError("run", map[string]any{"command": "print(x + 1)", "session": "py"})
	require.Contains(t, text, `session "py" has ended`)
	require.Contains(t, text, "run again to start a new python context")
	r, text = c.run(map[string]any{"command": "print(6 * 7)", "session": "py"})
	require.Equal(t, 0, *r.ExitCode, text)
	require.Equal(t, "42\n", r.Output, "python again")

	// A shell session keeps its shell; a shell asked for in vain says so.
	c.run(map[string]any{"command": "true", "session": "d", "shell": "dash"})
	r, text = c.run(map[string]any{"command": "exit 3", "session": "d"})
	require.Equal(t, 3, *r.ExitCode, text)
	require.Contains(t, r.Note, "the session has ended: its dash shell is gone", text)
	text = c.toolError("run", map[string]any{"command": "echo $0", "session": "d"})
	require.Contains(t, text, "run again to start a new dash session")
	r, text = c.run(map[string]any{"command": "echo $0", "session": "d", "shell": "bash"})
	require.Contains(t, r.Output, "dash", text)
	require.Contains(t, r.Note, "keeps its kind", text)

	// Ended again (a JavaScript exit): another language is refused, and
	// nothing is made.
	c.run(map[string]any{"command": "let y = 1", "session": "js", "language": "javascript"})
	c.run(map[string]any{"command": "process.exit(2)", "session": "js"})
	c.toolError("run", map[string]any{"command": "y", "session": "js"})
	text = c.toolError("run", map[string]any{"command": "1", "session": "js", "language": "python"})
	require.Contains(t, text, `session "js" is a javascript code context (it has ended`)
	r, text = c.run(map[string]any{"command": "typeof y", "session": "js"})
	require.Equal(t, "'undefined'\n", r.Output, text)

	kinds := map[string][2]string{}
	for _, s := range c.list().Sessions {
		if s.State != "terminal" {
			kinds[s.Name] = [2]string{s.Shell, s.Language}
		}
	}
	require.Equal(t, map[string][2]string{"py": {"", "python"}, "d": {"dash", ""}, "js": {"", "javascript"}}, kinds)

	// close_session forgets the kind: the name is new again.
	c.run(map[string]any{"command": "import sys; sys.exit(0)", "session": "py"})
	c.ok("close_session", map[string]any{"session": "py"}, &mcpserver.CloseOutput{})
	r, text = c.run(map[string]any{"command": "echo $BASH_VERSION", "session": "py"})
	require.Equal(t, 0, *r.ExitCode, text)
	require.NotEqual(t, "\n", r.Output, "a bash session")
}

// TestSharedDaemonSessions: conch mcp --url started again (as an MCP host
// does for each of its sessions) goes on in the daemon's sessions of the
// names it is given, listed and closed by name, rather than start new ones
// and leave the old ones running out of reach. Two at once share them.
func TestSharedDaemonSessions(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	first := startMCP(t, env, "--url", d.URL())
	first.run(map[string]any{"command": "cd sub; export V=kept", "cwd": dir})
	first.run(map[string]any{"command": "x = 41", "session": "py", "language": "python"})
	first.close()

	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	names := map[string]string{}
	for _, s := range c.list().Sessions {
		names[s.Name] = s.Language
	}
	require.Equal(t, map[string]string{"main": "", "py": "python"}, names)
	r, text := c.run(map[string]any{"command": `echo "V=$V"`})
	require.Equal(t, "V=kept\n", r.Output, text)
	require.Equal(t, filepath.Join(dir, "sub"), r.Cwd)
	require.Contains(t, r.Note, "the daemon's running session", text)
	r, text = c.run(map[string]any{"command": "print(x + 1)", "session": "py"})
	require.Equal(t, "42\n", r.Output, text)

	// Another at once shares them.
	other := startMCP(t, env, "--url", d.URL())
	r, text = other.run(map[string]any{"command": "x = 7", "session": "py"})
	require.Equal(t, 0, *r.ExitCode, text)
	other.close()
	r, text = c.run(map[string]any{"command": "print(x)", "session": "py"})
	require.Equal(t, "7\n", r.Output, text)

	// One that never ran in main closes it.
	last := startMCP(t, env, "--url", d.URL())
	var closed mcpserver.CloseOutput
	last.ok("close_session", map[string]any{}, &closed)
	last.close()
	left, err := d.Sessions(t.Context())
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(left, func(p client.Process) bool { return p.Name == "main" && !p.Ended() }),
		"main closed: %+v", left)
	require.True(t, slices.ContainsFunc(left, func(p client.Process) bool { return p.Name == "py" && !p.Ended() }))
}
