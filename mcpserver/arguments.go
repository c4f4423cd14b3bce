package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refuseAmbiguousArguments answers a tool call whose arguments JSON leaves
// open, with a tool error that says what to fix, before any tool runs:
//
//   - a key given twice, at any depth, as the daemon's API refuses such a
//     body: the SDK would take the last, while a client or gateway that
//     checked the call may have read the first;
//   - a string that escapes a lone UTF-16 surrogate ("\udc80"), which is no
//     character: the SDK would take U+FFFD in its place, so that a command
//     would run that is not the one sent.
func refuseAmbiguousArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			if msg := ambiguity(call.Params.Arguments); msg != "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
			}
		}
		return next(ctx, method, req)
	}
}

// ambiguity says what makes the arguments raw ambiguous, "" when nothing does.
func ambiguity(raw json.RawMessage) string {
	if key := duplicateKey(raw); key != "" {
		return fmt.Sprintf("arguments: key %s is given twice: give each argument once", key)
	}
	if escape := loneSurrogate(raw); escape != "" {
		return fmt.Sprintf("arguments: a string escapes a lone UTF-16 surrogate (%s), which is no character: "+
			"send the text as UTF-8, or escape a character past U+FFFF as a surrogate pair", escape)
	}
	return ""
}

// duplicateKey returns the path of the first key that raw's objects give
// twice ("session", "limits.pids", "env[2].name"), quoted, or "" when there
// is none. JSON it cannot read is left to the SDK, which says what is wrong
// with it.
func duplicateKey(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var dup *duplicate
	if err := walkKeys(d, ""); errors.As(err, &dup) {
		return strconv.Quote(dup.path)
	}
	return ""
}

// duplicate stops walkKeys at a key given twice.
type duplicate struct{ path string }

func (d *duplicate) Error() string { return "duplicate key " + d.path }

// walkKeys reads one value from d, checking the keys of every object in it,
// at path (the value's place, "" for the arguments themselves). The depth
// it recurses to is bounded by the lines the stdio transport passes on.
func walkKeys(d *json.Decoder, path string) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] {
				return &duplicate{path: at}
			}
			seen[key] = true
			if err := walkKeys(d, at); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; d.More(); i++ {
			if err := walkKeys(d, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = d.Token() // the closing delimiter
	return err
}
