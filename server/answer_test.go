package server_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/server"
)

// joinFrames returns the bytes of the frames on the channels keep accepts.
func joinFrames(t *testing.T, frames []client.LogFrame, keep func(string) bool) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		if keep(f.Channel) {
			data, err := f.Bytes()
			require.NoError(t, err)
			b.Write(data)
		}
	}
	return b.String()
}

// requireConsistent checks that the text fields of r hold the bytes of its
// frames, and that next is its last frame's cursor.
func requireConsistent(t *testing.T, r *client.RunResult) {
	t.Helper()
	require.Equal(t, joinFrames(t, r.Logs, func(string) bool { return true }), r.Output)
	require.Equal(t, joinFrames(t, r.Logs, func(c string) bool { return c != "stderr" }), r.Stdout)
	require.Equal(t, joinFrames(t, r.Logs, func(c string) bool { return c == "stderr" }), r.Stderr)
	require.NotEmpty(t, r.Logs)
	require.Equal(t, r.Logs[len(r.Logs)-1].Cursor, r.Next)
}

// TestRunOutputLimit checks that a run's answer keeps the head and tail of a
// long output within outputLimit, says what it left out, and that the logs
// from omittedAfter give exactly that.
func TestRunOutputLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	var full strings.Builder
	for i := 1; i <= 300_000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	const limit = 256 << 10 // at least two of the largest frames
	r, p, err := d.c.Run(ctx(t), client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "seq 300000"},
		OutputLimit:  limit,
	})
	require.NoError(t, err)
	require.Nil(t, p)
	requireConsistent(t, r)
	require.False(t, r.Truncated)
	require.LessOrEqual(t, len(r.Output), limit)
	require.Greater(t, len(r.Output), limit-logstore.MaxFrame)
	require.Equal(t, int64(full.Len()-len(r.Output)), r.OmittedBytes)

	// The head ends at omittedAfter; the rest of the answer is the tail.
	var head, tail []client.LogFrame
	for i, f := range r.Logs {
		if f.Cursor == r.OmittedAfter {
			head, tail = r.Logs[:i+1], r.Logs[i+1:]
		}
	}
	require.NotEmpty(t, head, "omittedAfter %q is the cursor of a frame in the answer", r.OmittedAfter)
	require.NotEmpty(t, tail)
	all := func(string) bool { return true }
	headText, tailText := joinFrames(t, head, all), joinFrames(t, tail, all)
	require.LessOrEqual(t, len(headText), limit/2)
	require.True(t, strings.HasPrefix(full.String(), headText))
	require.True(t, strings.HasSuffix(full.String(), tailText))

	// The omitted frames are those after omittedAfter, before the tail.
	var omitted strings.Builder
	cursor := r.OmittedAfter
	for cursor != "" {
		page, err := d.c.Logs(ctx(t), r.ProcessID, client.LogsOptions{Cursor: cursor})
		require.NoError(t, err)
		for _, f := range page.Items {
			if f.Cursor == tail[0].Cursor {
				cursor = ""
				break
			}
			omitted.WriteString(f.Data)
		}
		require.NotEmpty(t, page.Items, "the tail's first frame comes after the omitted ones")
		if cursor != "" {
			cursor = page.Next
		}
	}
	require.Equal(t, full.String(), headText+omitted.String()+tailText)
}

// TestRunOutputDefaultLimit checks that an answer holds at most about 1 MiB
// of output by default, and that a short output is whole, with no omission.
func TestRunOutputDefaultLimit(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)

	r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "head -c 3000000 /dev/zero; echo done >&2"},
	})
	require.NoError(t, err)
	require.Nil(t, p)
	requireConsistent(t, r)
	require.LessOrEqual(t, len(r.Output), server.DefaultOutputLimit)
	require.Equal(t, int64(3000000+len("done\n")-len(r.Output)), r.OmittedBytes)
	require.Equal(t, "done\n", r.Stderr, "the tail holds the end of the output")
	require.Equal(t, strings.Repeat("\x00", len(r.Stdout)), r.Stdout)

	r, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "echo out; echo err >&2"},
		OutputLimit:    4,
	})
	require.NoError(t, err)
	requireConsistent(t, r)
	require.Equal(t, "out\n", r.Stdout, "a frame over half the limit is still whole, at each end")
	require.Equal(t, "err\n", r.Stderr)
	require.Zero(t, r.OmittedBytes)
	require.Empty(t, r.OmittedAfter)
}

// TestRunOutputLimitArgument checks outputLimit's range: negative is
// refused; more than the retention is the retention.
func TestRunOutputLimitArgument(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 64 << 10})
	code, body := d.raw(t, "POST", "/v1/processes/run", `{"cmd":"true","outputLimit":-1}`, authed())
	require.Equal(t, 400, code, body)
	require.Contains(t, body, "outputLimit")

	r, _, err := d.c.Run(ctx(t), client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "seq 100000"},
		OutputLimit:  1 << 30,
	})
	require.NoError(t, err)
	requireConsistent(t, r)
	require.True(t, r.Truncated)
	require.Zero(t, r.OmittedBytes)
}

// TestLogsPageBytes checks that a logs page without a limit holds at most
// 1 MiB of frames, and that pages from next give the whole output.
func TestLogsPageBytes(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const size = 3_000_000
	r := d.run(t, client.StartOptions{Cmd: "head -c " + strconv.Itoa(size) + " /dev/zero | tr '\\0' x"})
	got, cursor, pages := 0, "", 0
	for {
		page, err := d.c.Logs(ctx(t), r.ProcessID, client.LogsOptions{Cursor: cursor})
		require.NoError(t, err)
		if len(page.Items) == 0 {
			break
		}
		bytes := len(joinFrames(t, page.Items, func(string) bool { return true }))
		require.LessOrEqual(t, bytes, 1<<20)
		got += bytes
		cursor = page.Next
		pages++
	}
	require.Equal(t, size, got)
	require.GreaterOrEqual(t, pages, 3)
}

// TestTinyWritesUnderRetention is issue 11's case: under a retention of
// 1 MiB, 50,000 echo lines (about 540 KB) come back whole, not truncated.
func TestTinyWritesUnderRetention(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 1 << 20})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	r, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Cmd: "for i in $(seq 50000); do echo line $i; done"},
	})
	require.NoError(t, err)
	var want strings.Builder
	for i := 1; i <= 50_000; i++ {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	require.False(t, r.Truncated)
	require.Zero(t, r.OmittedBytes)
	require.Equal(t, want.String(), r.Stdout)
}
