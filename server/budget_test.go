package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// The watcher counts a record once it saw the end, which can come
	// after the run's answer: the count reads 3 as soon as three are
	// counted, with the last ones' watchers still to come. Once every
	// watcher has run, three are listed.
	var list *client.ProcessList
	for {
		require.NoError(t, c.Err())
		list, err = d.c.List(c, client.ListOptions{State: "terminal"})
		require.NoError(t, err)
		if len(list.Items) <= 3 && d.budget(t, "endedRecords").Used == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// TestMaxEndedSessions: sessions whose shell exited count among the ended
// records, and the oldest go first, their commands with them, out of the
// session list too: they were kept until deleted, and a client that never
// deleted them grew the daemon without bound.
func TestMaxEndedSessions(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxEnded: 4})
	c := ctx(t)
	var sessions, commands []string
	for range 6 {
		s, err := d.c.CreateSession(c, client.SessionOptions{})
		require.NoError(t, err)
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "exit 0"}})
		require.NoError(t, err)
		_, _, err = d.c.Wait(c, s.ID, 0)
		require.NoError(t, err)
		sessions, commands = append(sessions, s.ID), append(commands, r.ProcessID)
	}
	// Each session and its command: 12 records ended, 4 kept, the newest.
	for {
		require.NoError(t, c.Err())
		listed, err := d.c.Sessions(c)
		require.NoError(t, err)
		if len(listed) <= 2 && d.budget(t, "endedRecords").Used <= 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, id := range sessions[:4] {
		_, err := d.c.Session(c, id)
		requireCode(t, err, client.CodeNotFound)
		_, err = d.c.Get(c, commands[i])
		requireCode(t, err, client.CodeNotFound)
	}
	for _, id := range sessions[4:] {
		_, err := d.c.Session(c, id)
		require.NoError(t, err, "one of the newest ended sessions")
	}
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

// TestStdinBudgetFreedAtEnd: what is still queued for a process's stdin
// when it ends is dropped, and leaves the stdin budget then, for an exec
// process, a session command and a process that closed its stdin while it
// runs on. Before, it stayed counted until the record was deleted: 68
// ended processes filled the 64 MiB budget and every write was refused.
func TestStdinBudgetFreedAtEnd(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{StdinBudget: 4 << 20})
	c := ctx(t)
	sess, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	in := bytes.Repeat([]byte("a"), 600<<10)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 0.3", Stdin: process.StdinOpen})
	require.NoError(t, err)
	require.NoError(t, d.c.WriteStdin(c, p.ID, in, false))
	cmd, err := d.c.Submit(c, sess.ID, client.CommandOptions{Cmd: "sleep 0.3", Stdin: process.StdinOpen})
	require.NoError(t, err)
	require.NoError(t, d.c.WriteStdin(c, cmd.ID, in, false))
	require.Positive(t, d.budget(t, "stdin").Used)
	for _, id := range []string{p.ID, cmd.ID} {
		w, _, err := d.c.Wait(c, id, 30*time.Second)
		require.NoError(t, err)
		require.NotNil(t, w)
		require.Positive(t, w.StdinDroppedBytes, "the unread input is counted as dropped")
	}
	require.Zero(t, d.budget(t, "stdin").Used, "ended processes hold no stdin")

	closer, err := d.c.Start(c, client.StartOptions{Cmd: "exec 0<&-; sleep 60", Stdin: process.StdinOpen})
	require.NoError(t, err)
	require.NoError(t, d.c.WriteStdin(c, closer.ID, in, false))
	require.Eventually(t, func() bool { return d.budget(t, "stdin").Used == 0 }, 10*time.Second, 20*time.Millisecond,
		"input a process can no longer read holds no budget")
	require.NoError(t, d.c.Kill(c, closer.ID, client.KillOptions{Signal: "KILL"}))
}

