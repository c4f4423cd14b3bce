package server_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// run runs opts to its end and returns the result.
func (d *daemon) run(t *testing.T, opts client.StartOptions) *client.RunResult {
	t.Helper()
	r, p, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: opts})
	require.NoError(t, err)
	require.Nil(t, p, "a run without timeout answers once the process ended")
	return r
}

// firstLine follows the process's output until its first line, an int.
func (d *daemon) firstLine(t *testing.T, id string) int {
	t.Helper()
	var out strings.Builder
	for ev, err := range d.c.Stream(ctx(t), id, client.StreamOptions{}) {
		require.NoError(t, err)
		if ev.Type == client.EventLog {
			out.WriteString(ev.Frame.Data)
			if line, _, ok := strings.Cut(out.String(), "\n"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(line))
				require.NoError(t, err, "first line %q", line)
				return n
			}
		}
	}
	t.Fatalf("process %s ended before writing a line: %q", id, out.String())
	return 0
}

// requireGone fails t unless p ends within 10 s (a zombie counts as
// ended).
func requireGone(t *testing.T, p proctree.Ident) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d still runs", p.PID)
}

func exitCode(t *testing.T, r client.WaitResult) int {
	t.Helper()
	require.Equal(t, process.Exited, r.Reason, "result %+v", r)
	require.NotNil(t, r.ExitCode)
	return *r.ExitCode
}

func TestProcessLifecycle(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	dir := t.TempDir()
	p, err := d.c.Start(c, client.StartOptions{
		Cmd: "printf out; printf err >&2; exit 3", Name: "life", Cwd: dir, Env: map[string]string{"A": "1"},
	})
	require.NoError(t, err)
	require.NotEmpty(t, p.ID)
	require.Equal(t, process.KindExec, p.Kind)
	require.Equal(t, "life", p.Name)
	require.Equal(t, dir, p.Cwd)
	require.Equal(t, process.StdinClosed, p.Stdin)
	require.Equal(t, "until_cleanup", string(p.KeepLogs))
	require.False(t, p.System)
	require.False(t, p.CreatedAt.IsZero())

	r, running, err := d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	require.Nil(t, running)
	require.Equal(t, 3, exitCode(t, *r))

	got, err := d.c.Get(c, p.ID)
	require.NoError(t, err)
	require.Equal(t, process.Terminal, got.State)
	require.Equal(t, 3, exitCode(t, *got.Result()))
	require.False(t, got.ExitedAt.IsZero())
	require.NotEmpty(t, got.LastCursor)
	require.Equal(t, "1", got.FirstAvailableCursor)
	require.False(t, got.TruncatedHead)

	page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
	require.NoError(t, err)
	var stdout, stderr string
	for _, f := range page.Items {
		require.Equal(t, client.EncodingText, f.Encoding)
		require.NotZero(t, f.Timestamp)
		switch f.Channel {
		case "stdout":
			stdout += f.Data
		case "stderr":
			stderr += f.Data
		}
	}
	require.Equal(t, "out", stdout)
	require.Equal(t, "err", stderr)

	require.NoError(t, d.c.Delete(c, p.ID))
	_, err = d.c.Get(c, p.ID)
	requireCode(t, err, client.CodeNotFound)
	requireCode(t, d.c.Delete(c, p.ID), client.CodeNotFound)
}

// Of DELETEs of one process sent at once, as agents sharing a daemon may,
// one deletes it and the others find it gone, as for a session: none is
// told that it deleted what another did.
func TestConcurrentDeletesOfOneProcess(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for i := range 20 {
		// Each round has a hang guard of its own: one over all 20 rounds
		// (20 starts, 80 DELETEs that scan /proc) is a budget, which a
		// loaded machine can spend with no request hung.
		c := ctx(t)
		cmd := "sleep 30"
		if i%2 == 0 {
			cmd = "true"
		}
		p, err := d.c.Start(c, client.StartOptions{Cmd: cmd})
		require.NoError(t, err)
		if cmd == "true" {
			_, _, err = d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
		}
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() { errs <- d.c.Delete(c, p.ID) }()
		}
		deleted := 0
		for range cap(errs) {
			if err := <-errs; err == nil {
				deleted++
			} else {
				requireCode(t, err, client.CodeNotFound)
			}
		}
		require.Equal(t, 1, deleted, "%s: DELETEs answered 204", cmd)
	}
}

