package server_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/internal/racetest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// logBytes joins the bytes of an answer's frames.
func logBytes(t *testing.T, r *client.RunResult) string {
	t.Helper()
	var b strings.Builder
	for _, f := range r.Logs {
		data, err := f.Bytes()
		require.NoError(t, err)
		b.Write(data)
	}
	return b.String()
}

func TestPlain(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	dir := t.TempDir()
	cases := []struct {
		name, cmd, want, raw string
	}{
		{"python progress bar", `python3 -c '
import sys, time
for i in range(0, 101, 10):
    sys.stdout.write("\r[%-10s] %3d%%" % ("#" * (i // 10), i)); sys.stdout.flush(); time.sleep(0.01)
print()'`, "[##########] 100%\n", "\r[#         ]  10%"},
		{"ls colours", "mkdir -p " + dir + "/d/sub && ls --color=always " + dir + "/d", "sub\n", "\x1b["},
		{"grep colours", "echo 'a needle here' | grep --color=always needle", "a needle here\n", "\x1b["},
		{"printf cursor moves", `printf 'abc\bX\033[2Dyz\n12345\033[3G_\n'`, "ayz\n12_45\n", "\033[2D"},
	}
	for _, sh := range []string{"bash", "dash"} {
		for _, tc := range cases {
			t.Run(sh+" "+tc.name, func(t *testing.T) {
				t.Parallel()
				r, p, err := d.c.Run(ctx(t), client.RunOptions{
					StartOptions: client.StartOptions{Cmd: tc.cmd, Shell: sh}, Plain: true,
				})
				require.NoError(t, err)
				require.Nil(t, p)
				require.Equal(t, 0, exitCode(t, r.WaitResult), r.Stderr)
				require.Equal(t, tc.want, r.Output)
				require.Equal(t, tc.want, r.Stdout)
				require.Contains(t, logBytes(t, r), tc.raw, "logs stay exact")
			})
		}
	}
	t.Run("interact and early answers", func(t *testing.T) {
		t.Parallel()
		r, p, err := d.c.Run(ctx(t), client.RunOptions{
			StartOptions: client.StartOptions{Cmd: `printf '10%%\r50%%\rname? '; read n; printf '\033[1mhi\033[0m %s\n' "$n"`, Stdin: process.StdinOpen},
			Plain:        true,
		})
		require.NoError(t, err)
		require.NotNil(t, p)
		require.Equal(t, "name?", r.Output) // trailing blanks of a line are not shown
		r, p, err = d.c.Interact(ctx(t), p.ID, client.InteractOptions{Input: "ada\n", Plain: true, Timeout: client.Millis(time.Minute)})
		require.NoError(t, err)
		require.Nil(t, p)
		require.Equal(t, "hi ada\n", r.Output)
	})
}

// A plain answer's text is held to its bound as it is rendered, never
// rendered whole first: 2 MB of ESC[1023C x (9 bytes to a line of 1,025
// bytes) rendered to over 200 MB for an answer of 1 MiB, all of it held at
// once, and a run with an outputLimit of the retention, 8 MiB, ran the
// daemon out of memory. Not parallel: the whole process's peak resident
// memory is measured.
func TestPlainRenderBounded(t *testing.T) {
	d := start(t, server.Options{})
	opts := client.RunOptions{StartOptions: client.StartOptions{Cmd: `yes "$(printf '\033[1023Cx')" | head -c 2000000`}, Plain: true}
	runtime.GC()
	before, err := heaptest.Peak(os.Getpid(), true)
	require.NoError(t, err)
	r, _, err := d.c.Run(ctx(t), opts)
	require.NoError(t, err)
	after, err := heaptest.Peak(os.Getpid(), false)
	require.NoError(t, err)
	grew := after - before
	t.Logf("peak resident memory grew %d MiB", grew>>20)
	require.Equal(t, process.Exited, r.Reason)
	require.LessOrEqual(t, len(r.Output), 1<<20)
	require.Positive(t, r.OmittedBytes)
	require.True(t, strings.HasSuffix(r.Output, "x\n"), "the tail keeps its end")
	bound := int64(96 << 20)
	if racetest.Enabled {
		bound *= 2 // the detector's own memory (35 MiB here, against 32)
	}
	require.Less(t, grew, bound, "the peak grew for a plain answer of at most 1 MiB")
}

// A plain answer that reads on from a cursor renders what comes after it
// as the output before the cursor left the renderer: an escape sequence
// cut between an early answer and the next showed its tail as text.
func TestPlainReadsOnInsideAnEscape(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	gate := t.TempDir() + "/gate"
	for _, tt := range []struct{ name, cmd string }{
		{"stdout", `printf 'x\033[3'; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '1mRED\033[0m\n'`},
		{"stderr", `printf 'x\033[3' >&2; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '1mRED\033[0m\n' >&2`},
	} {
		os.Remove(gate)
		r, p, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: tt.cmd}, Plain: true,
			IdleTimeout: client.Millis(300 * time.Millisecond)})
		// The idle timeout counts from the call too: a loaded machine
		// may start the shell, and its first printf, past it, and the
		// answer holds nothing yet. Read on from there until it has come.
		for err == nil && p != nil && r.Output == "" {
			r, p, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: r.Next, Plain: true,
				IdleTimeout: client.Millis(300 * time.Millisecond)})
		}
		require.NoError(t, err, tt.name)
		require.NotNil(t, p, "%s: it came back early: %+v", tt.name, r)
		require.Equal(t, "x", r.Output, tt.name)
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		r, p, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: r.Next, Plain: true, Timeout: client.Millis(30 * time.Second)})
		require.NoError(t, err, tt.name)
		require.Nil(t, p, tt.name)
		require.Equal(t, "RED\n", r.Output, tt.name)
		if tt.name == "stdout" {
			require.Equal(t, "RED\n", r.Stdout, tt.name)
		} else {
			require.Equal(t, "RED\n", r.Stderr, tt.name)
		}
	}
}
