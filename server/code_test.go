package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// cell runs code in the context to its end.
func (d *daemon) cell(t *testing.T, context, code string) *client.RunResult {
	t.Helper()
	r, p, err := d.c.RunCommand(ctx(t), context, client.CommandRunOptions{CommandOptions: client.CommandOptions{Code: code}})
	require.NoError(t, err)
	require.Nil(t, p)
	return r
}

// untilOutput waits until the process with id has written something.
func (d *daemon) untilOutput(t *testing.T, id string) {
	t.Helper()
	c := ctx(t)
	for {
		p, err := d.c.Get(c, id)
		require.NoError(t, err)
		if p.LastCursor != "" {
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("process %s wrote nothing", id)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// One Python context serves the subtests, in order: its interpreter is slow
// to start.
func TestCodeContextPython(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxCommandBytes: 1000})
	c := ctx(t)
	dir := t.TempDir()
	s, err := d.c.CreateSession(c, client.SessionOptions{Language: "python", Name: "py", Cwd: dir})
	require.NoError(t, err)
	require.Equal(t, process.KindSession, s.Kind)
	require.True(t, s.System)
	require.Equal(t, "python", s.Language)
	require.Empty(t, s.Shell)
	require.Equal(t, dir, s.Cwd)

	t.Run("state and last value", func(t *testing.T) {
		r := d.cell(t, s.ID, "x = 40\ndef f(n):\n    return n + 2\nprint('hi')")
		require.Equal(t, 0, exitCode(t, r.WaitResult))
		require.Equal(t, "hi\n", r.Stdout)
		r = d.cell(t, s.ID, "f(x)")
		require.Equal(t, 0, exitCode(t, r.WaitResult))
		require.Equal(t, "42\n", r.Stdout)

		p, err := d.c.Get(ctx(t), r.ProcessID)
		require.NoError(t, err)
		require.Equal(t, process.KindCode, p.Kind)
		require.Equal(t, "python", p.Language)
		require.Equal(t, "f(x)", p.Code)
		require.Equal(t, s.ID, p.SessionID)
		require.Empty(t, p.ShellCommand)
	})
	t.Run("exception and syntax error", func(t *testing.T) {
		r := d.cell(t, s.ID, "y = 1\nraise ValueError('boom')")
		require.Equal(t, 1, exitCode(t, r.WaitResult))
		require.Contains(t, r.Stderr, "ValueError: boom")
		r = d.cell(t, s.ID, "z = 1\nif:")
		require.Equal(t, 1, exitCode(t, r.WaitResult))
		require.Contains(t, r.Stderr, "SyntaxError")
		r = d.cell(t, s.ID, "print(y, 'z' in globals())")
		require.Equal(t, "1 False\n", r.Stdout, "state up to the exception stays; a syntax error runs nothing")
	})
	t.Run("interrupt and delete a running cell", func(t *testing.T) {
		p, err := d.c.Submit(ctx(t), s.ID, client.CommandOptions{Code: "import time\nprint('go', flush=True)\ntime.sleep(60)"})
		require.NoError(t, err)
		d.untilOutput(t, p.ID)
		requireCode(t, d.c.Delete(ctx(t), p.ID), client.CodeUnsupportedOperation)
		require.NoError(t, d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "INT"}))
		wr, _, err := d.c.Wait(ctx(t), p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, process.Signaled, wr.Reason)
		require.Equal(t, "INT", wr.Signal)
		r := d.cell(t, s.ID, "x")
		require.Equal(t, "40\n", r.Stdout, "the context lives with its state")
		require.NoError(t, d.c.Delete(ctx(t), p.ID), "an ended cell's record can be deleted")
	})
	t.Run("waiting for input", func(t *testing.T) {
		r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
			CommandOptions: client.CommandOptions{Code: "n = input('name? ')\nprint('hi', n)", Stdin: process.StdinOpen},
		})
		require.NoError(t, err)
		require.Equal(t, "name? ", r.Output)
		waitsThenAnswers(t, d, r, p, "ada\n", false, "hi ada\n")
	})
	t.Run("code over the command size limit", func(t *testing.T) {
		_, err := d.c.Submit(ctx(t), s.ID, client.CommandOptions{Code: "x = '" + strings.Repeat("a", 1000) + "'"})
		requireCode(t, err, client.CodePayloadTooLarge)
	})
	t.Run("cmd on a context", func(t *testing.T) {
		_, err := d.c.Submit(ctx(t), s.ID, client.CommandOptions{Cmd: "echo hi"})
		requireCode(t, err, client.CodeInvalidArgument)
		require.ErrorContains(t, err, "send its cell as code")
	})
	t.Run("listed and deleted as a session", func(t *testing.T) {
		ss, err := d.c.Sessions(ctx(t))
		require.NoError(t, err)
		require.Len(t, ss, 1)
		require.Equal(t, s.ID, ss[0].ID)
		require.Equal(t, "python", ss[0].Language)
		require.NoError(t, d.c.DeleteSession(ctx(t), s.ID))
		_, err = d.c.Session(ctx(t), s.ID)
		requireCode(t, err, client.CodeNotFound)
		_, err = d.c.Submit(ctx(t), s.ID, client.CommandOptions{Code: "1"})
		requireCode(t, err, client.CodeNotFound)
	})
}