func TestWireFormat(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	r := d.run(t, client.StartOptions{Cmd: "exit 0"})
	status, body := d.raw(t, "GET", "/v1/processes/"+r.ProcessID, "", authed())
	require.Equal(t, 200, status)
	for _, field := range []string{
		`"id":`, `"kind":"exec"`, `"state":"terminal"`, `"system":false`, `"stdin":"closed"`,
		`"keepLogs":"until_cleanup"`, `"exitCode":0`, `"reason":"exited"`, `"truncatedHead":false`,
		`"shellCommand":"exit 0"`, `"resolvedShell":"/`,
	} {
		require.Contains(t, body, field)
	}
	// Times are RFC 3339 with milliseconds.
	require.Regexp(t, `"createdAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`, body)
	require.Regexp(t, `"exitedAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`, body)
	require.NotContains(t, body, `"signal"`)
	require.NotContains(t, body, `"terminal":`)
}

func TestRun(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	tests := []struct {
		name  string
		opts  client.StartOptions
		check func(t *testing.T, r *client.RunResult)
	}{
		// The channels are read each on its own: apart by less than a
		// loaded machine may leave a reader waiting, two writes were
		// logged out of order (acb at 50 ms).
		{"output", client.StartOptions{Cmd: "printf a; sleep 0.3; printf b >&2; sleep 0.3; printf c"}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, 0, exitCode(t, r.WaitResult))
			require.Equal(t, "abc", r.Output)
			require.Equal(t, "ac", r.Stdout)
			require.Equal(t, "b", r.Stderr)
			require.Len(t, r.Logs, 3)
			require.False(t, r.Truncated)
		}},
		{"failing command", client.StartOptions{Cmd: "exit 7"}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, 7, exitCode(t, r.WaitResult))
		}},
		{"missing program in cmd", client.StartOptions{Cmd: "no-such-program-xyz"}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, 127, exitCode(t, r.WaitResult))
			require.Contains(t, r.Stderr, "no-such-program-xyz")
		}},
		{"missing program in argv", client.StartOptions{Argv: []string{"no-such-program-xyz"}}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, process.Failed, r.Reason)
			require.NotEmpty(t, r.Error)
		}},
		{"argv without shell", client.StartOptions{Argv: []string{"printf", "%s|", "a b", "$HOME"}}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, "a b|$HOME|", r.Stdout)
		}},
		{"other shell", client.StartOptions{Cmd: "echo $0", Shell: "dash"}, func(t *testing.T, r *client.RunResult) {
			require.Contains(t, r.Stdout, "dash")
		}},
		{"env and cwd", client.StartOptions{Cmd: "echo $GREETING; pwd", Env: map[string]string{"GREETING": "hi"}, Cwd: "/"}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, "hi\n/\n", r.Stdout)
		}},
		{"invalid utf-8", client.StartOptions{Cmd: `printf 'a\377b'`}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, "a\uFFFDb", r.Stdout)
			require.Len(t, r.Logs, 1)
			require.Equal(t, client.EncodingBase64, r.Logs[0].Encoding)
			b, err := r.Logs[0].Bytes()
			require.NoError(t, err)
			require.Equal(t, "a\377b", string(b))
		}},
		// Unicode's own example (15.0, table 3-8), and a surrogate: one
		// U+FFFD for each maximal subpart, as TextDecoder and Python's
		// replace make the SDKs' text of the same frames.
		{"invalid utf-8, maximal subparts", client.StartOptions{Cmd: `printf 'a\361\200\200\341\200\302b\200c\200\277d\355\240\200e'`}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd\uFFFD\uFFFD\uFFFDe", r.Stdout)
			require.Equal(t, r.Stdout, r.Output)
		}},
		// A character split between two frames of stdout, with stderr's
		// between them (the program paused mid-character): stdout's text
		// is that of its bytes joined, as an SDK decodes its frames; in
		// output, the interleaving, the halves are apart and replaced.
		{"a character split between frames", client.StartOptions{Cmd: `printf '\342\202'; sleep 0.2; echo x >&2; sleep 0.2; printf '\254\n'; printf '\360\237'; sleep 0.2; printf '\230'; sleep 0.2; printf '\200.\342'`}, func(t *testing.T, r *client.RunResult) {
			require.Greater(t, len(r.Logs), 3, "%+v", r.Logs)
			require.Equal(t, "€\n😀.\uFFFD", r.Stdout)
			require.Equal(t, "\uFFFDx\n\uFFFD\n😀.\uFFFD", r.Output)
		}},
		{"execution timeout", client.StartOptions{Cmd: "sleep 30", ExecutionTimeout: client.Millis(100 * time.Millisecond)}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, process.TimedOut, r.Reason)
		}},
		{"token not passed on", client.StartOptions{Cmd: `echo "[$CONCH_TOKEN]"`}, func(t *testing.T, r *client.RunResult) {
			require.Equal(t, "[]\n", r.Stdout)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := d.run(t, tt.opts)
			require.NotEmpty(t, r.ProcessID)
			tt.check(t, r)
		})
	}
	t.Run("wait runs out", func(t *testing.T) {
		t.Parallel()
		r, p, err := d.c.Run(ctx(t), client.RunOptions{
			StartOptions: client.StartOptions{Cmd: "sleep 30"},
			Timeout:      client.Millis(50 * time.Millisecond),
		})
		require.NoError(t, err)
		require.Equal(t, process.Running, p.State)
		require.Equal(t, p.ID, r.ProcessID)
		require.Empty(t, r.Output)
		require.False(t, r.WaitingForInput)
		require.NoError(t, d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"}))
	})
}