// TestRequestBodiesBounded: the bodies being read at once hold at most
// twice --body-limit together, each its declared size from the start:
// past it a request is refused 429 resource_exhausted, and once the others
// are answered their bytes are given back. Before, 40 parallel 16 MiB
// bodies took the daemon to 824 MB, and 100 connections that declared 16
// MiB and sent nothing took 1.6 GB.
func TestRequestBodiesBounded(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	require.EqualValues(t, 2*limit, d.budget(t, "requestBodies").Limit)
	part := strings.Repeat(" ", 700<<10) // JSON's white space, then a body's end
	end := `{"cmd":"true"}`
	// trickle sends a body but its end, which the caller sends later; or
	// all of it.
	trickle := func(all bool) net.Conn {
		conn := d.dial(t)
		body := part
		if all {
			body += end
		}
		_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			testToken, len(part)+len(end), body)
		require.NoError(t, err)
		return conn
	}
	first, second := trickle(false), trickle(false)
	held := int64(2 * (len(part) + len(end) + 1))
	require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used == held }, 30*time.Second, 10*time.Millisecond)
	third := trickle(true)
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	for _, conn := range []net.Conn{first, second} {
		_, err := conn.Write([]byte(end))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used == 0 }, 30*time.Second, 10*time.Millisecond,
		"answered bodies give their bytes back")
}

