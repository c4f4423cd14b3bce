package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/behaviourcases"
	"github.com/conchsh/conch/server"
)

var behaviourShells = []string{"bash", "dash", "zsh", "mksh", "ksh", "busybox"}

// TestBehaviour runs every case of testdata/behaviour.json through the
// daemon, on every shell: the promises hold over HTTP as in the engine.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	cases, err := behaviourcases.Load()
	require.NoError(t, err)
	d := start(t, server.Options{})
	for _, shell := range behaviourShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					t.Parallel()
					d.runCase(t, shell, c)
				})
			}
		})
	}
}

func (d *daemon) runCase(t *testing.T, shell string, c behaviourcases.Case) {
	w, err := c.For(shell)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	sub := func(s string) string { return behaviourcases.Sub(s, dir) }
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Shell: shell, Cwd: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.c.DeleteSession(ctx(t), s.ID) })
	for _, cmd := range c.Setup {
		d.runIn(t, s.ID, sub(cmd))
	}
	r := d.runIn(t, s.ID, sub(c.Cmd))
	stdout, stderr := channels(t, r)
	require.Equal(t, "exited", string(r.Reason), "reason (stderr %q)", stderr)
	require.Equal(t, sub(w.Stdout), stdout, "stdout")
	if w.Stderr != nil {
		require.Equal(t, sub(*w.Stderr), stderr, "stderr")
	} else {
		require.Contains(t, stderr, *w.Has, "stderr")
	}
	if w.Exit != nil {
		require.NotNil(t, r.ExitCode, "exit code (stderr %q)", stderr)
		require.Equal(t, *w.Exit, *r.ExitCode, "exit code (stderr %q)", stderr)
	}
	if w.Cwd != "" {
		require.Equal(t, sub(w.Cwd), r.Cwd, "cwd")
	}
	// The session is unharmed: one more command runs and reports.
	r = d.runIn(t, s.ID, "echo still-alive")
	require.Contains(t, r.Stdout, "still-alive\n")
}

// channels returns the exact bytes of the result's stdout and stderr: the
// text fields replace bytes that are not UTF-8, the logs keep them.
func channels(t *testing.T, r *client.RunResult) (stdout, stderr string) {
	require.False(t, r.Truncated)
	for _, f := range r.Logs {
		b, err := f.Bytes()
		require.NoError(t, err)
		switch f.Channel {
		case "stdout":
			stdout += string(b)
		case "stderr":
			stderr += string(b)
		}
	}
	return stdout, stderr
}