// TestListPagesBoundedInBytes: a page of GET /v1/processes ends before the
// record that would take its JSON past 1 MiB, whatever the limit, and the
// pages give every record once. Records of commands with long text (each
// < escaped six times over) made one page of them tens of megabytes, built
// whole in memory.
func TestListPagesBoundedInBytes(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	text := "true '" + strings.Repeat("<", 60_000) + "'"
	var ids []string
	for range 12 {
		r := d.run(t, client.StartOptions{Cmd: text, Name: "long"})
		ids = append(ids, r.ProcessID)
	}
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 12)
		resp, body := d.do(t, "GET", "/v1/processes?name=long&limit=1000&cursor="+cursor, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Less(t, len(body), 1<<20+400_000, "a page of %d bytes", len(body))
		var l client.ProcessList
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		require.NotEmpty(t, l.Items)
		for _, p := range l.Items {
			paged = append(paged, p.ID)
		}
		if l.Next == "" {
			break
		}
		cursor = l.Next
	}
	require.Equal(t, ids, paged, "pages in creation order, nothing twice")
	require.Greater(t, len(paged), 0)
}

func TestListAndPaging(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	var ids []string
	for i := range 5 {
		r := d.run(t, client.StartOptions{Cmd: "true", Name: "batch"})
		ids = append(ids, r.ProcessID)
		_ = i
	}
	sleeper, err := d.c.Start(c, client.StartOptions{Argv: []string{"sleep", "30"}, Name: "sleeper"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.c.Kill(c, sleeper.ID, client.KillOptions{Signal: "KILL"}) })

	var paged []string
	opts := client.ListOptions{Name: "batch", Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		l, err := d.c.List(c, opts)
		require.NoError(t, err)
		require.LessOrEqual(t, len(l.Items), 2)
		for _, p := range l.Items {
			paged = append(paged, p.ID)
		}
		if l.Next == "" {
			break
		}
		opts.Cursor = l.Next
	}
	require.Equal(t, ids, paged, "pages in creation order, nothing twice")

	filters := []struct {
		name string
		opts client.ListOptions
		want []string
	}{
		{"running", client.ListOptions{State: "running"}, []string{sleeper.ID}},
		{"terminal", client.ListOptions{State: "terminal"}, ids},
		{"all", client.ListOptions{State: "all"}, append(append([]string{}, ids...), sleeper.ID)},
		{"name", client.ListOptions{Name: "sleeper"}, []string{sleeper.ID}},
		{"pid", client.ListOptions{PID: sleeper.PID}, []string{sleeper.ID}},
		{"kind", client.ListOptions{Kind: process.KindPTY}, nil},
		{"session", client.ListOptions{SessionID: "nope"}, nil},
	}
	for _, f := range filters {
		var got []string
		for p, err := range d.c.Processes(c, f.opts) {
			require.NoError(t, err)
			got = append(got, p.ID)
		}
		require.Equal(t, f.want, got, f.name)
	}
}

