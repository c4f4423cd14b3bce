package shellsession

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/behaviourcases"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestBehaviour runs every case of testdata/behaviour.json on every shell.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	cases, err := behaviourcases.Load()
	require.NoError(t, err)
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					t.Parallel()
					runCase(t, shell, c)
				})
			}
		})
	}
}

func runCase(t *testing.T, shell string, c behaviourcases.Case) {
	w, err := c.For(shell)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	sub := func(s string) string { return behaviourcases.Sub(s, dir) }
	s := newSession(t, Options{Shell: shell, Cwd: dir})
	for _, cmd := range c.Setup {
		run(t, s, CommandOptions{Cmd: sub(cmd)})
	}
	res, stdout, stderr := run(t, s, CommandOptions{Cmd: sub(c.Cmd)})
	require.Equal(t, process.Exited, res.Reason, "reason (stderr %q)", stderr)
	require.Equal(t, sub(w.Stdout), stdout, "stdout")
	if w.Stderr != nil {
		require.Equal(t, sub(*w.Stderr), stderr, "stderr")
	} else {
		require.Contains(t, stderr, *w.Has, "stderr")
	}
	if w.Exit != nil {
		require.Equal(t, *w.Exit, code(res), "exit code (stderr %q)", stderr)
	}
	if w.Cwd != "" {
		require.Equal(t, sub(w.Cwd), s.Cwd(), "cwd")
	}
	// The session is unharmed: one more command runs and reports.
	res, stdout, _ = run(t, s, CommandOptions{Cmd: "echo still-alive"})
	require.True(t, strings.HasSuffix(stdout, "still-alive\n"), fmt.Sprintf("%+v %q", res, stdout))
}
