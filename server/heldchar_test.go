package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/server"
)

// halfEuro writes "a" and the first two bytes of a euro sign, waits for a
// line on its stdin, then writes the sign's last byte and a newline.
const halfEuro = `printf 'a\342\202'; read x; printf '\254\n'`

// waitForFrame pages the log of id until a frame holds want, and returns
// its cursor: the log puts the first bytes of a character out as a frame of
// their own once their rest has not come for 50 ms.
func waitForFrame(t *testing.T, d *daemon, id string, want []byte) string {
	t.Helper()
	c := ctx(t) // a hang guard
	for {
		page, err := d.c.Logs(c, id, client.LogsOptions{})
		require.NoError(t, err)
		for _, f := range page.Items {
			if b, err := f.Bytes(); err == nil && string(b) == string(want) {
				return f.Cursor
			}
		}
		require.NoError(t, c.Err(), "no frame of %q", want)
	}
}

// TestRunningAnswerHoldsAnUnfinishedCharacter: the answer for a command
// that still runs, whose output so far ends in the first bytes of a
// character, leaves them out of its text and its logs, its next before
// them, so that the answer read on from next has the character whole, not
// a U+FFFD for its first bytes and another for its last.
func TestRunningAnswerHoldsAnUnfinishedCharacter(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	for _, plain := range []bool{false, true} {
		name := "text"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := ctx(t)
			p, err := d.c.Start(c, client.StartOptions{Cmd: halfEuro, Stdin: api.StdinOpen})
			require.NoError(t, err)
			half := waitForFrame(t, d, p.ID, []byte("\xe2\x82"))

			r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Cursor: "0", Plain: plain, Timeout: client.Millis(time.Millisecond)})
			require.NoError(t, err)
			require.NotNil(t, running, "it waits for a line: %+v", r)
			require.Equal(t, "a", r.Output)
			require.Equal(t, "a", r.Stdout)
			require.Empty(t, r.Stderr)
			var logs strings.Builder
			for _, f := range r.Logs {
				b, err := f.Bytes()
				require.NoError(t, err)
				logs.Write(b)
				require.NotEqual(t, half, f.Cursor)
			}
			require.Equal(t, "a", logs.String())
			require.NotEqual(t, half, r.Next, "next is before the held bytes")

			r, running, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: r.Next, Input: "\n", Plain: plain})
			require.NoError(t, err)
			require.Nil(t, running, "it ended: %+v", r)
			require.Equal(t, 0, exitCode(t, r.WaitResult))
			require.Equal(t, "€\n", r.Output)
			require.Equal(t, "€\n", r.Stdout)
		})
	}
}

// TestCutAnswerHoldsAnUnfinishedCharacter: under an outputLimit that cuts
// the output, the first bytes of a character that are the whole tail are
// held back too, next before them and omittedBytes up to them: they went
// out as a U+FFFD, next after them, and the answer read on from next had
// the last byte alone.
func TestCutAnswerHoldsAnUnfinishedCharacter(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: "seq 1 100; " + halfEuro, Stdin: api.StdinOpen})
	require.NoError(t, err)
	half := waitForFrame(t, d, p.ID, []byte("\xe2\x82"))
	var seq strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	var r *client.RunResult
	// Tails too small for the held bytes, which cost 3 bytes each as
	// U+FFFDs, cut them: counted in omittedBytes, they are held all the
	// same.
	for _, limit := range []int64{1, 2, 3, 5, 10, 16, 40} {
		var running *client.Process
		r, running, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: "0", OutputLimit: limit, Timeout: client.Millis(time.Millisecond)})
		require.NoError(t, err)
		require.NotNil(t, running, "it waits for a line: %+v", r)
		require.NotContains(t, r.Output, "\ufffd", "outputLimit %d", limit)
		require.NotEqual(t, half, r.Next, "outputLimit %d: next is before the held bytes: %q %+v %d", limit, r.Output, r.Logs, r.OmittedBytes)
		require.Positive(t, r.OmittedBytes)
		// What the answer holds and what it left out make the whole
		// output up to next: "1\n" to "100\n", and "a".
		held := 0
		for _, f := range r.Logs {
			b, err := f.Bytes()
			require.NoError(t, err)
			held += len(b)
		}
		require.Equal(t, seq.Len()+len("a"), held+int(r.OmittedBytes), "outputLimit %d: bytes in the answer and omitted", limit)
		page, err := d.c.Logs(c, p.ID, client.LogsOptions{Cursor: r.Next})
		require.NoError(t, err)
		require.NotEmpty(t, page.Items)
		require.Equal(t, half, page.Items[0].Cursor, "outputLimit %d: the frame after next is the held one", limit)
	}
	r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Cursor: r.Next, Input: "\n"})
	require.NoError(t, err)
	require.Nil(t, running, "it ended: %+v", r)
	require.Equal(t, "€\n", r.Output)
}