func TestWaitAndKill(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	tests := []struct {
		name string
		cmd  string
		kill client.KillOptions
		want client.WaitResult
	}{
		{"default TERM", "sleep 30", client.KillOptions{}, client.WaitResult{Reason: process.Signaled, Signal: "TERM"}},
		{"INT", "sleep 30", client.KillOptions{Signal: "INT"}, client.WaitResult{Reason: process.Signaled, Signal: "INT"}},
		{"SIG prefix", "sleep 30", client.KillOptions{Signal: "SIGKILL"}, client.WaitResult{Reason: process.Signaled, Signal: "KILL"}},
		{"escalation", "trap '' TERM; echo $$; sleep 30 & wait; wait", client.KillOptions{EscalateAfter: client.Millis(200 * time.Millisecond)},
			client.WaitResult{Reason: process.Signaled, Signal: "KILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ctx(t)
			p, err := d.c.Start(c, client.StartOptions{Cmd: tt.cmd})
			require.NoError(t, err)
			r, still, err := d.c.Wait(c, p.ID, 20*time.Millisecond)
			require.NoError(t, err)
			require.Nil(t, r, "wait ran out: 202 with the process")
			require.Equal(t, process.Running, still.State)
			if strings.HasPrefix(tt.cmd, "trap") {
				d.firstLine(t, p.ID) // TERM before the trap would end the shell
			}
			require.NoError(t, d.c.Kill(c, p.ID, tt.kill))
			r, _, err = d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
			require.Equal(t, tt.want.Reason, r.Reason)
			require.Equal(t, tt.want.Signal, r.Signal)
		})
	}
	t.Run("descendants", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "setsid sleep 30 & echo $!; wait"})
		require.NoError(t, err)
		child := d.firstLine(t, p.ID)
		require.True(t, proctree.Alive(child))
		gone := proctree.IdentOf(child)
		require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
		requireGone(t, gone)
	})
	t.Run("bad signal", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 30"})
		require.NoError(t, err)
		requireCode(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "NOPE"}), client.CodeInvalidArgument)
		requireCode(t, d.c.Kill(c, p.ID, client.KillOptions{EscalateTo: "NOPE"}), client.CodeInvalidArgument)
		require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
	})
	t.Run("delete stops", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 30 & echo $!; wait"})
		require.NoError(t, err)
		ps := proctree.IdentsOf(d.firstLine(t, p.ID), p.PID)
		require.NoError(t, d.c.Delete(c, p.ID))
		for _, q := range ps {
			requireGone(t, q)
		}
		_, err = d.c.Get(c, p.ID)
		requireCode(t, err, client.CodeNotFound)
	})
}

func TestStdinAndResize(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	t.Run("open stdin", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Cmd: "cat; echo done", Stdin: process.StdinOpen})
		require.NoError(t, err)
		require.Equal(t, process.StdinOpen, p.Stdin)
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("one "), false))
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("two\n"), true))
		r, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Equal(t, 0, exitCode(t, *r))
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		require.NoError(t, err)
		var out string
		for _, f := range page.Items {
			out += f.Data
		}
		require.Equal(t, "one two\ndone\n", out)
		err = d.c.WriteStdin(c, p.ID, []byte("late"), false)
		requireCode(t, err, client.CodeUnsupportedOperation)
	})
	t.Run("closed stdin", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		r := d.run(t, client.StartOptions{Cmd: "cat; echo eof"})
		require.Equal(t, "eof\n", r.Stdout, "a command with closed stdin reads end-of-file")
		err := d.c.WriteStdin(c, r.ProcessID, []byte("x"), false)
		requireCode(t, err, client.CodeUnsupportedOperation)
		err = d.c.WriteStdin(c, r.ProcessID, nil, true)
		requireCode(t, err, client.CodeUnsupportedOperation)
	})
	t.Run("resize a non-PTY", func(t *testing.T) {
		t.Parallel()
		r := d.run(t, client.StartOptions{Cmd: "true"})
		requireCode(t, d.c.Resize(ctx(t), r.ProcessID, 80, 24), client.CodeUnsupportedOperation)
	})
	t.Run("resize a PTY", func(t *testing.T) {
		t.Parallel()
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{
			Kind: process.KindPTY, Cmd: "stty size; read x; stty size",
			Terminal: &process.TerminalSize{Cols: 80, Rows: 24},
		})
		require.NoError(t, err)
		require.Equal(t, process.StdinOpen, p.Stdin, "a PTY's stdin is always open")
		require.Eventually(t, func() bool {
			page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
			return err == nil && len(page.Items) > 0 && strings.Contains(page.Items[0].Data, "24 80")
		}, 10*time.Second, 10*time.Millisecond)
		requireCode(t, d.c.Resize(c, p.ID, 0, 24), client.CodeInvalidArgument)
		require.NoError(t, d.c.Resize(c, p.ID, 100, 30))
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("\n"), false))
		_, _, err = d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		require.NoError(t, err)
		var out string
		for _, f := range page.Items {
			require.Equal(t, "pty", f.Channel)
			out += f.Data
		}
		require.Contains(t, out, "24 80")
		require.Contains(t, out, "30 100")
	})
}

