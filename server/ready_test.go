package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// requireServes requires that an HTTP server answers on port.
func requireServes(t *testing.T, port int) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	require.NoError(t, err)
	resp.Body.Close()
}

func TestReady(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const serve = `python3 -m http.server 0 --bind 127.0.0.1 --directory /`
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh+" exec port", func(t *testing.T) {
			t.Parallel()
			p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: serve, Shell: sh})
			require.NoError(t, err)
			defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
			r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Port: "any"})
			require.NoError(t, err)
			require.Nil(t, still)
			require.True(t, r.Ready)
			requireServes(t, r.Port)
			// The port it found, asked by number, is ready at once.
			r, _, err = d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Port: fmt.Sprint(r.Port)})
			require.NoError(t, err)
			require.True(t, r.Ready)
		})
		t.Run(sh+" session port", func(t *testing.T) {
			t.Parallel()
			s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Shell: sh})
			require.NoError(t, err)
			cmd, _, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
				CommandOptions: client.CommandOptions{Cmd: serve + " >/dev/null 2>&1 &"},
			})
			require.NoError(t, err)
			r, still, err := d.c.Ready(ctx(t), cmd.ProcessID, client.ReadyOptions{Port: "any"})
			require.NoError(t, err)
			require.Nil(t, still)
			require.True(t, r.Ready)
			requireServes(t, r.Port)
		})
		t.Run(sh+" pattern across frames", func(t *testing.T) {
			t.Parallel()
			p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `printf 'server rea'; sleep 0.3; printf 'dy on 80\n'; sleep 30`, Shell: sh})
			require.NoError(t, err)
			defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
			r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: `ready on [0-9]+`})
			require.NoError(t, err)
			require.Nil(t, still)
			require.True(t, r.Ready)
			require.Equal(t, "ready on 80", r.Match)
			logs, err := d.c.Logs(ctx(t), p.ID, client.LogsOptions{})
			require.NoError(t, err)
			require.Len(t, logs.Items, 2, "the pattern spans two frames")
			require.Equal(t, logs.Items[1].Cursor, r.Cursor)
		})
		t.Run(sh+" ended first", func(t *testing.T) {
			t.Parallel()
			p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "echo nothing here; exit 3", Shell: sh})
			require.NoError(t, err)
			r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: "ready", Port: "any"})
			require.NoError(t, err)
			require.Nil(t, still)
			require.False(t, r.Ready)
			require.Equal(t, process.Exited, r.Result.Reason)
			require.Equal(t, 3, *r.Result.ExitCode)
		})
		t.Run(sh+" timeout", func(t *testing.T) {
			t.Parallel()
			p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "echo not yet; sleep 30", Shell: sh})
			require.NoError(t, err)
			defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
			begun := time.Now()
			r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: "ready", Timeout: 300 * time.Millisecond})
			require.NoError(t, err)
			require.Nil(t, r)
			require.NotNil(t, still, "202 with the process once the wait ran out")
			require.Equal(t, p.ID, still.ID)
			require.GreaterOrEqual(t, time.Since(begun), 300*time.Millisecond, "came back before its timeout")
		})
	}
}

// A pattern costly to match against output that keeps coming does not
// hold the wait past its timeout: the output is matched a piece at a time,
// and the wait's end is heeded between pieces. A match looked for frame by
// frame, with the window before each, never caught up with the writer, and
// the call never came back.
func TestReadyPatternHeedsItsTimeout(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `while :; do echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; done`})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: `(?:[a-z]{1,100}b){1,10}x`, Timeout: 300 * time.Millisecond})
	require.NoError(t, err, "no answer within the test's 30 s")
	require.Nil(t, r)
	require.NotNil(t, still, "202 with the process once the wait ran out")
}

// A wait whose timeout runs out while the output of a process that has
// ended is still being matched says the wait ran out (202): the pattern may
// be in what was not matched yet. It answered that the process ended first
// (ready false), though the pattern was in its output.
func TestReadyTimeoutWhileMatchingEndedOutput(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r, _, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{
		Cmd: `yes hello-world-this-is-a-long-line | head -c 2M; echo READY`}})
	require.NoError(t, err)
	require.NotNil(t, r, "ended")
	// Costly to match (a thousand steps a byte): 2 MiB take many seconds.
	ready, still, err := d.c.Ready(ctx(t), r.ProcessID, client.ReadyOptions{Pattern: `(?:[\w\s-]{1000}|x)READY`, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Nil(t, ready, "answered %+v: not matched to its end, the output may hold the pattern", ready)
	require.NotNil(t, still, "202 with the process once the wait ran out")
}

// A pattern whose matching could cost more than a wait can heed (its
// compiled size times the bytes matched at once) is refused: 60
// alternatives of [\w\s-]{1000}Q, 844 bytes, held a core for 30 s a call
// whatever its timeout, and ran on after the client had gone.
func TestReadyPatternTooComplex(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "echo out"})
	require.NoError(t, err)
	var alts []string
	for i := range 60 {
		alts = append(alts, fmt.Sprintf(`[\w\s-]{%d}Q`, 1000-i))
	}
	_, _, err = d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: "(?:" + strings.Join(alts, "|") + ")", Timeout: time.Second})
	require.True(t, client.HasCode(err, client.CodeInvalidArgument), "%v", err)
	require.ErrorContains(t, err, "too complex")
	// One that leaves a shorter window is matched there.
	ready, _, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: `[a-z\s]{1000}|out`, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, ready.Ready)
	require.Equal(t, "out", ready.Match)
}

