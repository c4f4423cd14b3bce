package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
)

// TestCell: a table shows control characters and bytes that are not UTF-8
// as escapes, so that a name, a directory or a command line a command chose
// cannot drive the terminal that shows it.
func TestCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                           "-",
		"plain é €":                  "plain é €",
		"x\x1b[31mred\x1b]0;title\a": `x\x1b[31mred\x1b]0;title\x07`,
		"a\tb\nc\rd\x7f":             `a\x09b\x0ac\x0dd\x7f`,
		"csi\u009b2J":                `csi\u009b2J`,
		"bad\xff\xfe utf-8 \xe2\x82": `bad\xff\xfe utf-8 \xe2\x82`,
	} {
		require.Equal(t, want, cell(in), "%q", in)
	}
}

// conch ps and conch session ls print what commands chose (names,
// command lines, directories) with no escape sequence in it: they printed
// them raw, and a name could clear the screen or retitle the window of the
// operator who listed the processes.
func TestTablesEscapeControls(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	ctx := t.Context()
	const evil = "\x1b]0;pwned\a\x1b[2J"
	_, err := s.c.Start(ctx, client.StartOptions{Cmd: "echo " + evil, Name: "n" + evil})
	require.NoError(t, err)
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{Name: "s" + evil})
	require.NoError(t, err)
	dir := t.TempDir() + "/d" + evil
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, _, err = s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "cd '" + dir + "'"}})
	require.NoError(t, err)
	for _, args := range [][]string{{"ps", "--state", "all"}, {"session", "ls"}} {
		cmd := s.command(args...)
		out, err := cmd.Output()
		require.NoError(t, err)
		require.Equal(t, -1, bytes.IndexByte(out, 0x1b), "%s: %q", args, out)
		require.Contains(t, string(out), `\x1b]0;pwned\x07\x1b[2J`, "%s shows them escaped", args)
		if args[0] == "session" {
			require.True(t, strings.Contains(string(out), `/d\x1b]0;pwned`), "the cwd: %q", out)
		}
	}
}

// conch ps and conch session ls keep their rows short: a long result (a
// failed command's reason runs to 400 bytes), name (up to 1 KiB) or command
// line is cut, with "...", where it made every row of the table as wide as
// the longest, hundreds of columns, once one process had it. --json keeps
// them whole.
func TestTablesCutLongCells(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	ctx := t.Context()
	long := strings.Repeat("n", 900)
	p, err := s.c.Start(ctx, client.StartOptions{Cmd: "true", Name: long})
	require.NoError(t, err)
	sess, err := s.c.CreateSession(ctx, client.SessionOptions{Name: long})
	require.NoError(t, err)
	// A command whose shell cannot report its end fails with a long reason.
	run1 := func(cmd string) *client.RunResult {
		r, _, err := s.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: cmd}})
		require.NoError(t, err)
		return r
	}
	run1("readonly __conch")
	r := run1("true")
	require.Equal(t, "failed", string(r.Reason))
	require.Greater(t, len(r.Error), 200)
	run := func(args ...string) string {
		cmd := s.command(args...)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", args)
		return string(out)
	}
	for _, args := range [][]string{{"ps", "--state", "all"}, {"session", "ls"}} {
		out := run(args...)
		require.Contains(t, out, "nnn...", "%s shows the name's start", args)
		for line := range strings.Lines(out) {
			require.LessOrEqual(t, len(line), 300, "%s: %q", args, line)
		}
	}
	require.Contains(t, run("ps", "--state", "all"), p.ID)
	require.Contains(t, run("ps", "--state", "all", "--json"), long, "--json keeps the name whole")
}