func TestLimits(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxProcesses: 1, MaxSessions: 1})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 30"})
	require.NoError(t, err)
	_, err = d.c.Start(c, client.StartOptions{Cmd: "true"})
	requireCode(t, err, client.CodeResourceExhausted)
	// The refusal names the flag that sets the limit, and reads right for
	// one (it said "1 processes running already").
	require.ErrorContains(t, err, "the daemon runs its most processes already (1, --max-processes)")
	_, _, err = d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "true"}})
	requireCode(t, err, client.CodeResourceExhausted)
	require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
	_, _, err = d.c.Wait(c, p.ID, 0)
	require.NoError(t, err)
	// The place is given back once the process ended, as its wait answers.
	_, _, err = d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "true"}})
	require.NoError(t, err)

	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	_, err = d.c.CreateSession(c, client.SessionOptions{})
	requireCode(t, err, client.CodeResourceExhausted)
	require.ErrorContains(t, err, "(1, --max-sessions)")
	require.NoError(t, d.c.DeleteSession(c, s.ID))
	s, err = d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	require.NoError(t, d.c.DeleteSession(c, s.ID))
}

// TestLimitsFreedAtEnd checks that what a client has seen end no longer
// counts against the limits: a session that ran exit 0, a one-shot and a
// session command whose wait answered leave their place for the next
// create at once. The place was given back by the watcher of the process,
// after the answers, and the next create on the same connection found it
// taken most times.
func TestLimitsFreedAtEnd(t *testing.T) {
	t.Parallel()
	const rounds = 50
	t.Run("session", func(t *testing.T) {
		t.Parallel()
		d := start(t, server.Options{MaxSessions: 1})
		c := ctx(t)
		s, err := d.c.CreateSession(c, client.SessionOptions{})
		require.NoError(t, err)
		for i := range rounds {
			r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "exit 0"}})
			require.NoError(t, err)
			require.Equal(t, api.Exited, r.Reason)
			got, err := d.c.Session(c, s.ID)
			require.NoError(t, err)
			require.Equal(t, api.Terminal, got.State)
			s, err = d.c.CreateSession(c, client.SessionOptions{})
			require.NoError(t, err, "round %d of %d: the session that ended still counts", i+1, rounds)
		}
		require.NoError(t, d.c.DeleteSession(c, s.ID))
	})
	t.Run("process", func(t *testing.T) {
		t.Parallel()
		d := start(t, server.Options{MaxProcesses: 1})
		c := ctx(t)
		p, err := d.c.Start(c, client.StartOptions{Argv: []string{"/bin/true"}})
		require.NoError(t, err)
		for i := range rounds {
			w, _, err := d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
			require.Equal(t, api.Exited, w.Reason)
			p, err = d.c.Start(c, client.StartOptions{Argv: []string{"/bin/true"}})
			require.NoError(t, err, "round %d of %d: the process that ended still counts", i+1, rounds)
		}
		_, _, err = d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
	})
	t.Run("session command", func(t *testing.T) {
		t.Parallel()
		d := start(t, server.Options{MaxProcesses: 1})
		c := ctx(t)
		s, err := d.c.CreateSession(c, client.SessionOptions{})
		require.NoError(t, err)
		for i := range rounds {
			p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: "true"})
			require.NoError(t, err, "round %d of %d: the command that ended still counts", i+1, rounds)
			w, _, err := d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
			require.Equal(t, api.Exited, w.Reason)
		}
		require.NoError(t, d.c.DeleteSession(c, s.ID))
	})
	t.Run("cell", func(t *testing.T) {
		t.Parallel()
		d := start(t, server.Options{MaxProcesses: 1})
		c := ctx(t)
		py, err := d.c.CreateSession(c, client.SessionOptions{Language: "python"})
		require.NoError(t, err)
		for i := range rounds {
			p, err := d.c.Submit(c, py.ID, client.CommandOptions{Code: "1"})
			require.NoError(t, err, "round %d of %d: the cell that ended still counts", i+1, rounds)
			_, _, err = d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
		}
		require.NoError(t, d.c.DeleteSession(c, py.ID))
	})
}

