package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// TestMaxCommandBytes checks that a command text over --max-command-bytes is
// refused with 413 naming the limit, on every route that takes one, and that
// a text under it runs, also when it is too large for the in-process syntax
// check.
func TestMaxCommandBytes(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	d := start(t, server.Options{MaxCommandBytes: limit})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)

	big := "echo " + strings.Repeat("a", limit)
	_, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: big}})
	requireCode(t, err, client.CodePayloadTooLarge)
	require.ErrorContains(t, err, "--max-command-bytes")
	_, err = d.c.Submit(ctx(t), s.ID, client.CommandOptions{Cmd: big})
	requireCode(t, err, client.CodePayloadTooLarge)
	_, _, err = d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{Cmd: big}})
	requireCode(t, err, client.CodePayloadTooLarge)
	_, err = d.c.Start(ctx(t), client.StartOptions{Cmd: big})
	requireCode(t, err, client.CodePayloadTooLarge)

	// 200 KiB of text, as words: over what the parser is given in process.
	words := strings.Repeat("a ", 100<<10)
	r, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "printf '%s\\n' " + words + "| wc -l"}})
	require.NoError(t, err)
	require.Equal(t, 0, exitCode(t, r.WaitResult), "stderr %q", r.Stderr)
	require.Equal(t, "102400", strings.TrimSpace(r.Stdout))
	r, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo " + words + "'"}})
	require.NoError(t, err)
	require.Equal(t, 2, exitCode(t, r.WaitResult))
	require.Contains(t, r.Stderr, "unexpected EOF")

	// The default is 1 MiB.
	d2 := start(t, server.Options{})
	_, _, err = d2.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{Cmd: "#" + strings.Repeat("x", server.DefaultMaxCommandBytes)}})
	requireCode(t, err, client.CodePayloadTooLarge)
}

// TestLogBudget checks that past --log-budget the logs of the processes that
// ended first are dropped, that their pages and records say so, and that a
// deleted process no longer counts.
func TestLogBudget(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogBudget: 1 << 20})
	const size = 300_000
	var ids []string
	for range 5 {
		r := d.run(t, client.StartOptions{Cmd: "head -c 300000 /dev/zero | tr '\\0' x"})
		require.Equal(t, size, len(r.Stdout))
		ids = append(ids, r.ProcessID)
	}
	require.LessOrEqual(t, server.LogBudgetUsed(d.srv), int64(1<<20))
	for i, id := range ids {
		page, err := d.c.Logs(ctx(t), id, client.LogsOptions{})
		require.NoError(t, err)
		p, err := d.c.Get(ctx(t), id)
		require.NoError(t, err)
		if i < 2 {
			require.Empty(t, page.Items, "process %d of 5 ended first: its logs are dropped", i+1)
			require.True(t, page.TruncatedHead)
			require.True(t, p.TruncatedHead)
			continue
		}
		got := 0
		for cursor := ""; ; cursor = page.Next {
			page, err = d.c.Logs(ctx(t), id, client.LogsOptions{Cursor: cursor})
			require.NoError(t, err)
			if len(page.Items) == 0 {
				break
			}
			require.False(t, page.TruncatedHead)
			got += len(joinFrames(t, page.Items, func(string) bool { return true }))
		}
		require.Equal(t, size, got, "process %d of 5 keeps its logs", i+1)
	}
	for _, id := range ids {
		require.NoError(t, d.c.Delete(ctx(t), id))
	}
	require.Zero(t, server.LogBudgetUsed(d.srv), "deleted processes no longer count")
}
