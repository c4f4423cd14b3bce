package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

var allShells = []string{"bash", "dash", "zsh", "ksh", "mksh", "busybox"}

// numbered is a writer of numbered lines that writes for a while.
const numbered = `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); case $i in *00) sleep 0.01;; esac; done`

func numberedLines() string {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// readOn interacts with id from cursor until it ends, and returns all the
// output read.
func (d *daemon) readOn(t *testing.T, id, cursor string, out *strings.Builder) *client.RunResult {
	t.Helper()
	for range 10000 {
		r, p, err := d.c.Interact(ctx(t), id, client.InteractOptions{Cursor: cursor, Timeout: client.Millis(5 * time.Millisecond)})
		require.NoError(t, err)
		out.WriteString(r.Output)
		require.NotEmpty(t, r.Next)
		cursor = r.Next
		if p == nil {
			return r
		}
	}
	t.Fatal("the process did not end")
	return nil
}

// TestEarlyAnswerThenInteract: an early answer and interact calls from its
// next cursor read the output of a continuous writer exactly once.
func TestEarlyAnswerThenInteract(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			r, p, err := d.c.Run(ctx(t), client.RunOptions{
				StartOptions: client.StartOptions{Cmd: numbered, Shell: sh},
				Timeout:      client.Millis(time.Millisecond),
			})
			require.NoError(t, err)
			require.NotNil(t, p, "the writer sleeps 0.2 s in all: it outlives a 1 ms wait")
			var out strings.Builder
			out.WriteString(r.Output)
			if p != nil {
				require.Equal(t, process.Running, p.State)
				require.False(t, r.WaitingForInput)
				r = d.readOn(t, p.ID, r.Next, &out)
			}
			require.Equal(t, 0, exitCode(t, r.WaitResult))
			require.Equal(t, numberedLines(), out.String())
		})
		t.Run(sh+" session", func(t *testing.T) {
			t.Parallel()
			s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Shell: sh})
			require.NoError(t, err)
			r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
				CommandOptions: client.CommandOptions{Cmd: numbered},
				Timeout:        client.Millis(time.Millisecond),
			})
			require.NoError(t, err)
			require.NotNil(t, p)
			var out strings.Builder
			out.WriteString(r.Output)
			if p != nil {
				r = d.readOn(t, p.ID, r.Next, &out)
			}
			require.Equal(t, 0, exitCode(t, r.WaitResult))
			require.Equal(t, numberedLines(), out.String())
		})
	}
}

// TestIdleTimeout: a command that went quiet comes back with what it wrote.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			r, p, err := d.c.Run(ctx(t), client.RunOptions{
				StartOptions: client.StartOptions{Cmd: "echo started; sleep 30", Shell: sh},
				IdleTimeout:  client.Millis(200 * time.Millisecond),
			})
			require.NoError(t, err)
			require.NotNil(t, p, "the run waited for the end")
			require.False(t, r.WaitingForInput)
			// On a loaded machine the shell may be slower to print than the
			// idle timeout: read on, each call coming back when it is idle.
			out := r.Output
			for out == "" {
				r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Cursor: r.Next, IdleTimeout: client.Millis(200 * time.Millisecond)})
				require.NoError(t, err)
				require.NotNil(t, p)
				out += r.Output
			}
			require.Equal(t, "started\n", out)
			// The command goes on untouched; interrupt it through interact.
			r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Signal: "INT"})
			require.NoError(t, err)
			require.Nil(t, p)
			require.Equal(t, process.Signaled, r.Reason)
		})
	}
	t.Run("ended first", func(t *testing.T) {
		t.Parallel()
		r, p, err := d.c.Run(ctx(t), client.RunOptions{
			StartOptions: client.StartOptions{Cmd: "echo done"},
			IdleTimeout:  client.Millis(time.Minute),
		})
		require.NoError(t, err)
		require.Nil(t, p)
		require.Equal(t, "done\n", r.Output)
		require.NotEmpty(t, r.Next)
	})
}

// TestEarlyAnswerBounded: a 202 answer keeps to outputLimit as a final one
// does, and the process says when it last wrote.
func TestEarlyAnswerBounded(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			r, p, err := d.c.Run(ctx(t), client.RunOptions{
				StartOptions: client.StartOptions{Cmd: numbered + "; read n", Shell: sh, Stdin: process.StdinOpen},
				OutputLimit:  4000,
			})
			require.NoError(t, err)
			require.NotNil(t, p)
			require.True(t, r.WaitingForInput)
			require.Positive(t, r.OmittedBytes)
			require.Less(t, len(r.Output), len(numberedLines()))
			require.True(t, strings.HasPrefix(r.Output, "line 0\n"), r.Output[:20])
			require.True(t, strings.HasSuffix(r.Output, "line 1999\n"))
			require.NotEmpty(t, r.OmittedAfter)
			require.False(t, p.LastOutputAt.IsZero())
			r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Cursor: "0", EOF: true, OutputLimit: 4000})
			require.NoError(t, err)
			require.Nil(t, p)
			require.Positive(t, r.OmittedBytes)
		})
	}
}

