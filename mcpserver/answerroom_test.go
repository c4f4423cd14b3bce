package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/mcpserver"
)

// TestStdioUnreadAnswersBounded pipelines read_output calls with the
// largest limit, each of which answers 4 MB, and reads none of the answers
// until the first one fills the pipe: the memory of conch mcp stays within
// what a few such answers hold. Every call read once held its whole answer
// at once (24 calls: 1.3 GB, against 100 MB for one), since each is handled
// on its own and the reading of input stops only once an answer's write
// waits.
func TestStdioUnreadAnswersBounded(t *testing.T) {
	t.Parallel()
	const calls = 24
	cmd, in, outR := startPipedMCP(t)
	defer func() {
		_ = in.Close()
		_ = cmd.Wait()
	}()

	send := func(line string) {
		t.Helper()
		_, err := io.WriteString(in, line+"\n")
		require.NoError(t, err)
	}
	br := bufio.NewReaderSize(outR, 1<<20)
	next := func() reply {
		t.Helper()
		line, err := br.ReadBytes('\n')
		require.NoError(t, err)
		var r reply
		require.NoError(t, json.Unmarshal(line, &r), "answer: %.300s", line)
		return r
	}
	send(initialize)
	require.Nil(t, next().Error)
	send(initialized)
	// 4 MB of output, whole under the largest limit: each read answers it all.
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":` +
		`{"command":"head -c 3000000 /dev/zero | base64","outputLimit":100}}}`)
	r := next()
	require.Nil(t, r.Error)
	var ran struct {
		StructuredContent mcpserver.Result `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &ran))
	require.False(t, ran.StructuredContent.Running, "%+v", ran.StructuredContent)

	before, err := heaptest.Peak(cmd.Process.Pid, true)
	require.NoError(t, err)
	for k := range calls {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_output","arguments":`+
			`{"id":%q,"limit":%d}}}`, 100+k, ran.StructuredContent.ID, mcpserver.MaxOutputLimit))
	}
	waitPipeFull(t, outR)
	whole := 0
	for range calls {
		r := next()
		require.Nil(t, r.Error)
		var read struct {
			StructuredContent mcpserver.ReadOutput `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &read))
		// The whole output, read, or, past the room, a page of the
		// default limit with more to read.
		if rd := read.StructuredContent; rd.Bytes != 4000000+4000000/76+1 {
			require.LessOrEqual(t, rd.Bytes, int64(mcpserver.DefaultOutputLimit), "%+v", rd)
			require.True(t, rd.More, "%+v", rd)
		} else {
			whole++
		}
	}
	require.Positive(t, whole, "the calls that found room read the whole output")
	peak, err := heaptest.Peak(cmd.Process.Pid, false)
	require.NoError(t, err)
	t.Logf("peak resident memory: %d MB, %d MB before the reads", peak>>20, before>>20)
	require.Less(t, peak, before+400<<20, "conch mcp held %d MB for %d answers not read", (peak-before)>>20, calls)
}

// TestStdioNoCallWaitsForRoom fills the room of the answers with runs that
// wait for their commands: a read_output and an interact with the largest
// limit are answered at once all the same, the interact's interrupt
// delivered, their output cut to the default limit, which the interact's
// answer says. Waiting for room, they held back the interrupt, and the
// read_output that answers without waiting, for as long as the runs waited.
func TestStdioNoCallWaitsForRoom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := newGate(t)
	m := startRawMCP(t)
	m.initialize()
	// A command to interrupt, answered while it runs.
	m.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":` +
		`{"command":"head -c 40000 /dev/zero | tr \\\\0 a; echo up; sleep 600","session":"x","timeout":0.5}}}`)
	r := m.next()
	require.Nil(t, r.Error)
	var up struct {
		StructuredContent mcpserver.Result `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &up))
	require.True(t, up.StructuredContent.Running, "%s", r.Result)
	// Four runs that hold all the room but 4000 bytes while they wait.
	const held = mcpserver.MaxOutputLimit - 1000
	for i := range 4 {
		started := filepath.Join(dir, fmt.Sprint("started", i))
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run","arguments":`+
			`{"command":%q,"session":"s%d","outputLimit":%d,"timeout":600}}}`, 3+i, "touch "+started+"; "+g.wait(), i, held))
		waitFile(t, started)
	}
	// A run takes its room once its command is queued, which can be after
	// the command has started: the reads go on until one finds the room
	// held, its page cut to the default limit (the first read whole shows
	// "up" after the 40,000 bytes).
	for id, deadline := 100, time.Now().Add(hangGuard); ; id++ {
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_output","arguments":`+
			`{"id":%q,"cursor":"0","limit":%d}}}`, id, up.StructuredContent.ID, mcpserver.MaxOutputLimit))
		r = m.next()
		require.Equal(t, fmt.Sprint(id), string(r.ID), "the read is answered while the runs wait: %s", r.Result)
		require.Nil(t, r.Error)
		var rd struct {
			StructuredContent mcpserver.ReadOutput `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &rd))
		if rd.StructuredContent.More {
			require.Len(t, rd.StructuredContent.Output, mcpserver.DefaultOutputLimit, "a read that finds no room is cut to the default limit")
			break
		}
		require.Contains(t, rd.StructuredContent.Output, "up")
		require.True(t, time.Now().Before(deadline), "the runs never held the room")
		time.Sleep(10 * time.Millisecond)
	}

	m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"interact","arguments":`+
		`{"id":%q,"signal":"INT","outputLimit":%d,"timeout":600}}}`, up.StructuredContent.ID, mcpserver.MaxOutputLimit))
	r = m.next()
	require.Equal(t, "12", string(r.ID), "the interact is answered while the runs wait: %s", r.Result)
	require.Nil(t, r.Error)
	var ended struct {
		StructuredContent mcpserver.Result `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &ended))
	require.False(t, ended.StructuredContent.Running, "the interrupt ended the command: %s", r.Result)
	require.Contains(t, ended.StructuredContent.Note, "output cut to 32768 bytes")

	g.open(t)
	answered := map[string]bool{}
	for range 4 {
		r := m.next()
		require.Nil(t, r.Error, "%s", r.ID)
		answered[string(r.ID)] = true
	}
	require.Equal(t, map[string]bool{"3": true, "4": true, "5": true, "6": true}, answered, "every run is answered")
}
