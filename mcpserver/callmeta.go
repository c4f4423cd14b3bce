package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// call is a tools/call request taken apart, for the gate to add keys of
// its own to its _meta (a run's ticket, see order; its answer's room, see
// budget) in one decoding and one encoding of the line. Its keys are read
// exactly, as the SDK reads them, not as encoding/json matches a struct's
// fields, whatever their case: a call with "NAME" beside "name" went to
// the run tool without a ticket, ahead of the runs sent before it.
type call struct {
	name               string
	msg, params, meta  map[string]json.RawMessage
	args               map[string]json.RawMessage // nil when it has none
	argsOK, metaOK, ok bool                       // arguments and _meta are objects, or absent
}

// parseCall takes apart req, whose line is raw, when it is a tools/call;
// ok is false otherwise, or when it names no tool.
func parseCall(req *jsonrpc.Request, raw []byte) call {
	var c call
	if req.Method != "tools/call" || json.Unmarshal(raw, &c.msg) != nil ||
		json.Unmarshal(c.msg["params"], &c.params) != nil || json.Unmarshal(c.params["name"], &c.name) != nil {
		return c
	}
	c.ok = true
	a, ok := c.params["arguments"]
	c.argsOK = !ok || json.Unmarshal(a, &c.args) == nil // the SDK refuses arguments that are no object
	c.meta = map[string]json.RawMessage{}
	m, ok := c.params["_meta"]
	c.metaOK = !ok || json.Unmarshal(m, &c.meta) == nil // the SDK refuses a _meta that is no object
	if c.meta == nil {
		c.meta = map[string]json.RawMessage{} // "_meta": null, which Unmarshal makes a nil map
	}
	return c
}

// encoded returns the call's line with its _meta as it is now.
func (c call) encoded() ([]byte, error) {
	c.params["_meta"], _ = json.Marshal(c.meta)
	c.msg["params"], _ = json.Marshal(c.params)
	return json.Marshal(c.msg)
}

// marked returns raw, the line of req, with the keys the gate gives a call
// in its _meta (order.ticket, budget.mark); raw as it is when it gives none.
func (g *gate) marked(req *jsonrpc.Request, raw []byte) []byte {
	if g.order == nil && g.budget == nil {
		return raw
	}
	c := parseCall(req, raw)
	ticketed, roomed := g.order.ticket(req, c), g.budget.mark(req, c)
	if !ticketed && !roomed {
		return raw
	}
	b, err := c.encoded()
	if err != nil {
		g.order.answered(req.ID)
		g.budget.answered([]*jsonrpc.Response{{ID: req.ID}})
		return raw
	}
	return b
}