// TestEarlyAnswerWire: a 202 body is one object holding each member once:
// the process's fields, then the output's; lastOutputAt once the process
// has written.
func TestEarlyAnswerWire(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	check := func(body string) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &m))
		keys := []string{"id", "state", "waitingForInput", "processId", "output", "stdout", "stderr", "logs", "truncated", "next"}
		if m["output"] != "" {
			keys = append(keys, "lastOutputAt")
		}
		for _, k := range keys {
			require.Contains(t, m, k)
			require.Equal(t, 1, strings.Count(body, `"`+k+`":`), k)
		}
		require.Equal(t, "idle_timeout", m["cameBack"])
		return m
	}
	status, body := d.raw(t, "POST", "/v1/processes/run", `{"cmd":"echo hi; exec sleep 30","idleTimeout":100}`, authed())
	require.Equal(t, 202, status, body)
	m := check(body)
	id := m["id"].(string)
	t.Cleanup(func() { d.c.Kill(context.Background(), id, client.KillOptions{Signal: "KILL"}) })
	// On a loaded machine the shell may not have written yet when the idle
	// timeout came (the answer then holds no output, and no lastOutputAt,
	// rightly): the same wait is asked again, from the start of the
	// output, until the answer holds it.
	c := ctx(t) // a hang guard
	for m["output"] == "" {
		require.NoError(t, c.Err(), "the process never wrote")
		status, body = d.raw(t, "POST", "/v1/processes/"+id+"/interact", `{"cursor":"0","idleTimeout":100}`, authed())
		require.Equal(t, 202, status, body)
		m = check(body)
	}
	require.Equal(t, "hi\n", m["output"])
	require.Contains(t, m, "lastOutputAt")
}

func TestInteractRefusals(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	_, _, err = d.c.Interact(c, s.ID, client.InteractOptions{Input: "echo hi\n"})
	requireCode(t, err, "unsupported_operation")
	// A session's own shell is refused bare too, as by the other process
	// routes: it is not a command whose output an answer could hold.
	code, body := d.raw(t, "POST", "/v1/processes/"+s.ID+"/interact", `{"timeout":10}`, authed())
	require.Equal(t, 409, code, body)
	require.Contains(t, body, "unsupported_operation")
	_, _, err = d.c.Interact(c, s.ID, client.InteractOptions{Signal: "INT"})
	requireCode(t, err, "unsupported_operation")
	p, err := d.c.Start(c, client.StartOptions{Cmd: "sleep 30"})
	require.NoError(t, err)
	_, _, err = d.c.Interact(c, p.ID, client.InteractOptions{Input: "x"})
	requireCode(t, err, "unsupported_operation")
	_, _, err = d.c.Interact(c, p.ID, client.InteractOptions{Signal: "NOPE"})
	requireCode(t, err, "invalid_argument")
	// A bare wait works on any process.
	r, still, err := d.c.Interact(c, p.ID, client.InteractOptions{Timeout: client.Millis(10 * time.Millisecond)})
	require.NoError(t, err)
	require.NotNil(t, still)
	require.Empty(t, r.Output)
	r, still, err = d.c.Interact(c, p.ID, client.InteractOptions{Signal: "KILL"})
	require.NoError(t, err)
	require.Nil(t, still)
	require.Equal(t, process.Signaled, r.Reason)
}

// TestInteractHoldsItsReply: the reply to an interact's input is in its
// answer even when the process wrote just before the input came, which a
// frame of output from before the write must not swallow.
func TestInteractHoldsItsReply(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{Shell: "bash"})
	require.NoError(t, err)
	p, err := d.c.Submit(c, s.ID, client.CommandOptions{
		// The ticker sleeps in a builtin read with a timeout, so that it
		// ticks every millisecond even on a loaded machine.
		Cmd: `f=$(mktemp -u); mkfifo $f; (exec 9<>$f; rm $f; for i in $(seq 30000); do echo tick; read -t 0.001 -u 9; done) &
while read l; do echo got:$l; done`,
		Stdin: process.StdinOpen,
	})
	require.NoError(t, err)
	missed := 0
	for i := range 20 {
		want := fmt.Sprintf("got:x%d\n", i)
		r, still, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: fmt.Sprintf("x%d\n", i), Timeout: client.Millis(300 * time.Millisecond)})
		require.NoError(t, err)
		require.NotNil(t, still)
		if strings.Contains(r.Stdout, want) {
			continue
		}
		// On a loaded machine the reply may come after the answer: that is
		// no miss. A miss is a reply in a frame at or before the answer's
		// last cursor that the answer does not hold.
		at := replyCursor(t, d, p.ID, want)
		next, err := strconv.ParseUint(r.Next, 10, 64)
		require.NoError(t, err)
		if at <= next {
			missed++
		}
	}
	require.Zero(t, missed, "answers that missed the reply to their own input")
	require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
}

