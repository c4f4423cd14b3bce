package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// stdinKinds starts, for each kind of process with open stdin, one that
// reads nothing for a minute and then copies its stdin to stdout (counting
// its bytes when count is set).
func stdinKinds(d *daemon, count bool) map[string]func(t *testing.T) *client.Process {
	sh := "sleep 60; cat"
	py := "import sys, time\ntime.sleep(60)\nsys.stdout.write(sys.stdin.read())"
	if count {
		sh = "wc -c"
		py = "import sys\nprint(len(sys.stdin.buffer.read()))"
	}
	return map[string]func(t *testing.T) *client.Process{
		"exec": func(t *testing.T) *client.Process {
			c := ctx(t)
			p, err := d.c.Start(c, client.StartOptions{Cmd: sh, Stdin: process.StdinOpen})
			require.NoError(t, err)
			return p
		},
		"pty": func(t *testing.T) *client.Process {
			c := ctx(t)
			cmd := "stty raw -echo; " + sh
			p, err := d.c.Start(c, client.StartOptions{Kind: process.KindPTY, Cmd: cmd})
			require.NoError(t, err)
			return p
		},
		"session command": func(t *testing.T) *client.Process {
			c := ctx(t)
			s, err := d.c.CreateSession(c, client.SessionOptions{})
			require.NoError(t, err)
			p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: sh, Stdin: process.StdinOpen})
			require.NoError(t, err)
			return p
		},
		"code cell": func(t *testing.T) *client.Process {
			c := ctx(t)
			s, err := d.c.CreateSession(c, client.SessionOptions{Language: "python"})
			require.NoError(t, err)
			p, err := d.c.Submit(c, s.ID, client.CommandOptions{Code: py, Stdin: process.StdinOpen})
			require.NoError(t, err)
			return p
		},
	}
}

// TestStdinNeverHangs: input to a process that does not read is queued, so
// interact answers by its timeout; a write that does not fit in the queue
// is refused at once saying how much of it was taken; what is queued when
// the process ends is dropped and counted.
func TestStdinNeverHangs(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for name, startIt := range stdinKinds(d, false) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startIt(t)
			// The hang guard: a minute of sleep is far beyond it.
			c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			input := strings.Repeat("x", 100<<10)
			_, still, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: input, Timeout: client.Millis(200 * time.Millisecond)})
			require.NoError(t, err, "interact with 100 KB of input comes back by its timeout")
			require.NotNil(t, still)
			err = d.c.WriteStdin(c, p.ID, bytes.Repeat([]byte("y"), 2*process.StdinQueueLimit), false)
			var full *client.Error
			require.True(t, errors.As(err, &full), "a write over the queue's room: %v", err)
			require.Equal(t, client.CodeStdinFull, full.Code)
			require.Equal(t, 409, full.Status)
			require.Positive(t, full.AcceptedBytes)
			require.Less(t, full.AcceptedBytes, 2*process.StdinQueueLimit)
			require.Contains(t, full.Message, fmt.Sprint(process.StdinQueueLimit))
			// The queue is full: a small write is refused too, whole.
			err = d.c.WriteStdin(c, p.ID, []byte("z"), false)
			require.True(t, client.HasCode(err, client.CodeStdinFull), "%v", err)
			_, still, err = d.c.Interact(c, p.ID, client.InteractOptions{EOF: true, Timeout: client.Millis(200 * time.Millisecond)})
			if name == "pty" {
				// A terminal's end-of-file is a byte (Ctrl-D), queued as input is.
				require.True(t, client.HasCode(err, client.CodeStdinFull), "%v", err)
			} else {
				require.NoError(t, err, "an eof behind a full queue comes back")
				require.NotNil(t, still)
			}
			r, still, err := d.c.Interact(c, p.ID, client.InteractOptions{Signal: "INT"})
			require.NoError(t, err)
			require.Nil(t, still)
			// What was still queued when it ended is dropped, and what its
			// pipe held unread (see TestStdinUnreadIsDropped); what a
			// terminal took is not counted.
			require.Positive(t, r.StdinDroppedBytes)
			require.LessOrEqual(t, r.StdinDroppedBytes, int64(process.StdinQueueLimit))
			got, err := d.c.Get(c, p.ID)
			require.NoError(t, err)
			require.Equal(t, r.StdinDroppedBytes, got.StdinDroppedBytes)
		})
	}
}

