package mcpserver

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/condwait"
)

// The SDK's stdio connection ends at the first line it cannot take (not
// JSON, a wrong jsonrpc version, an id that is an object, nesting past its
// decoder's depth) and answers nothing; and at the end of its input it
// cancels every request still being handled, so that requests piped in and
// followed at once by the end of input go unanswered. stdioTransport stands
// between the client and that connection: it reads the client's lines
// itself, answers each one that is no JSON-RPC message the SDK would take
// with the error it deserves, and passes the rest on through a pipe; at the
// end of its input it waits until every request it passed on is answered
// before it ends the pipe.

// Limits of a line of input.
const (
	// maxLine bounds a line, as the SDK's own transport does by default.
	maxLine = mcp.DefaultMaxLineLength
	// maxNesting is the depth of arrays and objects past which the SDK's
	// decoder refuses a message.
	maxNesting = 1000
	// requestRoom bounds the bytes of the requests passed on and not yet
	// answered, together: four lines of the largest size. The SDK handles
	// requests concurrently, and a call holds its request, decoded several
	// times over, until it is answered: a run that waits for its command
	// (up to a day) or for its turn in its session (see order) holds it as
	// long. A client that piped 50 runs of 10 MiB behind a command that
	// waited had conch mcp hold 2 GB, and more with each line. A request
	// that would pass the bound is answered at once with codeRequestRoom
	// rather than held: the reading of input never stops for it, so that a
	// cancel of a call that holds the room still comes through. A request
	// sent when none is pending is always taken.
	requestRoom = 64 << 20
)

// codeRequestRoom is the JSON-RPC error code (one of the server errors,
// -32000 to -32099, that JSON-RPC 2.0 leaves to implementations) of a
// request refused for requestRoom.
const codeRequestRoom = -32010

// batchesEnd is the first protocol version without JSON-RPC batches: the
// SDK's connection fails on a batch once such a version is negotiated.
const batchesEnd = "2025-06-18"

// stdioTransport serves MCP on in and out, one JSON-RPC message a line.
type stdioTransport struct {
	in     io.Reader
	out    io.Writer
	order  *order  // the runs' tickets; nil for none
	budget *budget // the room of the answers; nil for none
	gate   atomic.Pointer[gate]
}

// stop gives the answers of the calls under way d to go out, then gives up
// on out (see gate.send): the server is stopping.
func (t *stdioTransport) stop(d time.Duration) {
	if g := t.gate.Load(); g != nil {
		g.awaitAnswers(d)
		g.giveUp()
	}
}

// Connect starts the reader of in and returns the SDK's connection on the
// lines it passes on. The reader is not waited for: a read of stdin cannot
// be interrupted, and the connection's end does not wait for the next
// line; it returns at that line or at the end of in.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pr, pw := io.Pipe()
	g := &gate{out: t.out, order: t.order, budget: t.budget, pending: map[jsonrpc.ID]int64{}, cancelled: map[jsonrpc.ID]bool{},
		held: map[jsonrpc.ID]*heldErrors{}, gaveUp: make(chan struct{})}
	g.drained = sync.NewCond(&g.mu)
	// The gate bounds lines, so the SDK need not.
	conn, err := (&mcp.IOTransport{Reader: pr, Writer: g, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.gate.Store(g)
	go g.read(t.in, pw)
	return conn, nil
}

// gate is the go-between of the client and the SDK's connection. As the
// connection's writer it sees every answer, to know which requests are
// still to be answered.
type gate struct {
	out    io.Writer
	order  *order
	budget *budget
	// gaveUp is closed once the server stops and the answers under way
	// had their time: nothing more is written to out (see send).
	gaveUp    chan struct{}
	giveUpOne sync.Once

	mu      sync.Mutex // guards the fields below and serialises writes to out
	drained *sync.Cond // broadcast when pending empties or the gate closes
	// pending are the requests passed on and not yet answered, with the
	// bytes of each; pendingBytes is the sum of those (see requestRoom).
	pending      map[jsonrpc.ID]int64
	pendingBytes int64
	// cancelled are the pending requests the client cancelled: their
	// answers are not sent (MCP: a cancelled request is not answered).
	cancelled map[jsonrpc.ID]bool
	// cancels are the cancels read in the last line, which the reader
	// passes to order before it reads on (see order.cancel).
	cancels []jsonrpc.ID
	// held are the errors of a batch's invalid elements, by the ids of its
	// calls passed on (heldErrors).
	held   map[jsonrpc.ID]*heldErrors
	closed bool // the SDK closed its connection
	// initID is the id of the initialize request passed on, asked the
	// protocol version it asked for; version is the one its answer gave.
	initID  jsonrpc.ID
	inited  bool
	asked   string
	version string
}

// Write writes an answer of the SDK's and settles the requests it answers.
// The SDK writes each message or batch whole, in one call. The answer to a
// request the client cancelled is dropped.
func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	answers := responses(p)
	// Written, dropped or given up, the answers hold their room no longer.
	defer g.budget.answered(answers)
	out := g.uncancelled(p, answers)
	if out != nil {
		out = g.withErrorCodes(out)
	}
	if errs := g.heldFor(answers); len(errs) > 0 {
		out = withHeld(out, errs)
	}
	if out == nil {
		g.settle(answers)
		return len(p), nil
	}
	if err := g.send(out); err != nil {
		return 0, err
	}
	g.settle(answers)
	return len(p), nil
}