// replyCursor waits for want in the logs of id and returns the cursor of the
// frame that holds it.
func replyCursor(t *testing.T, d *daemon, id, want string) uint64 {
	t.Helper()
	for range 1000 {
		page, err := d.c.Logs(ctx(t), id, client.LogsOptions{})
		require.NoError(t, err)
		for _, f := range page.Items {
			if strings.Contains(f.Data, want) {
				at, err := strconv.ParseUint(f.Cursor, 10, 64)
				require.NoError(t, err)
				return at
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in the logs", want)
	return 0
}

// TestInteractCallsTakeTurns: two interact calls on one process at once run
// one after the other, each answer holding the reply to its own input and
// not the other's.
func TestInteractCallsTakeTurns(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{
		Cmd:   `while read l; do sleep 0.3; echo got:$l; done`,
		Stdin: process.StdinOpen,
	})
	require.NoError(t, err)
	for round := range 3 {
		outs := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Go(func() {
				r, _, err := d.c.Interact(c, p.ID, client.InteractOptions{
					Input:   fmt.Sprintf("r%dc%d\n", round, k),
					Timeout: client.Millis(20 * time.Second),
				})
				errs[k] = err
				if err == nil {
					outs[k] = r.Stdout
				}
			})
		}
		wg.Wait()
		for k := range 2 {
			require.NoError(t, errs[k])
			require.Equal(t, fmt.Sprintf("got:r%dc%d\n", round, k), outs[k], "call %d of round %d", k, round)
		}
	}
	require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
}

// TestCameBack checks that an early (202) answer says why it came: the
// timeout, the idle timeout, or input awaited, for a one-shot and for a
// session command run on the request's goroutine. Without it a client could
// only guess from the time a wait took whether the command was quiet.
func TestCameBack(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	sess, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	short := client.Millis(200 * time.Millisecond)
	for _, tt := range []struct {
		name   string
		run    func() (*client.RunResult, *client.Process, error)
		reason string
	}{
		{"one-shot timeout", func() (*client.RunResult, *client.Process, error) {
			return d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "sleep 30"}, Timeout: short})
		}, api.CameBackTimeout},
		{"one-shot idle", func() (*client.RunResult, *client.Process, error) {
			return d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "sleep 30"}, IdleTimeout: short})
		}, api.CameBackIdle},
		{"one-shot input", func() (*client.RunResult, *client.Process, error) {
			return d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "read x", Stdin: api.StdinOpen}, Timeout: client.Millis(30 * time.Second)})
		}, api.CameBackInput},
		{"session timeout", func() (*client.RunResult, *client.Process, error) {
			return d.c.RunCommand(c, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "sleep 30"}, Timeout: short})
		}, api.CameBackTimeout},
		{"session idle", func() (*client.RunResult, *client.Process, error) {
			return d.c.RunCommand(c, sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "sleep 30"}, IdleTimeout: short})
		}, api.CameBackIdle},
	} {
		r, p, err := tt.run()
		require.NoError(t, err, tt.name)
		require.NotNil(t, p, "%s: the answer came early", tt.name)
		require.Equal(t, tt.reason, r.CameBack, tt.name)
		require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}), tt.name)
		w, _, err := d.c.Wait(c, p.ID, 10*time.Second)
		require.NoError(t, err, tt.name)
		require.NotNil(t, w, tt.name)
	}
	r, p, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: "true"}, Timeout: client.Millis(30 * time.Second)})
	require.NoError(t, err)
	require.Nil(t, p)
	require.Empty(t, r.CameBack, "a final answer came for the end")
}