func TestKeepLogs(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{ExitTTL: 50 * time.Millisecond})
	c := ctx(t)
	ttl := d.run(t, client.StartOptions{Cmd: "echo x", KeepLogs: "on_exit_ttl"})
	kept := d.run(t, client.StartOptions{Cmd: "echo x"})
	none := d.run(t, client.StartOptions{Cmd: "echo x", KeepLogs: "none"})

	require.Eventually(t, func() bool {
		_, err := d.c.Get(c, ttl.ProcessID)
		return client.HasCode(err, client.CodeNotFound)
	}, 10*time.Second, 10*time.Millisecond, "on_exit_ttl forgets the record after the TTL")

	p, err := d.c.Get(c, kept.ProcessID)
	require.NoError(t, err, "until_cleanup keeps the record")
	require.Equal(t, "1", p.LastCursor)

	require.Equal(t, "x\n", none.Stdout, "the run's answer holds the output")
	p, err = d.c.Get(c, none.ProcessID)
	require.NoError(t, err)
	require.Equal(t, "none", string(p.KeepLogs))
	require.True(t, p.TruncatedHead, "no frame of it is kept")
	page, err := d.c.Logs(c, none.ProcessID, client.LogsOptions{})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	require.True(t, page.TruncatedHead)
}

// TestKeepLogsNoneRunAnswers runs a session command and a code cell under
// keepLogs none: the run's answer holds their output, which is not kept
// after it. The answer once held nothing (the frames were dropped as they
// came, with no follower to read them), as a one-shot's did.
func TestKeepLogsNoneRunAnswers(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	sh, py := shellAndPython(t, d)
	for _, tt := range []struct {
		session string
		opts    client.CommandOptions
	}{
		{sh.ID, client.CommandOptions{Cmd: "echo out; echo err >&2", KeepLogs: "none"}},
		{py.ID, client.CommandOptions{Code: "import sys; print('out'); print('err', file=sys.stderr)", KeepLogs: "none"}},
	} {
		r, p, err := d.c.RunCommand(c, tt.session, client.CommandRunOptions{CommandOptions: tt.opts})
		require.NoError(t, err)
		require.Nil(t, p)
		require.Equal(t, "out\n", r.Stdout)
		require.Equal(t, "err\n", r.Stderr)
		page, err := d.c.Logs(c, r.ProcessID, client.LogsOptions{})
		require.NoError(t, err)
		require.Empty(t, page.Items, "nothing is kept after the answer")
		require.True(t, page.TruncatedHead)
	}
	// The answer holds what a run kept under another policy holds: the
	// output up to the retention, here 3.4 MB of it whole (only its last
	// 1 MiB came back before, marked truncated).
	seq := client.StartOptions{Cmd: "seq 1 500000", KeepLogs: "none"}
	r, p, err := d.c.Run(c, client.RunOptions{StartOptions: seq, OutputLimit: 8 << 20})
	require.NoError(t, err)
	require.Nil(t, p)
	require.False(t, r.Truncated)
	require.Equal(t, 3388895, len(r.Stdout))
	require.True(t, strings.HasPrefix(r.Stdout, "1\n2\n") && strings.HasSuffix(r.Stdout, "\n500000\n"))
}

