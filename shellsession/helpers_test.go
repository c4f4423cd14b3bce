package shellsession

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// testShells are the shells every behaviour row runs on. CI installs them
// all; a missing one fails the run rather than skipping it.
var testShells = []string{"bash", "dash", "zsh", "mksh", "ksh", "busybox"}

// deadline bounds every blocking step of a test.
const deadline = 30 * time.Second

func output(c *Command) (stdout, stderr string) { return processtest.Output(c.Log()) }

func newSession(t *testing.T, opts Options) *Session {
	t.Helper()
	if _, err := exec.LookPath(opts.Shell); opts.Shell != "" && err != nil {
		t.Fatalf("shell %s is not installed: %v", opts.Shell, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	s, err := New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// run runs cmd in s and returns its result and output.
func run(t *testing.T, s *Session, opts CommandOptions) (process.Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	c, r, err := s.Run(ctx, opts)
	if err != nil {
		// Say how the session ended, and what its shell said last.
		t.Fatalf("command %q: %v; session %+v; the shell said %q", opts.Cmd, err, s.Info().Result, s.diag.Tail())
	}
	o, e := output(c)
	return r, o, e
}

func code(r process.Result) int { return processtest.Code(r) }

// expectRun runs cmd in s and requires that it exit with status and print
// stdout.
func expectRun(t *testing.T, s *Session, cmd string, status int, stdout string) {
	t.Helper()
	r, out, errOut := run(t, s, CommandOptions{Cmd: cmd})
	require.Equal(t, status, code(r), "%q: %+v, stderr %q", cmd, r, errOut)
	require.Equal(t, stdout, out, "%q", cmd)
}

// requireEnds fails t unless s ends within the deadline; what says what
// it ended after.
func requireEnds(t *testing.T, s *Session, what string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(deadline):
		t.Fatalf("the session lives on after %s", what)
	}
}