// TestInteractSignalWhileWaitingForInput: a signal sent to a process that
// waited for input, by interact or by kill, clears that state, as input
// does: the answer waits for what the signal did (here a trap that prints,
// sleeps and exits 3) rather than coming back at once with the stale
// waiting_for_input of before the signal.
func TestInteractSignalWhileWaitingForInput(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	for _, byKill := range []bool{false, true} {
		r, p, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{
			Cmd: `trap 'echo int; sleep 1; exit 3' INT; read x`, Stdin: api.StdinOpen}, Timeout: client.Millis(30 * time.Second)})
		require.NoError(t, err)
		require.NotNil(t, p)
		require.Equal(t, api.CameBackInput, r.CameBack)
		opts := client.InteractOptions{Signal: "INT", Timeout: client.Millis(30 * time.Second)}
		if byKill {
			require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "INT"}))
			opts.Signal, opts.Cursor = "", r.Next
		}
		r, p, err = d.c.Interact(c, p.ID, opts)
		require.NoError(t, err)
		require.Nil(t, p, "by kill %v: came back before the end: %+v", byKill, r)
		require.Equal(t, 3, *r.ExitCode)
		require.Equal(t, "int\n", r.Output)
	}
}

// An interact call waiting for the turn of the call before it answers by
// its own timeout, which counts the wait: a bare one as a wait that ran out
// (202), one with input 409, its input not written (it would have been
// written once the turn came, after an answer that said nothing of it).
// The wait for the turn did not count: behind a call of 20 s, a call of
// 200 ms waited 20 s.
func TestInteractTimeoutCountsTheTurn(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: `read l; echo got:$l; sleep 60`, Stdin: process.StdinOpen})
	require.NoError(t, err)
	defer d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"})
	holding := make(chan error, 1)
	go func() { // holds the turn for 20 s: the process writes no more
		_, _, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: "first\n", Timeout: client.Millis(20 * time.Second)})
		holding <- err
	}()
	require.Eventually(t, func() bool { // the first call wrote its input
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0
	}, 10*time.Second, 10*time.Millisecond)
	short := client.Millis(200 * time.Millisecond)
	wait, cctx := context.WithTimeout(c, 10*time.Second)
	defer cctx()
	r, still, err := d.c.Interact(wait, p.ID, client.InteractOptions{Timeout: short})
	require.NoError(t, err, "a bare call behind the first came back by its timeout")
	require.NotNil(t, still)
	require.Equal(t, api.CameBackTimeout, r.CameBack)
	_, _, err = d.c.Interact(wait, p.ID, client.InteractOptions{Input: "second\n", Timeout: short})
	requireCode(t, err, client.CodeUnsupportedOperation)
	require.Contains(t, err.Error(), "nothing of it was written")
	require.NoError(t, d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}))
	require.NoError(t, <-holding)
}

// TestInteractLineGoesWithItsRecord: an interact call that found its process,
// then read its body while a DELETE removed the record (and the line of
// interact calls with it), makes the line anew as it takes its place in it;
// once it leaves, the line goes, as the record has. Kept, each such call left
// a line behind for as long as the daemon ran.
func TestInteractLineGoesWithItsRecord(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	p, err := d.c.Start(ctx(t), client.StartOptions{Cmd: "sleep 100"})
	require.NoError(t, err)
	conn := d.dial(t)
	defer conn.Close()
	body := `{"timeout":1}`
	_, err = fmt.Fprintf(conn, "POST /v1/processes/%s/interact HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		p.ID, testToken, len(body))
	require.NoError(t, err)
	// 100 Continue: the call has found the process and reads its body
	// (the daemon reads a body only once it has looked the process up).
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, resp.StatusCode)
	require.NoError(t, d.c.Delete(ctx(t), p.ID))
	_, err = conn.Write([]byte(body))
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The call leaves the line once its answer is written.
	require.Eventually(t, func() bool { return server.InteractLines(d.srv) == 0 }, 10*time.Second, 5*time.Millisecond,
		"a line of interact calls outlived its record")
}

// TestEarlyAnswerOfAnEndedProcess: a one-shot that exited while a job it
// left holds its output (read on for up to the drain delay) has its final
// result: a run whose timeout comes first, and a bare interact after it,
// answer 200 with it — not 202 "still running", state terminal, which the
// CLI printed as a command still running — the interact at once, before
// the job prints on.
func TestEarlyAnswerOfAnEndedProcess(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	r, p, err := d.c.Run(c, client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "echo a; (sleep 1; echo late) & exit 3"},
		Timeout:      client.Millis(300 * time.Millisecond)})
	require.NoError(t, err)
	require.Nil(t, p, "a final answer: %+v", r)
	require.NotNil(t, r.ExitCode)
	require.Equal(t, 3, *r.ExitCode)
	require.Equal(t, "a\n", r.Output)
	require.Empty(t, r.CameBack)

	r, p, err = d.c.Interact(c, r.ProcessID, client.InteractOptions{Timeout: client.Millis(time.Minute)})
	require.NoError(t, err)
	require.Nil(t, p, "a final answer: %+v", r)
	require.Equal(t, 3, *r.ExitCode)
	require.Empty(t, r.Output, "answered at once, not once the job printed and let go")
}