func TestCodeContextJavaScript(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{Language: "node"})
	require.NoError(t, err)
	require.Equal(t, "javascript", s.Language)

	r := d.cell(t, s.ID, "let n = 41; console.log('hi')")
	require.Equal(t, 0, exitCode(t, r.WaitResult))
	require.Equal(t, "hi\n", r.Stdout)
	r = d.cell(t, s.ID, "n + 1")
	require.Equal(t, "42\n", r.Stdout)
	r = d.cell(t, s.ID, "throw new Error('boom')")
	require.Equal(t, 1, exitCode(t, r.WaitResult))
	require.Contains(t, r.Stderr, "boom")

	p, err := d.c.Submit(c, s.ID, client.CommandOptions{Code: "console.log('go'); while (true) {}"})
	require.NoError(t, err)
	d.untilOutput(t, p.ID)
	require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "INT"}))
	wr, _, err := d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	require.Equal(t, "INT", wr.Signal)
	r = d.cell(t, s.ID, "n")
	require.Equal(t, "41\n", r.Stdout)

	// A cell awaiting its stdin comes back waiting for input.
	r, p, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Code: "process.stdout.write('name? ')\nlet a = ''\nfor await (const b of process.stdin) { a += b; break }\nconsole.log('hi ' + a.trim())", Stdin: process.StdinOpen},
	})
	require.NoError(t, err)
	require.Equal(t, "name? ", r.Output)
	waitsThenAnswers(t, d, r, p, "ada\n", false, "hi ada\n")

	// process.exit ends the context as exit ends a shell session.
	r = d.cell(t, s.ID, "process.exit(3)")
	require.Equal(t, 3, exitCode(t, r.WaitResult))
	_, err = d.c.Submit(c, s.ID, client.CommandOptions{Code: "n"})
	requireCode(t, err, client.CodeUnsupportedOperation)
	require.NoError(t, d.c.DeleteSession(c, s.ID))
	_, err = d.c.Get(c, s.ID)
	requireCode(t, err, client.CodeNotFound)
}

// Refusals need no interpreter, except code on a shell session.
func TestCodeContextRefused(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for name, opts := range map[string]client.SessionOptions{
		"shell and language": {Shell: "bash", Language: "python"},
		"unknown language":   {Language: "cobol"},
		"login":              {Language: "python", Login: true},
	} {
		_, err := d.c.CreateSession(c, opts)
		requireCode(t, err, client.CodeInvalidArgument)
		require.ErrorContains(t, err, map[string]string{
			"shell and language": "not both", "unknown language": "unknown language", "login": "login",
		}[name], name)
	}
	status, body := d.raw(t, http.MethodPost, "/v1/sessions", `{"language":"python","shell":"sh"}`, authed())
	require.Equal(t, http.StatusBadRequest, status, body)

	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	_, err = d.c.Submit(c, s.ID, client.CommandOptions{Code: "print(1)"})
	requireCode(t, err, client.CodeInvalidArgument)
	require.ErrorContains(t, err, "send a command as cmd")
	ss, err := d.c.Sessions(c)
	require.NoError(t, err)
	require.Len(t, ss, 1, "no refused context was created")
}