// TestHeldBytesCostNothing: the bytes an early answer holds back do not
// count against its outputLimit: output before them that fits comes whole.
// They were counted first, 3 bytes each as U+FFFDs, and then taken out, so
// that "a" under an outputLimit of 1 came back cut, one byte omitted.
func TestHeldBytesCostNothing(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)
	p, err := d.c.Start(c, client.StartOptions{Cmd: halfEuro, Stdin: api.StdinOpen})
	require.NoError(t, err)
	waitForFrame(t, d, p.ID, []byte("\xe2\x82"))
	for _, plain := range []bool{false, true} {
		r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Cursor: "0", OutputLimit: 1, Plain: plain, Timeout: client.Millis(time.Millisecond)})
		require.NoError(t, err)
		require.NotNil(t, running, "it waits for a line: %+v", r)
		require.Equal(t, "a", r.Output, "plain %v", plain)
		require.Zero(t, r.OmittedBytes, "plain %v", plain)
	}
	_, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Input: "\n"})
	require.NoError(t, err)
	require.Nil(t, running)
}

// TestAnswerHoldsOnlyUnfinishedCharacters: nothing is held back once the
// command has ended (its first bytes of a character, whose rest never
// came, are a U+FFFD), nor bytes that can no longer become a character.
func TestAnswerHoldsOnlyUnfinishedCharacters(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	c := ctx(t)

	t.Run("ended", func(t *testing.T) {
		r, running, err := d.c.Run(c, client.RunOptions{StartOptions: client.StartOptions{Cmd: `printf 'a\342\202'`}})
		require.NoError(t, err)
		require.Nil(t, running)
		require.Equal(t, "a\ufffd", r.Output)
		require.Equal(t, "a\ufffd", r.Stdout)
		require.NotEmpty(t, r.Logs)
		b, err := r.Logs[len(r.Logs)-1].Bytes()
		require.NoError(t, err)
		require.Equal(t, "\xe2\x82", string(b[len(b)-2:]))
		require.Equal(t, r.Logs[len(r.Logs)-1].Cursor, r.Next)
	})

	t.Run("invalid", func(t *testing.T) {
		// ED A0 would be a surrogate: no character starts so.
		p, err := d.c.Start(c, client.StartOptions{Cmd: `printf 'a\355\240'; read x`, Stdin: api.StdinOpen})
		require.NoError(t, err)
		bad := waitForFrame(t, d, p.ID, []byte("a\xed\xa0"))
		r, running, err := d.c.Interact(c, p.ID, client.InteractOptions{Cursor: "0", Timeout: client.Millis(time.Millisecond)})
		require.NoError(t, err)
		require.NotNil(t, running, "it waits for a line: %+v", r)
		require.Equal(t, "a\ufffd\ufffd", r.Output)
		require.Equal(t, bad, r.Next)
		_, running, err = d.c.Interact(c, p.ID, client.InteractOptions{Cursor: r.Next, Input: "\n"})
		require.NoError(t, err)
		require.Nil(t, running)
	})
}
