package localsandbox

import (
	"context"
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