// TestWaitingRouteGivesItsBodyBack: a route that waits once its body is
// decoded (a run, for as long as its command runs) gives the body's place
// under the budget back first. Before, two runs of a long command whose
// bodies were padded to near --body-limit held the whole budget until
// they ended, and every other request with a body was refused 429.
func TestWaitingRouteGivesItsBodyBack(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	sess, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	// JSON's white space: two such bodies, and their members' worth
	// decoded, are near the budget.
	pad := strings.Repeat(" ", limit-4<<10)
	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, cancel := context.WithCancel(t.Context())
	defer cancel() // the runs' requests end, and their commands are killed
	for _, path := range []string{"/v1/processes/run", "/v1/sessions/" + sess.ID + "/commands/run"} {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(rctx, "POST", d.url+path, strings.NewReader(`{"cmd":"sleep 30","name":"held"`+pad+`}`))
			if err != nil {
				return
			}
			req.Header = authed()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	var held []client.Process
	require.Eventually(t, func() bool {
		list, err := d.c.List(ctx(t), client.ListOptions{State: "running", Name: "held"})
		require.NoError(t, err)
		held = list.Items
		return len(held) == 2
	}, 30*time.Second, 20*time.Millisecond, "both run")
	require.Zero(t, d.budget(t, "requestBodies").Used, "the waiting runs hold no body")
	resp, out := d.post(t, "/v1/processes", `{"cmd":"true"`+strings.Repeat(" ", limit/2)+`}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, out)
}

// TestStalledBodyLetGo: a client that stops sending its body is answered
// 408 once no byte came for the body's idle bound, and the place its
// Content-Length held under the bodies' budget is given back. Before, two
// connections that declared a body of --body-limit and then sent nothing
// more held the whole budget for as long as they stayed open, and every
// other request with a body was refused 429.
func TestStalledBodyLetGo(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	server.SetBodyIdle(d.srv, 300*time.Millisecond)
	stall := func(size int) net.Conn {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n{\"cmd\":",
			testToken, size)
		require.NoError(t, err)
		return conn
	}
	answered := func(conn net.Conn) {
		t.Helper()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "a stalled body is answered")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), `"code":"invalid_argument"`)
		require.Contains(t, string(b), "no byte came for 300ms")
	}
	conns := []net.Conn{stall(limit - 1), stall(limit - 1)}
	for _, conn := range conns {
		answered(conn)
	}
	// The connection of a stalled body is closed after its answer, so
	// that it holds no place under --max-connections: a short one stayed
	// open, net/http reading what was left of its body, for as long as
	// the client kept it.
	closed := func(conn net.Conn) {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second))) // the hang guard
		_, err := io.Copy(io.Discard, conn)
		require.NoError(t, err, "the daemon closes the connection")
	}
	require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used == 0 }, 10*time.Second, 10*time.Millisecond,
		"stalled bodies give their place back")
	// A short body too: net/http reads what is left of one under 256 KiB
	// before it answers, which waited for a client that sends nothing more
	// for as long as it kept the connection open.
	short := stall(100)
	answered(short)
	closed(short)
	// A body that comes in steps, each within the bound, is read whole, and
	// a run that answers after the bound is not cut by it.
	conn := d.dial(t)
	body := `{"cmd":"sleep 0.6; echo slow"}`
	_, err := fmt.Fprintf(conn, "POST /v1/processes/run HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		testToken, len(body))
	require.NoError(t, err)
	for _, part := range []string{body[:10], body[10:20], body[20:]} {
		// A sixth of the bound: at half of it, a loaded machine's sleep
		// overshot it.
		time.Sleep(50 * time.Millisecond)
		_, err := conn.Write([]byte(part))
		require.NoError(t, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	require.Contains(t, string(b), `"output":"slow\n"`)
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
		"endedRecords": "--max-ended", "endedRecordText": "", "commandText": "--command-text-budget",
		"requestBodies": "--body-limit", "killResizeBodies": ""}, names)
	require.EqualValues(t, 64<<20, d.budget(t, "logs").Limit)
	// kill's and resize's bodies have their own budget, which was not
	// listed: a client that saw kill refused 429 could not tell why.
	require.EqualValues(t, 4<<20, d.budget(t, "killResizeBodies").Limit)
	require.Greater(t, h.MemoryLimit, int64(64<<20+server.DefaultStdinBudget))
	require.Equal(t, d.srv.MemoryLimit(), h.MemoryLimit)
}

// TestCommandTextBudget: the text of the commands not yet ended — queued in
// a session, or started — is bounded together: one that does not fit is
// refused with 429 resource_exhausted naming the flag, and fits again once
// those before it have ended. An argv over the command size is a 413.
func TestCommandTextBudget(t *testing.T) {
	t.Parallel()
	const budget = 8 << 10
	d := start(t, server.Options{CommandTextBudget: budget, MaxCommandBytes: 16 << 10})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	gate := filepath.Join(t.TempDir(), "gate")
	first, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "while [ ! -e " + gate + " ]; do sleep 0.02; done"})
	require.NoError(t, err)
	text := ": '" + strings.Repeat("x", 2<<10) + "'"
	var queued []string
	for {
		p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: text})
		if err != nil {
			require.True(t, client.HasCode(err, client.CodeResourceExhausted), "%v", err)
			require.Contains(t, err.Error(), "--command-text-budget")
			break
		}
		queued = append(queued, p.ID)
		require.Less(t, len(queued), 4, "more than the budget's worth of text was queued")
	}
	require.Len(t, queued, 3, "three commands of 2 KiB fit in 8 KiB beside the first")
	b := d.budget(t, "commandText")
	require.Equal(t, "--command-text-budget", b.Flag)
	require.EqualValues(t, budget, b.Limit)
	require.EqualValues(t, int64(len(first.ShellCommand)+3*len(text)), b.Used)
	_, err = d.c.Start(c, client.StartOptions{Cmd: text})
	require.True(t, client.HasCode(err, client.CodeResourceExhausted), "an exec process counts too: %v", err)

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	for _, id := range queued {
		_, _, err := d.c.Wait(c, id, 0)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return d.budget(t, "commandText").Used == 0 }, 20*time.Second, 10*time.Millisecond,
		"the text is given back as the commands end")
	_, err = d.c.Submit(c, s.ID, client.CommandOptions{Cmd: text})
	require.NoError(t, err)

	_, err = d.c.Start(c, client.StartOptions{Argv: []string{"true", strings.Repeat("a", 10<<10), strings.Repeat("b", 10<<10)}})
	require.True(t, client.HasCode(err, client.CodePayloadTooLarge), "an argv over the command size: %v", err)
}

// TestEndedOrderForgets: the order in which records ended lets go of the
// ids of records forgotten otherwise than by MaxEnded (a session's
// commands with the session, a process deleted or past its on_exit_ttl).
// It held every such id for the daemon's life: some 64 bytes an ended
// command, the 0.8 → 1.9 MiB a 10-minute soak's Go heap grew by.
func TestEndedOrderForgets(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // hang guard: n commands on a loaded machine
	defer cancel()
	const n = 1100 // past the 1024 ids the order may hold
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	for range n {
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true"}})
		require.NoError(t, err)
		require.NotNil(t, r)
	}
	// The watcher counts a record once it saw the end: wait for them all.
	for d.budget(t, "endedRecords").Used != n {
		require.NoError(t, c.Err())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, d.c.DeleteSession(c, s.ID))
	order, kept := server.EndedOrder(d.srv)
	require.Zero(t, kept, "the session's commands' records went with it")
	require.LessOrEqual(t, order, 1024, "ids of forgotten records held")
}

// TestEarlyAnswerReachesWholeBody: a client that sends its whole body
// before it reads the answer — as Python's http.client and urllib do — gets
// the answer the daemon gave before reading that body through: 413 for a
// body over the route's limit, 401 for a wrong token, 404 for no such
// route. The daemon reads what is left of the body and discards it, up to
// a bound, before the connection closes. Before, each of these clients got
// a broken pipe (or a reset) from its write instead, and never the answer.
// A body past the bound is not read on: its client still gets the broken
// pipe, and the daemon is not held.
func TestEarlyAnswerReachesWholeBody(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	// sendAll writes a request and all of its body of size bytes, then
	// reads the answer.
	sendAll := func(path, token string, size int) (*http.Response, string, error) {
		conn := d.dial(t)
		defer conn.Close()
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			path, token, size)
		if _, err := conn.Write([]byte(head)); err != nil {
			return nil, "", err
		}
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for left := size; left > 0; left -= len(chunk) {
			if _, err := conn.Write(chunk[:min(left, len(chunk))]); err != nil {
				return nil, "", err
			}
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return nil, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), nil
	}
	for _, tt := range []struct {
		path, token string
		size, want  int
	}{
		{"/v1/processes/run", testToken, 24 * limit, http.StatusRequestEntityTooLarge},
		{"/v1/processes/run", "wrong", 24 * limit, http.StatusUnauthorized},
		{"/v1/nothing-here", testToken, 24 * limit, http.StatusNotFound},
	} {
		resp, body, err := sendAll(tt.path, tt.token, tt.size)
		require.NoError(t, err, "%s with token %q: the whole body is sent and the answer read", tt.path, tt.token)
		require.Equal(t, tt.want, resp.StatusCode, body)
	}
	server.SetReadRest(d.srv, 4*limit, 30*time.Second)
	_, _, err := sendAll("/v1/processes/run", testToken, 64*limit)
	require.Error(t, err, "a body past the bound is not read through")
	resp, body, err := sendAll("/v1/processes/run", testToken, 3*limit)
	require.NoError(t, err, "one within it still is")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
}

// TestEarlyAnswerToAStalledBody: a body the answer did not need, whose
// client stops sending, does not hold the answer back: net/http reads what
// is left of a body under 256 KiB before it writes an answer's header, and
// did so with no bound, so a client that declared 100,000 bytes, sent 10
// and stopped, with a wrong token, never got its 401 and held the
// connection for as long as it kept it open.
func TestEarlyAnswerToAStalledBody(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetReadRest(d.srv, 1<<20, 300*time.Millisecond)
	conn := d.dial(t)
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Length: 100000\r\n\r\n{\"cmd\":\"x")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the answer comes while the body is stalled")
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestAnswerBeforeAShortStalledBody: an answer that needs none of a body
// still owed — a refusal, or a route that takes no body — is sent at once,
// before the bounded read of what is left: net/http reads what is left of
// a body under 256 KiB before it writes an answer's header, so a 401 came
// only once that read gave up (5 s), and a GET that was sent a short body
// the client never finished was never answered, holding its connection and
// a drain for as long as the client kept it open. Here the read of the
// rest is given an hour; each answer must come long before.
func TestAnswerBeforeAShortStalledBody(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	server.SetReadRest(d.srv, 1<<20, time.Hour)
	for _, tt := range []struct {
		request string
		want    int
	}{
		{"POST /v1/processes HTTP/1.1\r\nAuthorization: Bearer wrong", http.StatusUnauthorized},
		{"POST /v1/processes/nope/kill HTTP/1.1\r\nAuthorization: Bearer " + testToken, http.StatusNotFound},
		{"GET /v1/processes?limit=1 HTTP/1.1\r\nAuthorization: Bearer " + testToken, http.StatusOK},
		{"GET /v1/sessions HTTP/1.1\r\nAuthorization: Bearer " + testToken, http.StatusOK},
	} {
		conn := d.dial(t)
		_, err := fmt.Fprintf(conn, "%s\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"cmd\":", tt.request)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second))) // the hang guard
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s: the answer comes while the body is owed", tt.request)
		require.Equal(t, tt.want, resp.StatusCode, tt.request)
		conn.Close() // the answer's body is not read: the connection serves on, reading the rest
	}
}

// TestLongArgvKeptShort: an argv of many small elements costs what its
// elements cost (the string headers of its copies), not its bytes alone:
// an ended record keeps its first elements within 64 KiB of that cost,
// saying how many it had, and the ended records' text counts the kept
// ones. 300,000 empty arguments, 300 KB of text, held 7-9 MB in each
// record, which counted 244 bytes.
func TestLongArgvKeptShort(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	argv := append([]string{"true"}, make([]string, 100_000)...)
	r, _, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{Argv: argv}})
	require.NoError(t, err)
	require.NotNil(t, r)
	require.True(t, r.Reason == process.Exited || r.Reason == process.Failed, "%+v", r.WaitResult)
	p, err := d.c.Get(ctx(t), r.ProcessID)
	require.NoError(t, err)
	require.True(t, p.ArgvTruncated, "argvCount %d, %d elements kept", p.ArgvCount, len(p.Argv))
	require.Equal(t, len(argv), p.ArgvCount)
	require.Equal(t, "true", p.Argv[0])
	require.LessOrEqual(t, len(p.Argv), process.KeptText/process.ArgCost)
	// The record is counted among the ended ones by the process's watcher,
	// which may come a moment after the run's answer.
	var used int64
	require.Eventually(t, func() bool {
		used = d.budget(t, "endedRecordText").Used
		return used > int64(len(p.Argv))
	}, 10*time.Second, 5*time.Millisecond, "the kept elements' cost is counted")
	require.LessOrEqual(t, used, int64(process.KeptText), "the record's text counts %d bytes", used)
}

// trickle opens a connection that declares a body of size bytes for path,
// sends its first sent bytes, then one more every 100 ms, each well within
// the wait for a next byte, until the test ends or the daemon closes it.
// done has the answer the daemon gave (nil: none came).
func (d *daemon) trickle(t *testing.T, path string, size, sent int) (done <-chan *http.Response) {
	t.Helper()
	conn := d.dial(t)
	_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n{\"cmd\":\"%s",
		path, testToken, size, strings.Repeat("x", sent))
	require.NoError(t, err)
	stop := make(chan struct{})
	answers := make(chan *http.Response, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	})
	wg.Go(func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answers <- nil
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answers <- resp
	})
	t.Cleanup(func() {
		close(stop)
		conn.Close()
		wg.Wait()
	})
	return answers
}

// TestTricklingBodiesHoldLittle: a body holds, under the bodies' budget,
// what of it has come, not the whole of its Content-Length from the start:
// two connections that declared a body of near --body-limit and then sent
// a byte every few seconds held the whole budget for as long as they kept
// sending, and every request with a body, kill included, was refused 429.
func TestTricklingBodiesHoldLittle(t *testing.T) {
	t.Parallel()
	// 40 KiB, then a byte now and then; and 300 KiB first, past the
	// buffer's first growths: grown fourfold, two such held the whole
	// budget (256 KiB became 1 MiB each).
	for _, sent := range []int{40 << 10, 300 << 10} {
		t.Run(strconv.Itoa(sent>>10)+"KiB", func(t *testing.T) {
			t.Parallel()
			const limit = 1 << 20
			d := start(t, server.Options{BodyLimit: limit})
			d.trickle(t, "/v1/processes", limit-1, sent)
			d.trickle(t, "/v1/processes", limit-1, sent)
			require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used >= int64(2*sent) }, 10*time.Second, 10*time.Millisecond,
				"both bodies are being read")
			resp, out := d.post(t, "/v1/processes", `{"argv":["sleep","60"]}`)
			require.Equal(t, http.StatusCreated, resp.StatusCode, out)
			var p client.Process
			require.NoError(t, json.Unmarshal([]byte(out), &p))
			resp, out = d.post(t, "/v1/processes/"+p.ID+"/kill", `{"signal":"KILL"}`)
			require.Less(t, resp.StatusCode, 300, out)
			require.LessOrEqual(t, d.budget(t, "requestBodies").Used, int64(4*sent+2), "the trickling bodies hold at most twice what came of them")
		})
	}
}

// TestSlowBodyLetGo: past its first moments (bodyGrace, 30 s), a body must
// come at 256 KiB/s on average, or it is let go, 408, however often its
// bytes come: a client that sent one every few seconds, each within the
// wait for a next byte, held its place under the bodies' budget, and a
// connection, for as long as it kept on. One that comes faster is read
// whole, however long it takes.
func TestSlowBodyLetGo(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	server.SetBodyGrace(d.srv, 300*time.Millisecond)
	var resp *http.Response
	select {
	case resp = <-d.trickle(t, "/v1/processes", limit-1, 40<<10):
	case <-time.After(20 * time.Second): // the hang guard
	}
	require.NotNil(t, resp, "a slow body is answered")
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used == 0 }, 10*time.Second, 10*time.Millisecond,
		"the slow body gives its place back")

	// 1 MiB in 16 steps of 64 KiB, 100 ms apart: 640 KiB/s, read whole
	// though it takes five times the grace.
	conn := d.dial(t)
	body := `{"cmd":"true"` + strings.Repeat(" ", limit-15) + `}`
	_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		testToken, len(body))
	require.NoError(t, err)
	for part := range slices.Chunk([]byte(body), 64<<10) {
		time.Sleep(100 * time.Millisecond)
		_, err := conn.Write(part)
		require.NoError(t, err)
	}
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
}

// TestKillWhileBodiesFillTheBudget: large bodies that fill the bodies'
// budget, coming slowly (each sent more than half of itself, its buffer
// grown to its size), leave kill its own: a process can still be
// signalled while others wait for room.
func TestKillWhileBodiesFillTheBudget(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := start(t, server.Options{BodyLimit: limit})
	resp, out := d.post(t, "/v1/processes", `{"argv":["sleep","60"]}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, out)
	var p client.Process
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	d.trickle(t, "/v1/processes", limit-1, 600<<10)
	d.trickle(t, "/v1/processes", limit-1, 600<<10)
	require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used >= 2*limit-(64<<10) }, 10*time.Second, 10*time.Millisecond,
		"the two bodies fill the budget")
	resp, out = d.post(t, "/v1/processes", `{"argv":["true"]}`)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, out)
	resp, out = d.post(t, "/v1/processes/"+p.ID+"/kill", `{"signal":"KILL"}`)
	require.Less(t, resp.StatusCode, 300, out)
}

