package server_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// waitsThenAnswers runs cmd until it comes back (no timeout: only a wait
// for input can end the wait early), requires that it waits for input,
// answers it and requires the end and the output after the answer.
func waitsThenAnswers(t *testing.T, d *daemon, r *client.RunResult, p *client.Process, input string, eof bool, want string) {
	t.Helper()
	require.NotNil(t, p, "ended instead of waiting: %+v", r)
	require.True(t, r.WaitingForInput)
	got, err := d.c.Get(ctx(t), p.ID)
	require.NoError(t, err)
	require.True(t, got.WaitingForInput)
	r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Input: input, EOF: eof})
	require.NoError(t, err)
	require.Nil(t, p, "still running after the answer: %+v", r)
	require.Equal(t, 0, exitCode(t, r.WaitResult))
	require.Equal(t, want, r.Output)
}

func TestWaitingForInputSession(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, sh := range allShells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Shell: sh})
			require.NoError(t, err)
			// A background job of an earlier command does not hide it.
			d.runIn(t, s.ID, "sleep 30 &")
			run := func(cmd string) (*client.RunResult, *client.Process) {
				r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
					CommandOptions: client.CommandOptions{Cmd: cmd, Stdin: process.StdinOpen},
				})
				require.NoError(t, err)
				return r, p
			}
			r, p := run(`printf 'name? '; read n; echo "hi $n"`)
			require.Equal(t, "name? ", r.Output)
			waitsThenAnswers(t, d, r, p, "ada\n", false, "hi ada\n")
			if sh == "bash" || sh == "dash" {
				r, p = run(`head -1`)
				waitsThenAnswers(t, d, r, p, "one\ntwo\n", false, "one\n")
				r, p = run(`cat | grep x`)
				waitsThenAnswers(t, d, r, p, "a\nx\n", true, "x\n")
				r, p = run(`python3 -c 'print(input())'`)
				waitsThenAnswers(t, d, r, p, "py\n", false, "py\n")
			}
		})
	}
}

func TestWaitingForInputExec(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			run := func(kind process.Kind, cmd string) (*client.RunResult, *client.Process) {
				r, p, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{
					Kind: kind, Cmd: cmd, Shell: sh, Stdin: process.StdinOpen,
				}})
				require.NoError(t, err)
				return r, p
			}
			r, p := run(process.KindExec, `read n; echo "hi $n"`)
			waitsThenAnswers(t, d, r, p, "ada\n", false, "hi ada\n")
			r, p = run(process.KindExec, `python3 -c 'print(input())'`)
			waitsThenAnswers(t, d, r, p, "py\n", false, "py\n")
			r, p = run(process.KindExec, `cat | grep x`)
			waitsThenAnswers(t, d, r, p, "a\nx\n", true, "x\n")
			r, p = run(process.KindPTY, `stty -echo; read n; echo "hi $n"`)
			waitsThenAnswers(t, d, r, p, "ada\n", false, "hi ada\r\n")
			r, p = run(process.KindPTY, `stty -echo; python3 -c 'print(input())'`)
			waitsThenAnswers(t, d, r, p, "py\n", false, "py\r\n")
		})
	}
}

// fifo makes a FIFO that this test holds open for writing, so that a
// command reading it blocks in read, fed from outside its tree.
func fifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return path
}

// TestNotWaitingForInput: what is blocked on something else, or has stdin
// closed, is never said to wait; the wait runs out (or the command ends) as
// it would without the detection.
func TestNotWaitingForInput(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	cases := []struct {
		name, cmd string
		stdin     process.Stdin
	}{
		{"sleep with stdin open", "sleep 5", process.StdinOpen},
		{"fifo that is not stdin", "cat " + fifo(t), process.StdinOpen},
		{"socket that is not stdin", `python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); s.accept()'`, process.StdinOpen},
		{"stdin closed", "sleep 1; read n; sleep 5", process.StdinClosed},
	}
	for _, sh := range []string{"bash", "dash"} {
		for _, tc := range cases {
			t.Run(sh+" "+tc.name, func(t *testing.T) {
				t.Parallel()
				r, p, err := d.c.Run(ctx(t), client.RunOptions{
					StartOptions: client.StartOptions{Cmd: tc.cmd, Shell: sh, Stdin: tc.stdin},
					Timeout:      client.Millis(1500 * time.Millisecond),
				})
				require.NoError(t, err)
				require.NotNil(t, p)
				require.False(t, r.WaitingForInput)
				got, err := d.c.Get(ctx(t), p.ID)
				require.NoError(t, err)
				require.False(t, got.WaitingForInput)
				require.NoError(t, d.c.Kill(ctx(t), p.ID, client.KillOptions{Signal: "KILL"}))
			})
		}
	}
}

// TestNotWaitingForInputSession: the same in a session: a command that
// sleeps or reads a FIFO with stdin open, or reads with stdin closed.
func TestNotWaitingForInputSession(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	cases := []struct {
		name, cmd string
		stdin     process.Stdin
	}{
		{"sleep with stdin open", "sleep 5", process.StdinOpen},
		{"fifo that is not stdin", "cat " + fifo(t), process.StdinOpen},
		{"stdin closed", "read n; sleep 5", process.StdinClosed},
	}
	for _, sh := range []string{"bash", "dash"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Shell: sh})
			require.NoError(t, err)
			for _, tc := range cases {
				r, p, err := d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{
					CommandOptions: client.CommandOptions{Cmd: tc.cmd, Stdin: tc.stdin},
					Timeout:        client.Millis(1500 * time.Millisecond),
				})
				require.NoError(t, err)
				require.NotNil(t, p, tc.name)
				require.False(t, r.WaitingForInput, tc.name)
				r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Signal: "INT"})
				require.NoError(t, err)
				require.Nil(t, p, tc.name)
			}
		})
	}
}
