package localsandbox

import (
	"context"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"

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

// A Session that New did not make says so from every method, rather than
// panicking (Ports, Stop, a Run with an absolute working directory) or
// reading and writing files against this process's working directory.
func TestSessionNotMadeByNew(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cwd := t.TempDir()
	for name, s := range map[string]*Session{"zero": {}, "nil": nil} {
		var r Sandbox
		assert.NotPanics(t, func() { r = s.Restricted() }, "%s: Restricted", name)
		calls := map[string]func() error{
			"Run": func() error {
				_, err := s.Run(ctx, RunOptions{Command: "touch ran", WorkingDirectory: cwd})
				return err
			},
			"restricted Spawn": func() error {
				_, err := r.Spawn(ctx, RunOptions{Command: "touch ran", WorkingDirectory: cwd})
				return err
			},
			"WriteFile": func() error { return s.WriteTextFile("written", "x") },
			"ReadFile": func() error {
				_, _, err := r.ReadFile("misuse_test.go") // in the working directory of go test
				return err
			},
			"Stop": s.Stop,
		}
		for call, f := range calls {
			panicked, err := bounded(ctx, f)
			assert.Nil(t, panicked, "%s: %s panicked", name, call)
			assert.ErrorContains(t, err, "localsandbox.New", "%s: %s", name, call)
		}
		assert.NotPanics(t, func() {
			assert.Empty(t, s.Ports(), "%s: Ports", name)
			assert.Empty(t, s.Dir(), "%s: Dir", name)
			_, err := s.PortEndpoint(1, "")
			assert.ErrorIs(t, err, ErrPortNotLeased, "%s: PortEndpoint", name)
		}, name)
	}
	entries, err := os.ReadDir(cwd)
	require.NoError(t, err)
	assert.Empty(t, entries, "a command ran in a session New did not make")
	_, err = os.Stat("written")
	assert.ErrorIs(t, err, fs.ErrNotExist, "WriteFile wrote into this process's working directory")
}

// bounded calls f and returns what it panicked with or its error, or the
// error of ctx when f has not returned by ctx's end: a panic with a lock
// held left the next call waiting for ever.
func bounded(ctx context.Context, f func() error) (panicked any, err error) {
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panicked = recover()
			done <- r
		}()
		r.err = f()
	}()
	select {
	case r := <-done:
		return r.panicked, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Zero RunOptions are an error that names the option to set: it said
// "give cmd or argv", which are no options of this package.
func TestEmptyCommandNamesTheOption(t *testing.T) {
	t.Parallel()
	ctx := hangGuard(t)
	s := newSession(t)
	_, err := s.Run(ctx, RunOptions{})
	assert.ErrorContains(t, err, "RunOptions.Command is empty", "Run")
	_, err = s.Spawn(ctx, RunOptions{OpenStdin: true})
	assert.ErrorContains(t, err, "RunOptions.Command is empty", "Spawn")
}

// A Process that Spawn did not return (the nil of a failed Spawn, or a zero
// value) says so from every method: each of them panicked, so a deferred
// Kill written before Spawn's error was looked at turned the error into a
// panic.
func TestProcessNotSpawned(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := newSession(t)
	failed, err := s.Spawn(ctx, RunOptions{})
	require.Error(t, err)
	for name, p := range map[string]*Process{"failed Spawn's": failed, "zero": {}} {
		calls := map[string]func() error{
			"Wait": func() error {
				_, err := p.Wait(ctx)
				return err
			},
			"WriteStdin":   func() error { return p.WriteStdin([]byte("x")) },
			"CloseStdin":   p.CloseStdin,
			"WaitForInput": func() error { return p.WaitForInput(ctx) },
			"Stdout": func() error {
				_, err := io.ReadAll(p.Stdout())
				return err
			},
			"Stderr": func() error {
				_, err := p.Stderr().Read(make([]byte, 1))
				return err
			},
		}
		for call, f := range calls {
			panicked, err := bounded(ctx, f)
			assert.Nil(t, panicked, "%s Process: %s panicked", name, call)
			assert.ErrorContains(t, err, "not started by Spawn", "%s Process: %s", name, call)
		}
		panicked, err := bounded(ctx, p.Kill)
		assert.False(t, panicked != nil || err != nil, "%s Process: Kill: %v, panicked: %v", name, err, panicked)
		assert.NotPanics(t, func() {
			assert.Zero(t, p.PID(), "%s Process: PID", name)
			assert.False(t, p.WaitingForInput(), "%s Process: WaitingForInput", name)
		}, name)
	}
}
