package localsandbox

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A nil context is an error that says what to pass, from every method that
// takes one: each of them panicked on it.
func TestNilContextIsAnError(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t)
	s := newSession(t)
	var none context.Context // what a careless caller passes
	calls := map[string]func() error{
		"Run": func() error {
			_, err := s.Run(none, RunOptions{Command: "touch ran"})
			return err
		},
		"Spawn": func() error {
			_, err := s.Spawn(none, RunOptions{Command: "touch ran"})
			return err
		},
		"restricted Run": func() error {
			_, err := s.Restricted().Run(none, RunOptions{Command: "touch ran"})
			return err
		},
	}
	p, err := s.Spawn(ctx, RunOptions{Command: "cat", OpenStdin: true})
	require.NoError(t, err)
	calls["Wait"] = func() error { _, err := p.Wait(none); return err }
	calls["WaitForInput"] = func() error { return p.WaitForInput(none) }
	for name, call := range calls {
		var err error
		assert.NotPanics(t, func() { err = call() }, name)
		assert.ErrorContains(t, err, "context.Background()", "%s with a nil context", name)
	}
	_, ok, _ := s.ReadFile("ran")
	assert.False(t, ok, "a command ran under a nil context")
	require.NoError(t, p.CloseStdin())
	code, err := p.Wait(ctx)
	assert.False(t, code != 0 || err != nil, "the process a nil-context Wait was asked about: %d, %v", code, err)
}

// Run and Spawn after Stop return ErrStopped whatever else is wrong with
// the call: a harness removes the directory once the session is stopped,
// and a late Run said that its working directory did not exist.
func TestStoppedBeforeAnyOtherError(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t)
	dir := t.TempDir()
	s, err := New(dir)
	require.NoError(t, err)
	require.NoError(t, s.Stop())
	require.NoError(t, os.Remove(dir))
	for name, opts := range map[string]RunOptions{
		"directory gone":   {Command: "true"},
		"bad env name":     {Command: "true", Env: map[string]string{"A=B": "x"}},
		"missing workdir":  {Command: "true", WorkingDirectory: "/nonexistent"},
		"command with NUL": {Command: "a\x00b"},
	} {
		_, err := s.Run(ctx, opts)
		assert.ErrorIs(t, err, ErrStopped, "Run, %s", name)
		_, err = s.Restricted().Spawn(ctx, opts)
		assert.ErrorIs(t, err, ErrStopped, "Spawn, %s", name)
	}
}