// uncancelled is p, a message or batch, without the answers to requests
// the client cancelled (MCP: a cancelled request is not answered); nil when
// none is left. g.mu is held.
func (g *gate) uncancelled(p []byte, answers []*jsonrpc.Response) []byte {
	n := 0
	for _, a := range answers {
		if g.cancelled[a.ID] {
			n++
		}
	}
	if n == 0 {
		return p
	}
	var raws []json.RawMessage
	if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &raws) != nil {
		return nil // a single answer, cancelled
	}
	kept := make([]json.RawMessage, 0, len(raws))
	for _, raw := range raws {
		if resp, ok := decodeMessage(raw).(*jsonrpc.Response); ok && g.cancelled[resp.ID] {
			continue
		}
		kept = append(kept, raw)
	}
	if len(kept) == 0 {
		return nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return p
	}
	return append(b, '\n')
}

// withErrorCodes is p, a message or batch, with each error answer's code 0
// replaced (withErrorCode): a batch's answers get the codes a single
// message's would. g.mu is held.
func (g *gate) withErrorCodes(p []byte) []byte {
	t := bytes.TrimSpace(p)
	if len(t) == 0 || t[0] != '[' {
		if resp, ok := decodeMessage(t).(*jsonrpc.Response); ok {
			return withErrorCode(resp, p, g.refusesInit(resp))
		}
		return p
	}
	var raws []json.RawMessage
	if json.Unmarshal(t, &raws) != nil {
		return p
	}
	changed := false
	for i, raw := range raws {
		resp, ok := decodeMessage(raw).(*jsonrpc.Response)
		if !ok {
			continue
		}
		if fixed := withErrorCode(resp, raw, g.refusesInit(resp)); !bytes.Equal(fixed, raw) {
			raws[i], changed = bytes.TrimSuffix(fixed, []byte("\n")), true
		}
	}
	if !changed {
		return p
	}
	b, err := json.Marshal(raws)
	if err != nil {
		return p
	}
	return append(b, '\n')
}

// withErrorCode is p, the answer resp, with a JSON-RPC error code in place
// of the code 0 of the SDK's errors, which is none: -32602 (invalid params)
// for the refusal of the first initialize (initParams), whose params the SDK
// could not read or did not get, and -32600 (invalid request) for a request
// at the wrong time (before initialize, a second initialize).
//
// Its message is clipped to maxErrorText bytes: the SDK's refusal of params
// it cannot read quotes them whole ("unmarshaling \"{...}\" into
// *mcp.CallToolParamsRaw"), and its unknown tool the name sent.
func withErrorCode(resp *jsonrpc.Response, p []byte, initParams bool) []byte {
	var we *jsonrpc.Error
	if !errors.As(resp.Error, &we) || we.Code != 0 && len(we.Message) <= maxErrorText {
		return p
	}
	code := we.Code
	if code == 0 {
		code = jsonrpc.CodeInvalidRequest
		if initParams {
			code = jsonrpc.CodeInvalidParams
		}
	}
	fixed := *resp
	fixed.Error = &jsonrpc.Error{Code: code, Message: clipError(we.Message), Data: we.Data}
	b, err := jsonrpc.EncodeMessage(&fixed)
	if err != nil {
		return p
	}
	return append(b, '\n')
}