// TestStdinUnreadIsDropped: input the process never read is counted as
// dropped, also what its pipe or FIFO held when it ended: ten bytes written
// to a command that sleeps were counted as none.
func TestStdinUnreadIsDropped(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for name, startIt := range stdinKinds(d, false) {
		if name == "pty" {
			continue // a terminal's input queue is the line discipline's
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startIt(t)
			c := ctx(t)
			require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("hello12345"), false))
			time.Sleep(100 * time.Millisecond) // out of the queue, into the pipe
			r, still, err := d.c.Interact(c, p.ID, client.InteractOptions{Signal: "INT"})
			require.NoError(t, err)
			require.Nil(t, still)
			require.Equal(t, int64(10), r.StdinDroppedBytes)
		})
	}
}

// TestStdinQueueLosesNothing: a writer that resends what the queue did not
// take gets every byte to a process that reads, several times the queue's
// bound.
func TestStdinQueueLosesNothing(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for name, startIt := range stdinKinds(d, true) {
		if name == "pty" {
			continue // a terminal's line discipline is no byte pipe
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startIt(t)
			c := ctx(t)
			const total = 3 * process.StdinQueueLimit
			data := bytes.Repeat([]byte("0123456789abcdef"), total/16)
			refused := 0
			for len(data) > 0 {
				err := d.c.WriteStdin(c, p.ID, data[:min(len(data), 512<<10)], false)
				var full *client.Error
				if errors.As(err, &full) && full.Code == client.CodeStdinFull {
					refused++
					data = data[full.AcceptedBytes:]
					time.Sleep(10 * time.Millisecond)
					continue
				}
				require.NoError(t, err)
				data = data[min(len(data), 512<<10):]
			}
			require.NoError(t, d.c.WriteStdin(c, p.ID, nil, true))
			r, _, err := d.c.Wait(c, p.ID, 0)
			require.NoError(t, err)
			require.Zero(t, r.StdinDroppedBytes)
			page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
			require.NoError(t, err)
			var out strings.Builder
			for _, f := range page.Items {
				out.WriteString(f.Data)
			}
			require.Equal(t, fmt.Sprint(total), strings.TrimSpace(out.String()))
			t.Logf("%d writes refused while the queue was full", refused)
		})
	}
}

// TestStdinReadIsNotDropped: input the command read is not counted as
// dropped. A command that read its line and ended at once was said to have
// dropped it about one time in five: the feeder had written it and not yet
// said so.
func TestStdinReadIsNotDropped(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	s, err := d.c.CreateSession(c, client.SessionOptions{})
	require.NoError(t, err)
	for i := range 25 {
		p, err := d.c.Submit(c, s.ID, client.CommandOptions{Cmd: `read n; echo "hi $n"`, Stdin: process.StdinOpen})
		require.NoError(t, err)
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("ada\n"), false))
		r, _, err := d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
		require.Zero(t, r.StdinDroppedBytes, "%d: the line was read", i)
	}
}

// TestStdinClosedByTheProgram: once an exec process closed its stdin (a
// write found it), its record says closed, and input and end-of-file alike
// are refused, 409: the first end-of-file was taken, 204.
func TestStdinClosedByTheProgram(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "exec 0<&-; echo closed; sleep 30", Stdin: process.StdinOpen})
	require.NoError(t, err)
	defer d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"})
	require.Eventually(t, func() bool {
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0 && strings.Contains(page.Items[0].Data, "closed")
	}, 20*time.Second, 5*time.Millisecond, "the program closes its stdin")
	require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("abc"), false)) // queued: its write fails
	require.Eventually(t, func() bool {
		got, err := d.c.Get(c, p.ID)
		return err == nil && got.Stdin == process.StdinClosed
	}, 20*time.Second, 5*time.Millisecond, "the record says stdin closed")
	for _, eof := range []bool{true, false, true} {
		err := d.c.WriteStdin(c, p.ID, nil, eof)
		var e *client.Error
		require.True(t, errors.As(err, &e), "eof %t: %v", eof, err)
		require.Equal(t, 409, e.Status, "eof %t: %v", eof, err)
	}
}
