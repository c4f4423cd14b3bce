package mcpserver

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/semaphore"
)

// The SDK handles each call on its own, and MaxOutputLimit bounds one
// answer only: a client that pipelined 40 read_output calls of 4 MB and
// read nothing had conch mcp hold 1.4 GB, every call read before the first
// answer's write waited holding its whole answer. So a call whose answer
// carries more output than the default (run, interact, read_output with a
// larger limit) takes room for its limit before it reads any output, and
// gives it back once its answer is written or dropped: the stdio gate,
// which sees every answer go, marks each such call with a key in its _meta
// and gives that key's room back (see gate.Write). A call that finds no
// room does not wait for it: its answer is cut to the default limit, and
// says so. A call that waited held back what an interact carries (an
// interrupt, input) and a read_output that answers at once, for as long as
// the runs holding the room waited for their commands.

// answerRoom bounds the limits of the calls under way together: four
// answers of the largest limit, five hundred of the default one. Each
// answer holds its output several times over (see MaxOutputLimit).
const answerRoom = 4 * MaxOutputLimit

// roomKey is the _meta key of the key the gate gives a call that takes
// room; it sets it over whatever the client sent.
const roomKey = "conch.sh/room"

// takesRoom is the tools whose answers carry output within a limit.
var takesRoom = map[string]bool{runTool.Name: true, interactTool.Name: true, readTool.Name: true}

// budget is the room of the calls under way.
type budget struct {
	room *semaphore.Weighted

	mu   sync.Mutex
	last int64
	of   map[jsonrpc.ID]int64 // the key of each call marked, until it is answered
	held map[int64]int64      // the bytes each key holds; a key is there until its call is answered
}

func newBudget() *budget {
	return &budget{room: semaphore.NewWeighted(answerRoom), of: map[jsonrpc.ID]int64{}, held: map[int64]int64{}}
}

// mark gives c, the call req, a key in its _meta when it is a call of a
// tool that takes room (takesRoom), and reports whether it did.
func (b *budget) mark(req *jsonrpc.Request, c call) bool {
	if b == nil || !c.ok || !takesRoom[c.name] || !c.metaOK {
		return false
	}
	b.mu.Lock()
	b.last++
	key := b.last
	b.of[req.ID], b.held[key] = key, 0
	b.mu.Unlock()
	c.meta[roomKey], _ = json.Marshal(key)
	return true
}

// take takes room for an answer of limit bytes to the call req, without
// waiting, and returns the limit its answer may have, and whether that is
// cut: limit when it is DefaultOutputLimit or less (such an answer takes
// no room), when it found room, or when the gate did not mark the call (no
// stdio); DefaultOutputLimit otherwise.
func (b *budget) take(req *mcp.CallToolRequest, limit int64) (int64, bool) {
	if b == nil || req == nil || req.Params == nil || limit <= DefaultOutputLimit {
		return limit, false
	}
	k, ok := req.Params.GetMeta()[roomKey].(float64)
	if !ok {
		return limit, false
	}
	key, n := int64(k), min(limit, answerRoom)
	if !b.room.TryAcquire(n) {
		return DefaultOutputLimit, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[key]; !ok {
		b.room.Release(n) // a key the gate did not give, or whose call is answered
		return limit, false
	}
	b.held[key] += n
	return limit, false
}

// cutNote says why an answer's output was cut to DefaultOutputLimit (see
// budget.take).
var cutNote = fmt.Sprintf("output cut to %d bytes, under the outputLimit asked for: the answers of other calls under way hold conch mcp's room for output (%d bytes); read on from the cursor", DefaultOutputLimit, answerRoom)

// answered gives back the room of the calls that rs answer: their answers
// were written, dropped or given up.
func (b *budget) answered(rs []*jsonrpc.Response) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range rs {
		key, ok := b.of[r.ID]
		if !ok {
			continue
		}
		delete(b.of, r.ID)
		if n := b.held[key]; n > 0 {
			b.room.Release(n)
		}
		delete(b.held, key)
	}
}