// TestChunkedBodyHolds: a body without a Content-Length (chunked) holds,
// under the bodies' budget, 512 bytes and one to read its end at first,
// and at most twice what came of it as it grows, as docs/api.md says.
func TestChunkedBodyHolds(t *testing.T) {
	t.Parallel()
	for _, sent := range []int{100, 3000, 300 << 10} {
		t.Run(strconv.Itoa(sent), func(t *testing.T) {
			t.Parallel()
			d := start(t, server.Options{BodyLimit: 1 << 20})
			conn := d.dial(t)
			t.Cleanup(func() { conn.Close() })
			part := `{"cmd":"` + strings.Repeat("x", sent)
			_, err := fmt.Fprintf(conn, "POST /v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
				testToken, len(part), part)
			require.NoError(t, err)
			// The buffer grows twofold from 513 bytes as it fills: the
			// first size past what came.
			want := int64(513)
			for want <= int64(len(part)) {
				want *= 2
			}
			require.Eventually(t, func() bool { return d.budget(t, "requestBodies").Used == want }, 10*time.Second, 10*time.Millisecond,
				"the body holds %d bytes", want)
			require.LessOrEqual(t, want, max(int64(2*len(part)), 513))
		})
	}
}

// TestEndedRecordCwdCounted: the working directories an ended record keeps
// count in the ended records' text, as their command text does: where a
// command started and where it left the shell, once when they are the
// same. A path past PATH_MAX is as long as a command makes it, and a
// session that went back and forth between two such directories made
// each record keep a copy of its own that no budget counted: 10,000 of
// them grew the daemon by 780 MB, past the memory limit the budgets add
// up to.
func TestEndedRecordCwdCounted(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	deep := filepath.Join(base, strings.Repeat("/"+strings.Repeat("d", 250), 12)) // 3 KB
	a, b := filepath.Join(deep, "a"), filepath.Join(deep, "b")
	require.NoError(t, os.MkdirAll(a, 0o755))
	require.NoError(t, os.Mkdir(b, 0o755))
	s, err := d.c.CreateSession(c, client.SessionOptions{Cwd: a})
	require.NoError(t, err)
	want := int64(0)
	for i, cmd := range []string{"cd ../b", "cd ../a", "cd ../b", "cd ../a", "true", "true"} {
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: cmd}})
		require.NoError(t, err)
		require.Equal(t, 0, *r.ExitCode, "%q: %+v", cmd, r.WaitResult)
		if i < 4 {
			require.Equal(t, map[bool]string{true: b, false: a}[i%2 == 0], r.Cwd, cmd)
			want += int64(len(cmd) + len(a) + len(b)) // from one to the other
		} else {
			require.Equal(t, a, r.Cwd, cmd)
			want += int64(len(cmd) + len(a)) // one directory, kept once
		}
	}
	r, _, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Argv: []string{"true"}, Cwd: a}})
	require.NoError(t, err)
	require.Equal(t, 0, *r.ExitCode)
	want += int64(process.ArgvCost([]string{"true"}) + len(a)) // an exec record's cwd
	// The watcher counts a record once it saw the end, which can come
	// after the run's answer.
	for d.budget(t, "endedRecords").Used < 7 {
		require.NoError(t, c.Err())
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, want, d.budget(t, "endedRecordText").Used)
}