// responses are the responses of the message or batch p, which it leaves
// as it is.
func responses(p []byte) []*jsonrpc.Response {
	p = bytes.TrimSpace(p)
	raws := []json.RawMessage{p}
	if len(p) > 0 && p[0] == '[' {
		// Into a new slice: a RawMessage decodes into the bytes it holds.
		raws = nil
		if json.Unmarshal(p, &raws) != nil {
			return nil
		}
	}
	var rs []*jsonrpc.Response
	for _, raw := range raws {
		if resp, ok := decodeMessage(raw).(*jsonrpc.Response); ok {
			rs = append(rs, resp)
		}
	}
	return rs
}

// noteCancel notes the request that req, a cancellation from the client,
// cancels, while it is pending. g.mu is held.
func (g *gate) noteCancel(req *jsonrpc.Request) {
	if req == nil || req.Method != "notifications/cancelled" {
		return
	}
	var params struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &params) != nil {
		return
	}
	if id, err := jsonrpc.MakeID(params.RequestID); err == nil && g.isPending(id) {
		g.cancelled[id] = true
		g.cancels = append(g.cancels, id)
	}
}

// awaitAnswers waits until every request passed on is answered, the gate
// closes or d has passed. A write that out holds past d is given up (send),
// which lets go of g.mu.
func (g *gate) awaitAnswers(d time.Duration) {
	deadline := time.Now().Add(d)
	t := time.AfterFunc(d, g.giveUp)
	defer t.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	condwait.Wait(g.drained, time.Until(deadline), func() bool { return len(g.pending) == 0 || g.closed })
}

// Close is called as the SDK closes its connection: nothing more will be
// answered.
func (g *gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.drained.Broadcast()
	return nil
}

// settle forgets the requests that answers answer, and notes the protocol
// version of the answer to initialize. g.mu is held.
func (g *gate) settle(answers []*jsonrpc.Response) {
	for _, resp := range answers {
		g.pendingBytes -= g.pending[resp.ID]
		delete(g.pending, resp.ID)
		delete(g.cancelled, resp.ID)
		g.order.answered(resp.ID)
		if g.inited && g.version == "" && resp.ID == g.initID {
			if resp.Error != nil {
				// A refused initialize set no version: the next one does.
				g.inited = false
				continue
			}
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(resp.Result, &r)
			g.version = r.ProtocolVersion
			if g.version == "" {
				g.version = "none"
			}
		}
	}
	if len(g.pending) == 0 {
		g.drained.Broadcast()
	}
}

// decodeMessage is the message raw holds, nil when it is none.
func decodeMessage(raw []byte) jsonrpc.Message {
	m, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return nil
	}
	return m
}

// read reads the client's lines from in and passes those the SDK takes on
// to pw, until in ends or the SDK closes its connection. At the end of in,
// it waits until every request passed on is answered before it closes pw,
// which ends the session.
func (g *gate) read(in io.Reader, pw *io.PipeWriter) {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, long, err := readLine(br)
		if long {
			g.refuse(nil, jsonrpc.CodeParseError, fmt.Sprintf("line over %d bytes", maxLine))
		} else if len(bytes.TrimSpace(line)) > 0 {
			lines := g.check(line)
			g.mu.Lock()
			cancels := g.cancels
			g.cancels = nil
			g.mu.Unlock()
			for _, id := range cancels {
				if g.order != nil {
					g.order.cancel(id) // before the next line: in the order sent
				}
			}
			for _, l := range lines {
				if _, werr := pw.Write(append(l, '\n')); werr != nil {
					return // the SDK closed its connection
				}
			}
		}
		if err != nil {
			g.mu.Lock()
			for len(g.pending) > 0 && !g.closed {
				g.drained.Wait()
			}
			g.mu.Unlock()
			if errors.Is(err, io.EOF) {
				err = nil
			}
			_ = pw.CloseWithError(err)
			return
		}
	}
}

// readLine reads one line without its end. A line over maxLine is read to
// its end and dropped: long reports it.
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > maxLine+2 { // +2: the line's end
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, long, err
	}
}