// Under keepLogs none nothing is kept for later reading: a pattern's wait
// holds what comes while it waits, and finds it.
func TestReadyPatternKeepsNone(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `sleep 0.5; echo Ready; sleep 30`, KeepLogs: "none"})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	r, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: `(?m)^Ready$`, Timeout: 20 * time.Second})
	require.NoError(t, err)
	require.Nil(t, still, "the wait ran out")
	require.True(t, r.Ready)
	require.Equal(t, "Ready", r.Match)
}

// A pattern that matched says what it matched, empty text too: an answer
// whose match was left out because it was empty read as one that matched
// no pattern.
func TestReadyEmptyMatch(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `echo up; sleep 30`})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	code, body := d.raw(t, "GET", "/v1/processes/"+p.ID+"/ready?pattern=x*&timeout=20000", "", authed())
	require.Equal(t, http.StatusOK, code, body)
	var a map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &a))
	require.Equal(t, true, a["ready"], body)
	require.Contains(t, a, "match", body)
	require.Equal(t, "", a["match"], body)
	require.Contains(t, a, "cursor", body)
}

// A pattern too large to match is refused at little cost, before it is
// compiled: a million-byte pattern was compiled whole (a million
// instructions) only to be refused for its size, about 230 MB of the
// daemon's heap a request, three at once 760 MB of an 846 MB memory limit;
// a nested repetition of 1 KB compiles as large. Not parallel: the whole
// process's allocations are measured.
func TestReadyHugePatternRefusedCheaply(t *testing.T) {
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Argv: []string{"sleep", "60"}})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	for _, tt := range []struct{ pattern, says string }{
		{strings.Repeat("a", 1_040_000), "1040000 bytes long, at most 16384"},
		{"(?:" + strings.Repeat("a", 1000) + "){1000}", "too complex: it compiles to well over 2048 instructions"},
	} {
		pattern := tt.pattern
		path := "/v1/processes/" + p.ID + "/ready?timeout=100&pattern=" + pattern
		var code int
		var body string
		allocated := heaptest.Allocated(func() { code, body = d.raw(t, "GET", path, "", authed()) })
		t.Logf("a pattern of %d bytes: %d KiB allocated", len(pattern), allocated>>10)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "pattern: "+tt.says)
		// The request itself, a megabyte of URL, is copied a few times by
		// the client and the server.
		require.Less(t, allocated, uint64(32<<20), "refusing the pattern allocated %d MiB", allocated>>20)
	}
}

// A pattern's wait on a process that ended first says whether output it
// was to match was dropped before it read it, where the pattern may have
// been: here the head of the output, gone before the call, which matches
// from the first frame.
func TestReadySaysOutputWasDropped(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 64 << 10})
	r, _, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo READY; head -c 1000000 /dev/zero"}})
	require.NoError(t, err)
	require.True(t, r.Truncated, "retention dropped the head")
	ready, still, err := d.c.Ready(ctx(t), r.ProcessID, client.ReadyOptions{Pattern: "READY", Timeout: 20 * time.Second})
	require.NoError(t, err)
	require.Nil(t, still, "the wait ran out")
	require.False(t, ready.Ready)
	require.True(t, ready.Truncated, "READY was in what retention dropped")
}

// Under keepLogs none the wait matches what comes from the call on: what
// came before it, which no log kept, is no output dropped before the wait
// read it, and a process that ended without the pattern says nothing was
// dropped. It said so, for the output before the call.
func TestReadyKeepsNoneDroppedNothing(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{LogRetention: 64 << 10})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: `echo early; sleep 1; echo nope`, KeepLogs: "none"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := d.c.Get(ctx(t), p.ID)
		return err == nil && got.TruncatedHead
	}, 20*time.Second, 10*time.Millisecond, "it wrote before the call")
	ready, still, err := d.c.Ready(ctx(t), p.ID, client.ReadyOptions{Pattern: "READY", Timeout: 20 * time.Second})
	require.NoError(t, err)
	require.Nil(t, still, "the wait ran out")
	require.False(t, ready.Ready)
	require.False(t, ready.Truncated, "nothing after the call was dropped")
}
