package server_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// budget returns the budget named name from the daemon's health answer.
func (d *daemon) budget(t *testing.T, name string) client.BudgetUse {
	t.Helper()
	h, err := d.c.Health(ctx(t))
	require.NoError(t, err)
	for _, b := range h.Budgets {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no budget %s in %+v", name, h)
	return client.BudgetUse{}
}

// TestMaxEnded: over MaxEnded ended records, the oldest ended go first;
// running processes and the newest ended stay.
func TestMaxEnded(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxEnded: 3})
	c := ctx(t)
	running, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	var ids []string
	for range 6 {
		_, p, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Argv: []string{"true"}}})
		require.NoError(t, err)
		require.Nil(t, p)
		list, err := d.c.List(c, client.ListOptions{State: "terminal"})
		require.NoError(t, err)
		ids = append(ids, list.Items[len(list.Items)-1].ID)
	}
	// The watcher counts a record once it saw the end: wait for it.
	for d.budget(t, "endedRecords").Used != 3 {
		require.NoError(t, c.Err())
		time.Sleep(10 * time.Millisecond)
	}
	list, err := d.c.List(c, client.ListOptions{State: "terminal"})
	require.NoError(t, err)
	var kept []string
	for _, p := range list.Items {
		kept = append(kept, p.ID)
	}
	require.Equal(t, ids[3:], kept, "the three newest ended records")
	_, err = d.c.Get(c, ids[0])
	requireCode(t, err, client.CodeNotFound)
	_, err = d.c.Get(c, running.ID)
	require.NoError(t, err, "a running process is no ended record")
	b := d.budget(t, "endedRecords")
	require.Equal(t, "--max-ended", b.Flag)
	require.EqualValues(t, 3, b.Limit)
	require.NoError(t, d.c.Kill(c, running.ID, client.KillOptions{Signal: "KILL"}))
}

// TestCommandTextKept: a record keeps the first 64 KiB of its command's
// text and says how long it was; the command itself ran whole (an exec
// command is one argument of the shell, under 128 KiB).
func TestCommandTextKept(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxCommandBytes: 1 << 20})
	c := ctx(t)
	long := ": " + strings.Repeat("x", 100<<10) + "\necho end"
	check := func(t *testing.T, r *client.RunResult, id string) {
		require.Equal(t, "end\n", r.Output, "%+v", r.WaitResult)
		p, err := d.c.Get(c, id)
		require.NoError(t, err)
		require.Len(t, p.ShellCommand, process.KeptText)
		require.Equal(t, long[:process.KeptText], p.ShellCommand)
		require.Equal(t, len(long), p.ShellCommandBytes)
		require.True(t, p.ShellCommandTruncated)
	}
	t.Run("exec", func(t *testing.T) {
		r, p, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: long}})
		require.NoError(t, err)
		require.Nil(t, p)
		check(t, r, r.ProcessID)
	})
	t.Run("session command", func(t *testing.T) {
		s, err := d.c.CreateSession(c, client.SessionOptions{})
		require.NoError(t, err)
		r, p, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: long}})
		require.NoError(t, err)
		require.Nil(t, p)
		check(t, r, r.ProcessID)
	})
	t.Run("short", func(t *testing.T) {
		r, _, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo end"}})
		require.NoError(t, err)
		p, err := d.c.Get(c, r.ProcessID)
		require.NoError(t, err)
		require.Equal(t, "echo end", p.ShellCommand)
		require.Equal(t, 8, p.ShellCommandBytes)
		require.False(t, p.ShellCommandTruncated)
	})
}

// TestStdinBudget: the bytes queued for all processes' stdin together are
// bounded; a write over the budget is refused naming its flag, with how
// much of it was queued.
func TestStdinBudget(t *testing.T) {
	t.Parallel()
	const budget = 300 << 10
	d := start(t, server.Options{StdinBudget: budget})
	c := ctx(t)
	var ids []string
	for range 2 {
		p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 60", Stdin: process.StdinOpen})
		require.NoError(t, err)
		ids = append(ids, p.ID)
	}
	// A pipe takes 64 KiB before its reader reads: what is queued is the rest.
	require.NoError(t, d.c.WriteStdin(c, ids[0], bytes.Repeat([]byte("a"), 200<<10), false))
	err := d.c.WriteStdin(c, ids[1], bytes.Repeat([]byte("b"), 200<<10), false)
	var full *client.Error
	require.True(t, errors.As(err, &full), "%v", err)
	require.Equal(t, client.CodeStdinFull, full.Code)
	require.Contains(t, full.Message, "--stdin-budget")
	require.Positive(t, full.AcceptedBytes)
	require.Less(t, full.AcceptedBytes, 200<<10)
	b := d.budget(t, "stdin")
	require.Equal(t, "--stdin-budget", b.Flag)
	require.EqualValues(t, budget, b.Limit)
	require.LessOrEqual(t, b.Used, int64(budget))
	require.Positive(t, b.Used)
	for _, id := range ids {
		require.NoError(t, d.c.Kill(c, id, client.KillOptions{Signal: "KILL"}))
	}
}

// TestHealthBudgets: /healthz shows every budget with its flag, and the
// memory limit they add up to.
func TestHealthBudgets(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogBudget: 64 << 20})
	h, err := d.c.Health(ctx(t))
	require.NoError(t, err)
	names := map[string]string{}
	for _, b := range h.Budgets {
		names[b.Name] = b.Flag
	}
	require.Equal(t, map[string]string{"logs": "--log-budget", "stdin": "--stdin-budget",
		"endedRecords": "--max-ended", "endedRecordText": ""}, names)
	require.EqualValues(t, 64<<20, d.budget(t, "logs").Limit)
	require.Greater(t, h.MemoryLimit, int64(64<<20+server.DefaultStdinBudget))
	require.Equal(t, d.srv.MemoryLimit(), h.MemoryLimit)
}
