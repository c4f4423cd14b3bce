package mcpserver

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK handles calls concurrently: `run` calls sent to one session
// before the earlier ones were answered reached the session's queue in
// any order (`cd /tmp && echo A`, then `echo B $PWD`, ran B first). The
// stdio gate, which reads the calls in the order they were sent, gives
// each run a ticket in its session's line, carried to the handler in the
// call's _meta; the handler submits its command once every run ahead of it
// in that line was submitted or answered.
//
// close_session takes its turn in that line too: sent right after the run
// that makes its session, it once looked before that run had made it,
// answered "no session" and left the session the run then made running.
// A run sent after a close_session waits for the close, and makes the
// session anew.

// inTurn is the tools whose calls take their turn in their session's line.
var inTurn = map[string]bool{runTool.Name: true, closeTool.Name: true}

// ticketKey is the _meta key of a call's ticket; the gate sets it, over
// whatever the client sent.
const ticketKey = "conch.sh/ticket"

// order is the calls of each session (runs not yet submitted, closes not
// yet done), by ticket, in the order they arrived.
type order struct {
	mu      sync.Mutex
	last    int64
	lines   map[string][]int64 // session name → tickets, first come first
	of      map[jsonrpc.ID]ticket
	changed chan struct{} // closed and replaced at each departure
	// runs are the submissions of the runs with a ticket, by ticket, and
	// the runs the client cancelled before theirs began.
	runs map[int64]*submission
	// interrupt sends INT to a command; the server's.
	interrupt func(id string)
}

// A submission is a run's submission of its command (see order.cancel).
type submission struct {
	done      chan struct{} // closed once the daemon answered it
	cmd       string        // the command's id, once queued
	cancelled bool          // the client cancelled the call: the gate interrupts (see order.cancel)
}

// ticket is a call's place in its session's line.
type ticket struct {
	session string
	n       int64
}

func newOrder() *order {
	return &order{lines: map[string][]int64{}, of: map[jsonrpc.ID]ticket{}, changed: make(chan struct{}),
		runs: map[int64]*submission{}}
}

// The client's cancels of runs take effect in the order it sent them.
// Each run's handler learns of its cancel on its own goroutine, so a
// command queued behind another, whose call was cancelled before the
// running one's, once ran: the running one's interrupt reached the daemon
// first and its session started the next command before that command's
// interrupt came. The gate, which reads the cancels in order, interrupts
// each run's command itself before it reads on (see gate.read), once the
// command is queued; a run cancelled before its submission began submits
// nothing.

// submitting notes that the run with ticket t submits its command now, or
// reports false when the client cancelled the call first.
func (o *order) submitting(t int64) (*submission, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.runs[t]; s != nil && s.cancelled {
		return nil, false
	}
	s := &submission{done: make(chan struct{})}
	o.runs[t] = s
	return s, true
}

// submitted notes how the submission s ended: cmd is the id of the command
// queued, "" when none was.
func (o *order) submitted(s *submission, cmd string) {
	o.mu.Lock()
	s.cmd = cmd
	o.mu.Unlock()
	close(s.done)
}

// cancel notes the client's cancel of call id and interrupts the command
// the call submitted, after its submission when one is under way; a call
// whose submission has not begun will submit nothing.
func (o *order) cancel(id jsonrpc.ID) {
	o.mu.Lock()
	t, ok := o.of[id]
	var s *submission
	if ok {
		if s = o.runs[t.n]; s == nil {
			o.runs[t.n] = &submission{cancelled: true}
		} else {
			s.cancelled = true
		}
	}
	o.mu.Unlock()
	if s == nil || o.interrupt == nil {
		return
	}
	<-s.done // a submission takes submitTimeout at most
	o.mu.Lock()
	cmd := s.cmd
	o.mu.Unlock()
	if cmd != "" {
		o.interrupt(cmd)
	}
}

// cancelledByClient reports whether the client cancelled the call with
// ticket t: a run's command the gate then interrupted (see cancel), and
// its handler sends no interrupt of its own, which would be a second
// Ctrl-C; a close does nothing.
func (o *order) cancelledByClient(t int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.runs[t]
	return s != nil && s.cancelled
}

// arrive gives the call id, to session, the next ticket.
func (o *order) arrive(id jsonrpc.ID, session string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last++
	o.lines[session] = append(o.lines[session], o.last)
	o.of[id] = ticket{session, o.last}
	return o.last
}

// wait returns once every ticket ahead of t in its session's line has
// left, or when ctx ends.
func (o *order) wait(ctx context.Context, session string, t int64) error {
	for {
		o.mu.Lock()
		line, changed := o.lines[session], o.changed
		o.mu.Unlock()
		if len(line) == 0 || line[0] >= t {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leave takes ticket t out of its session's line: its command was
// submitted, or will not be; its close is done.
func (o *order) leave(session string, t int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	line := o.lines[session]
	for i, n := range line {
		if n == t {
			line = append(line[:i], line[i+1:]...)
			break
		}
	}
	if len(line) == 0 {
		delete(o.lines, session)
	} else {
		o.lines[session] = line
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// answered takes the ticket of call id, answered, out of its line: a call
// the SDK refused never reached the handler that would have.
func (o *order) answered(id jsonrpc.ID) {
	if o == nil {
		return
	}
	o.mu.Lock()
	t, ok := o.of[id]
	delete(o.of, id)
	if ok {
		delete(o.runs, t.n)
	}
	o.mu.Unlock()
	if ok {
		o.leave(t.session, t.n)
	}
}

// ticket gives c, the call req, a ticket in its session's line when it is
// a call of a tool that takes turns in its session (inTurn), and reports
// whether it did.
func (o *order) ticket(req *jsonrpc.Request, c call) bool {
	if o == nil || !c.ok || !inTurn[c.name] || !c.argsOK || !c.metaOK {
		return false
	}
	var session string
	if s, ok := c.args["session"]; ok && json.Unmarshal(s, &session) != nil {
		return false // the SDK refuses a session that is no string
	}
	if session == "" {
		session = DefaultSession
	}
	c.meta[ticketKey], _ = json.Marshal(o.arrive(req.ID, session))
	return true
}

// ticketOf is the ticket the gate gave a call, if any.
func ticketOf(req *mcp.CallToolRequest) (int64, bool) {
	if req == nil || req.Params == nil {
		return 0, false
	}
	t, ok := req.Params.GetMeta()[ticketKey].(float64)
	return int64(t), ok
}