// TestKeepLogsNoneInteractAnswers: under keepLogs none an interact's answer
// holds the output written while it waits, as a run's does: here the reply
// its own input causes. It once held nothing (no follower kept the frames).
func TestKeepLogsNoneInteractAnswers(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for _, opts := range []client.StartOptions{
		{Cmd: `while read x; do printf '\033[1m%s\033[0m\n' "got $x"; done`, Stdin: api.StdinOpen, KeepLogs: "none"},
	} {
		p, err := d.c.Start(c, opts)
		require.NoError(t, err)
		for _, word := range []string{"one", "two"} {
			r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: word + "\n", Timeout: api.Millis(time.Second), IdleTimeout: api.Millis(300 * time.Millisecond), Plain: true})
			require.NoError(t, err)
			require.NotNil(t, running, "the loop reads on")
			require.Contains(t, r.Output, "got "+word, "the reply to the input is the answer's")
			require.NotContains(t, r.Output, "\x1b", "plain")
		}
		r, _, err := d.c.Interact(c, p.ID, client.InteractOptions{EOF: true, Timeout: api.Millis(10 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, 0, *r.ExitCode)
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		require.NoError(t, err)
		require.Empty(t, page.Items, "nothing is kept after the answers")
	}
	// 3.4 MB while it waits: the head and tail of all of it, as a run's
	// answer holds, not the last 1 MiB marked truncated.
	p, err := d.c.Start(c, client.StartOptions{Cmd: "read x; seq 1 500000", Stdin: api.StdinOpen, KeepLogs: "none"})
	require.NoError(t, err)
	r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: "go\n", Timeout: api.Millis(20 * time.Second)})
	require.NoError(t, err)
	require.Nil(t, running)
	require.False(t, r.Truncated, "output was dropped while the interact waited")
	require.Positive(t, r.OmittedBytes)
	require.True(t, strings.HasPrefix(r.Stdout, "1\n2\n3\n"), "%.40q", r.Stdout)
	require.True(t, strings.HasSuffix(r.Stdout, "\n500000\n"))
}

// TestEndedRecordsHoldNoGoroutine: the records of ended processes and
// session commands kept on_exit_ttl (as sandboxd's Execute keeps every
// process) wait out their TTL without a goroutine each.
func TestEndedRecordsHoldNoGoroutine(t *testing.T) {
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	runBoth := func() {
		r, _, err := d.c.RunCommand(c, s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "true", KeepLogs: "on_exit_ttl"}})
		require.NoError(t, err)
		require.Equal(t, 0, *r.ExitCode)
		d.run(t, client.StartOptions{Cmd: "true", KeepLogs: "on_exit_ttl"})
	}
	runBoth()
	settled := func() int {
		time.Sleep(50 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	before := settled()
	const n = 40
	for range n {
		runBoth()
	}
	require.Eventually(t, func() bool { return settled() < before+n }, 10*time.Second, time.Millisecond,
		"%d ended records hold goroutines: %d before, %d now", 2*n, before, runtime.NumGoroutine())
	_, err = d.c.Get(c, s.ID)
	require.NoError(t, err)
}

// TestWaitAfterExitDuringDrain: a process that has exited while a child it
// left still holds its output (given 2 s to let go) is waited for with its
// final result, 200, not a 202 whose body already says it is terminal.
func TestWaitAfterExitDuringDrain(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 10 & exit 7"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := d.c.Get(c, p.ID)
		return err == nil && got.State == "terminal"
	}, 30*time.Second, 5*time.Millisecond)
	w, still, err := d.c.Wait(c, p.ID, 50*time.Millisecond)
	require.NoError(t, err)
	require.Nil(t, still, "a terminal process is waited for")
	require.NotNil(t, w)
	require.Equal(t, 7, *w.ExitCode)
}

// shellAndPython creates a shell session and a Python code context in d.
func shellAndPython(t *testing.T, d *daemon) (sh, py *client.Process) {
	t.Helper()
	sh, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	py, err = d.c.CreateSession(ctx(t), client.SessionOptions{Language: "python"})
	require.NoError(t, err)
	return sh, py
}
