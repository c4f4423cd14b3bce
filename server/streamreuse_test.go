package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// TestUnreadStreamLetsTheLogReuseItsBlocks: output flooding through a full
// log reuses the log's blocks while a stream of it is stuck on a client that
// reads nothing, as it does with no stream: the stream holds the block of
// the frame it is sending, not every block after it. Each block was left to
// the garbage collector instead, at the pace of the output (a running yes
// then had it collect some 33 times a second). Not parallel: it measures
// what the whole process allocates.
func TestUnreadStreamLetsTheLogReuseItsBlocks(t *testing.T) {
	d := start(t, server.Options{})
	c := ctx(t)
	// The log fills, the stream gets stuck on that, then the flood.
	p, err := d.c.Start(c, client.StartOptions{Cmd: "head -c 12000000 /dev/zero; read x; head -c 33554432 /dev/zero", Stdin: process.StdinOpen})
	require.NoError(t, err)
	defer func() { _ = d.c.Kill(c, p.ID, client.KillOptions{Signal: "KILL"}) }()
	waitStuck(t, openUnread(t, d.addr, p.ID))
	const flood = 32 << 20
	allocated := heaptest.Allocated(func() {
		require.NoError(t, d.c.WriteStdin(c, p.ID, []byte("go\n"), false))
		_, _, err = d.c.Wait(c, p.ID, 0)
		require.NoError(t, err)
	})
	t.Logf("%d KiB allocated while %d MiB went through the log", allocated>>10, flood>>20)
	require.Less(t, allocated, uint64(flood/4), "bytes allocated while %d went through a full log with a stuck stream", flood)
}