// check returns the lines of line to pass on to the SDK: line itself when
// it is a message or batch the SDK takes, else none, the client being
// answered with the error it deserves. A batch's notifications are passed
// on one a line, ahead of its other messages: the SDK takes a notification
// in a batch for a request whose id is null, waits for its answer, and
// ends the connection at the second such one. A request passed on is
// pending until it is answered.
func (g *gate) check(line []byte) [][]byte {
	if !utf8.Valid(line) {
		g.refuse(nil, jsonrpc.CodeParseError, "not JSON: not UTF-8")
		return nil
	}
	if err := checkNesting(line); err != nil {
		g.refuse(nil, jsonrpc.CodeParseError, err.Error())
		return nil
	}
	if err := json.Unmarshal(line, new(json.RawMessage)); err != nil {
		g.refuse(nil, jsonrpc.CodeParseError, "not JSON: "+err.Error())
		return nil
	}
	trimmed := bytes.TrimSpace(line)
	// Passed on without the white space around it: the SDK ends the
	// connection at any byte after a message but its line end (a space
	// there ended conch mcp, and every session with it).
	line = trimmed
	if trimmed[0] != '[' {
		req, ok := g.message(trimmed)
		if !ok {
			return nil
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if req != nil && req.IsCall() {
			if g.isPending(req.ID) {
				g.refuseLocked(idJSON(trimmed), jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("request id %v is already in use by a request not yet answered", req.ID.Raw()))
				return nil
			}
			if msg := g.roomRefusal(len(trimmed)); msg != "" {
				g.refuseLocked(idJSON(trimmed), codeRequestRoom, msg)
				return nil
			}
			g.pass(req, len(trimmed))
			line = g.marked(req, line)
		}
		g.noteCancel(req)
		return [][]byte{line}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(trimmed, &raws); err != nil || len(raws) == 0 {
		g.refuse(nil, jsonrpc.CodeInvalidRequest, "an empty batch")
		return nil
	}
	// JSON-RPC 2.0 §6: each element that is no valid request gets an
	// error in the batch's answer, and the others are handled.
	var errs []json.RawMessage
	failWith := func(code int, raw json.RawMessage, format string, args ...any) {
		errs = append(errs, errorJSON(idJSON(raw), code, fmt.Sprintf(format, args...)))
	}
	fail := func(raw json.RawMessage, format string, args ...any) {
		failWith(jsonrpc.CodeInvalidRequest, raw, format, args...)
	}
	type element struct {
		raw json.RawMessage
		req *jsonrpc.Request // a call's
	}
	var elems []element
	var notes []*jsonrpc.Request
	var lines [][]byte
	seen := map[jsonrpc.ID]bool{}
	for i, raw := range raws {
		m := decodeMessage(raw)
		if m == nil {
			fail(raw, "batch element %d is not a JSON-RPC 2.0 message", i)
			continue
		}
		req, ok := m.(*jsonrpc.Request)
		if ok {
			if err := checkID(raw); err != nil {
				fail(raw, "batch element %d: %v", i, err)
				continue
			}
			if err := checkParams(req); err != nil {
				failWith(jsonrpc.CodeInvalidParams, raw, "batch element %d: %v", i, err)
				continue
			}
		}
		switch {
		case ok && req.IsCall():
			if seen[req.ID] {
				fail(raw, "batch element %d repeats request id %v", i, req.ID.Raw())
				continue
			}
			seen[req.ID] = true
			elems = append(elems, element{raw, req})
		case ok:
			notes = append(notes, req)
			lines = append(lines, compact(raw))
		default:
			elems = append(elems, element{raw: raw})
		}
	}
	var init *jsonrpc.Request // the batch's first initialize
	for _, e := range elems {
		if e.req != nil && e.req.Method == "initialize" {
			init = e.req
			break
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if msg := g.batchRefusal(init); msg != "" {
		g.refuseLocked(nil, jsonrpc.CodeInvalidRequest, msg)
		return nil
	}
	var rest []json.RawMessage
	var calls []*jsonrpc.Request
	for _, e := range elems {
		if e.req != nil && g.isPending(e.req.ID) {
			fail(e.raw, "request id %v is already in use by a request not yet answered", e.req.ID.Raw())
			continue
		}
		if e.req != nil {
			if msg := g.roomRefusal(len(e.raw)); msg != "" {
				failWith(codeRequestRoom, e.raw, "%s", msg)
				continue
			}
			g.pass(e.req, len(e.raw))
			calls = append(calls, e.req)
			e.raw = g.marked(e.req, e.raw)
		}
		rest = append(rest, e.raw)
	}
	for _, req := range notes {
		g.noteCancel(req)
	}
	if len(errs) > 0 {
		if len(calls) == 0 {
			// No answer of the SDK's to join them to.
			b, _ := json.Marshal(errs)
			_ = g.send(append(b, '\n'))
		} else {
			held := &heldErrors{errs: errs}
			for _, req := range calls {
				g.held[req.ID] = held
			}
		}
	}
	if len(rest) > 0 {
		b, _ := json.Marshal(rest)
		lines = append(lines, b)
	}
	return lines
}

// heldErrors are the errors of a batch's invalid elements, held until the
// SDK answers the batch's calls, to go out in one answer with theirs.
type heldErrors struct {
	errs []json.RawMessage
	sent bool
}

// heldFor returns the errors held for the batch whose calls answers
// answer, once.
// g.mu is held.
func (g *gate) heldFor(answers []*jsonrpc.Response) []json.RawMessage {
	var errs []json.RawMessage
	for _, a := range answers {
		if h := g.held[a.ID]; h != nil && !h.sent {
			h.sent = true
			errs = append(errs, h.errs...)
		}
		delete(g.held, a.ID)
	}
	return errs
}

// withHeld is out, a batch's answer (nil when nothing of it is left to
// send), with errs joined to it.
func withHeld(out []byte, errs []json.RawMessage) []byte {
	var raws []json.RawMessage
	if t := bytes.TrimSpace(out); len(t) > 0 {
		if t[0] != '[' || json.Unmarshal(t, &raws) != nil {
			raws = []json.RawMessage{t}
		}
	}
	b, err := json.Marshal(append(raws, errs...))
	if err != nil {
		return out
	}
	return append(b, '\n')
}

// compact is raw on one line.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// checkID refuses the id of a request that the SDK would answer with
// another: it takes a number as a float64 and then an int64, so that 1.5
// was answered as 1 and 2^63 as -2^63, and a string with bytes or escapes
// that are no Unicode as one with U+FFFD. A request's id must not be null
// (MCP), which the SDK takes for a notification and leaves unanswered.
func checkID(raw []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m["id"] == nil {
		return nil
	}
	return badID(bytes.TrimSpace(m["id"]))
}

// badID says what is wrong with the request id id, nil when nothing is.
func badID(id []byte) error {
	switch {
	case string(id) == "null":
		return errors.New("a request's id must not be null")
	case id[0] == '"':
		if loneSurrogate(id) != "" {
			return errors.New("the request id is a string that is not valid Unicode")
		}
	case id[0] == '-' || '0' <= id[0] && id[0] <= '9':
		n, err := strconv.ParseInt(string(id), 10, 64)
		if err != nil || n > maxIntID || n < -maxIntID {
			return fmt.Errorf("the request id %s is not an integer of at most 2^53", id)
		}
	}
	return nil
}

// checkParams refuses the params of a request the SDK takes without
// looking: logging/setLevel (the server advertises logging) with a level
// that is none of the protocol's, or none, which it answered {}, where MCP
// wants invalid params.
func checkParams(req *jsonrpc.Request) error {
	if req.Method == "tools/call" && req.IsCall() {
		// The SDK's words for params it cannot read quoted them whole and
		// named Go's types (*mcp.CallToolParamsRaw).
		var params map[string]json.RawMessage
		if kind := jsonKind(req.Params); kind != "object" {
			return fmt.Errorf("tools/call wants params {\"name\": TOOL, \"arguments\": {...}}, got %s", cmp.Or(kind, "none"))
		}
		if json.Unmarshal(req.Params, &params) == nil {
			switch kind := jsonKind(params["name"]); kind {
			case "string":
			case "":
				return errors.New("tools/call wants params {\"name\": TOOL, \"arguments\": {...}}: the name is missing")
			default:
				return fmt.Errorf("tools/call wants params {\"name\": TOOL, \"arguments\": {...}}: the name is a JSON %s, want a string", kind)
			}
		}
		return nil
	}
	if req.Method != "logging/setLevel" || !req.IsCall() {
		return nil
	}
	var params struct {
		Level *string `json:"level"`
	}
	if json.Unmarshal(req.Params, &params) != nil || params.Level == nil {
		return errors.New("logging/setLevel wants params {\"level\": LEVEL}")
	}
	if !slices.Contains(logLevels, *params.Level) {
		return fmt.Errorf("logging level %s is none of %s", api.Quote(*params.Level), strings.Join(logLevels, ", "))
	}
	return nil
}

// logLevels are MCP's logging levels (RFC 5424's severities).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// loneSurrogate is the first escape in s, JSON as it was sent, of a UTF-16
// surrogate that is not half of a pair ("\ud800"), "" when there is none:
// in valid UTF-8, the one thing that decodes to a U+FFFD that was not sent,
// so that a U+FFFD sent as it is or as "\ufffd" is told apart. Escapes
// are in strings only, so s may be any JSON value.
func loneSurrogate(s []byte) string {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++ // the escaped byte; the loop steps over it
		if i >= len(s) || s[i] != 'u' {
			continue
		}
		r := hexRune(s[i+1:])
		at := i - 1 // the escape's backslash: copied only when it is returned
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 {
			return string(s[at : i+1]) // a second half first
		}
		if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' ||
			utf16.DecodeRune(r, hexRune(s[i+3:])) == utf8.RuneError {
			return string(s[at : i+1])
		}
		i += 6
	}
	return ""
}

// hexRune is the rune of the four hex digits b starts with (valid JSON
// has them after \u), -1 when it does not.
func hexRune(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

// maxIntID is the largest integer id the SDK keeps as it is: it reads ids
// as float64.
const maxIntID = 1 << 53

// refusesInit reports whether resp refuses the initialize request that
// would open the session: the SDK refuses one only for its params. g.mu is
// held.
func (g *gate) refusesInit(resp *jsonrpc.Response) bool {
	return resp.Error != nil && g.inited && g.version == "" && resp.ID == g.initID
}

// isPending reports whether the request id is pending. g.mu is held.
func (g *gate) isPending(id jsonrpc.ID) bool {
	_, ok := g.pending[id]
	return ok
}

// roomRefusal is why a request of n bytes is refused now, "" when it is
// taken (see requestRoom). g.mu is held.
func (g *gate) roomRefusal(n int) string {
	if len(g.pending) == 0 || g.pendingBytes+int64(n) <= requestRoom {
		return ""
	}
	return fmt.Sprintf("request not handled: the requests conch mcp has read and not yet answered hold %d bytes, "+
		"and this one (%d bytes) would pass its bound of %d (%d MiB) for them together; "+
		"send it again once earlier requests are answered (or cancel one), or send it smaller",
		g.pendingBytes, n, requestRoom, requestRoom>>20)
}

// pass marks req, of n bytes, pending, and notes an initialize request.
// g.mu is held.
func (g *gate) pass(req *jsonrpc.Request, n int) {
	g.pending[req.ID] = int64(n)
	g.pendingBytes += int64(n)
	if req.Method == "initialize" && !g.inited {
		g.inited, g.initID, g.asked = true, req.ID, askedVersion(req)
	}
}

// askedVersion is the protocol version the initialize request req asks for.
func askedVersion(req *jsonrpc.Request) string {
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &params)
	return params.ProtocolVersion
}

// batchRefusal is why a batch is refused now, "" when it is taken: once an
// initialize is passed on, the protocol version agreed must have batches.
// Until its answer gives that version, the one it asked for decides: MCP's
// server agrees on the version asked for when it supports it (the server
// takes every version of mcp.SupportedProtocolVersions), and on another
// when it does not (the SDK on its newest before 2026-07-28, which has
// none). So a batch never waits for that answer, which an initialize
// sent in a batch gives only with the answers of the batch's other calls
// (a run that waits a day): the reader held the lines behind the batch
// meanwhile, the client's cancel of that run among them. Before an
// initialize is passed on, the one the batch holds, init, decides so; a
// batch without one is taken (the SDK answers its calls before initialize
// as they deserve). g.mu is held.
func (g *gate) batchRefusal(init *jsonrpc.Request) string {
	asked := g.asked
	if !g.inited {
		if init == nil {
			return ""
		}
		asked = askedVersion(init)
	}
	version, which := g.version, "agreed"
	if version == "" {
		if !slices.Contains(mcp.SupportedProtocolVersions(), asked) {
			return fmt.Sprintf("initialize asked for MCP %s, which this server does not support, and the version it agrees on instead has no JSON-RPC batches (none from %s on has): send one message a line", api.Quote(asked), batchesEnd)
		}
		version, which = asked, "initialize asked for"
	}
	if version >= batchesEnd {
		return fmt.Sprintf("JSON-RPC batches are not part of MCP %s, the protocol version %s (nor of any from %s on): send one message a line", version, which, batchesEnd)
	}
	return ""
}

// message checks one message that is valid JSON, answering the client when
// the SDK would not take it. It returns the message when it is a request.
func (g *gate) message(raw []byte) (*jsonrpc.Request, bool) {
	if raw[0] != '{' {
		g.refuse(nil, jsonrpc.CodeInvalidRequest, "not a JSON-RPC message: want an object")
		return nil, false
	}
	m, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		g.refuse(idJSON(raw), jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message: "+err.Error())
		return nil, false
	}
	if resp, ok := m.(*jsonrpc.Response); ok && resp.Result == nil && resp.Error == nil {
		// An id alone: neither a request (no method) nor a response (no
		// result, no error), which the SDK would drop without a word.
		g.refuse(idJSON(raw), jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message: no method, result or error")
		return nil, false
	}
	req, _ := m.(*jsonrpc.Request)
	if req != nil {
		if err := checkID(raw); err != nil {
			g.refuse(idJSON(raw), jsonrpc.CodeInvalidRequest, err.Error())
			return nil, false
		}
		if err := checkParams(req); err != nil {
			g.refuse(idJSON(raw), jsonrpc.CodeInvalidParams, err.Error())
			return nil, false
		}
	}
	return req, true
}

// idJSON is the id of the message raw as JSON when it is a valid one (a
// string of Unicode or an integer of at most 2^53), nil when it has none or
// another, which is answered null: echoed, 1.5 or 2^53+1 was the id of an
// answer to a request the answer itself called invalid, and a lone
// surrogate went out as it came.
func idJSON(raw []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	switch c := m.ID[0]; {
	case c == '"', c == '-', '0' <= c && c <= '9':
		if badID(m.ID) == nil {
			return m.ID
		}
	}
	return nil
}

// refuse answers the client with a JSON-RPC error; a nil id is null.
func (g *gate) refuse(id json.RawMessage, code int, msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuseLocked(id, code, msg)
}

func (g *gate) refuseLocked(id json.RawMessage, code int, msg string) {
	_ = g.send(append(errorJSON(id, code, clipError(msg)), '\n'))
}

// errGaveUp fails a write once the gate gave up on out.
var errGaveUp = errors.New("conch mcp is stopping: its client did not read the answer in time")

// send writes p, a whole message or batch, to out; g.mu is held. It returns
// early, with errGaveUp, once the gate gives up on out: a client that stops
// reading its stdout holds a write for ever, and with it g.mu, which the
// stop needs, and the SDK's end, which waits for every answer's write.
// The write itself cannot be interrupted: the goroutine doing it ends with
// it, or with the process, and writes to out once given up are none, so
// that no two write at once.
func (g *gate) send(p []byte) error {
	select {
	case <-g.gaveUp:
		return errGaveUp
	default:
	}
	p = bytes.Clone(p) // the caller's may be reused while the write goes on
	done := make(chan error, 1)
	go func() {
		_, err := g.out.Write(p)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-g.gaveUp:
		return errGaveUp
	}
}

// giveUp makes the writes to out under way and to come return errGaveUp.
func (g *gate) giveUp() { g.giveUpOne.Do(func() { close(g.gaveUp) }) }

// errorJSON is a JSON-RPC error answer; a nil id is null.
func errorJSON(id json.RawMessage, code int, msg string) json.RawMessage {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: int64(code), Message: msg}})
	return b
}

// checkNesting refuses JSON whose arrays and objects nest deeper than
// maxNesting, in one pass that keeps no stack.
func checkNesting(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > maxNesting {
				return fmt.Errorf("arrays and objects nested deeper than %d levels", maxNesting)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}
