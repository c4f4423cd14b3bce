package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/heaptest"
)

// TestStdioHeldRequestsBounded queues runs whose requests are 10 MiB each
// (a _meta of that size) behind a command that waits: the first six are
// taken and wait, the two that would pass the bound of the requests not
// yet answered (64 MiB) are answered at once with the error that says so,
// as is a batch's call that would, and the client's cancel of the waiting
// command still comes through, after which every request taken is
// answered. Each such request was held until its answer: 50 of them had
// conch mcp hold 2 GB, and more with each line.
func TestStdioHeldRequestsBounded(t *testing.T) {
	t.Parallel()
	started := filepath.Join(t.TempDir(), "started")
	m := startRawMCP(t)
	// A version with batches, to send one below.
	m.send(strings.Replace(initialize, "2025-06-18", "2025-03-26", 1))
	require.Nil(t, m.next().Error)
	m.send(initialized)
	m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":`+
		`{"command":%q,"session":"s","timeout":600}}}`, ": >"+started+"; sleep 600"))
	waitFile(t, started)

	pad := strings.Repeat("x", 10<<20)
	run := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run","_meta":{"pad":%q},`+
			`"arguments":{"command":"echo ran %d","session":"s","timeout":600}}}`, id, pad, id)
	}
	_, err := heaptest.Peak(m.cmd.Process.Pid, true)
	require.NoError(t, err)
	for id := 10; id < 18; id++ {
		m.send(run(id))
	}
	m.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	refused := map[string]bool{}
	for {
		r := m.next()
		if string(r.ID) == "3" {
			break
		}
		require.NotNil(t, r.Error, "only a refusal comes before the ping's answer: %s %s", r.ID, r.Result)
		require.Equal(t, -32010, r.Error.Code, "%s", r.Error.Message)
		require.Contains(t, r.Error.Message, "bound of 67108864 (64 MiB)")
		require.Contains(t, r.Error.Message, "send it again once earlier requests are answered")
		refused[string(r.ID)] = true
	}
	require.Equal(t, map[string]bool{"16": true, "17": true}, refused,
		"the runs past 64 MiB are answered at once, while the ones before wait")

	// In a batch, the call that would pass the bound gets the error in
	// the batch's answer, beside the others'.
	m.send(`[{"jsonrpc":"2.0","id":4,"method":"ping"},` + run(5) + `]`)
	var batch []reply
	require.NoError(t, json.Unmarshal([]byte(m.nextLine()), &batch))
	require.Len(t, batch, 2)
	byID := map[string]reply{}
	for _, r := range batch {
		byID[string(r.ID)] = r
	}
	require.Nil(t, byID["4"].Error)
	require.NotNil(t, byID["5"].Error)
	require.Equal(t, -32010, byID["5"].Error.Code, "%s", byID["5"].Error.Message)

	// The cancel of the waiting command comes through: the runs queued
	// behind it run, each answered once, and it is not answered.
	m.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	answered := map[string]bool{}
	for range 6 {
		r := m.next()
		require.Nil(t, r.Error, "%s", r.ID)
		require.Contains(t, string(r.Result), "ran "+string(r.ID))
		require.False(t, answered[string(r.ID)], "%s answered twice", r.ID)
		answered[string(r.ID)] = true
	}
	require.Equal(t, map[string]bool{"10": true, "11": true, "12": true, "13": true, "14": true, "15": true}, answered)
	peak, err := heaptest.Peak(m.cmd.Process.Pid, false)
	require.NoError(t, err)
	t.Logf("peak resident memory while the runs waited: %d MB", peak>>20)

	// With the room back, a request of the same size is taken.
	m.send(run(6))
	r := m.next()
	require.Equal(t, "6", string(r.ID), "%s", r.Result)
	require.Nil(t, r.Error)
	require.Contains(t, string(r.Result), "ran 6")

	require.NoError(t, m.in.Close())
	guard := time.AfterFunc(hangGuard, func() { _ = m.cmd.Process.Kill() })
	defer guard.Stop()
	require.NoError(t, m.cmd.Wait())
	_, ok := <-m.lines
	require.False(t, ok, "nothing more is answered: the cancelled run is not")
}
