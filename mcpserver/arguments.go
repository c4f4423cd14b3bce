package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// ambiguity says what makes the arguments raw ambiguous, or out of every
// argument's range, "" when nothing does.
func ambiguity(raw json.RawMessage) string {
	var dup *duplicate
	var h *huge
	switch err := walkArguments(raw); {
	case errors.As(err, &dup):
		return fmt.Sprintf("arguments: key %s is given twice: give each argument once", strconv.Quote(dup.path))
	case errors.As(err, &h):
		// The SDK's own words for it named Go's struct field and type.
		return fmt.Sprintf("arguments: %s is %s, more than any argument takes: give one of at most %d",
			strconv.Quote(h.path), h.number, int64(math.MaxInt64))
	}
	if escape := loneSurrogate(raw); escape != "" {
		return fmt.Sprintf("arguments: a string escapes a lone UTF-16 surrogate (%s), which is no character: "+
			"send the text as UTF-8, or escape a character past U+FFFF as a surrogate pair", escape)
	}
	return ""
}

// walkArguments walks raw (see walkKeys) and returns the first key given
// twice ("session", "limits.pids", "env[2].name"), or number past every
// argument's range, it finds, as a *duplicate or a *huge. JSON it cannot
// read is left to the SDK, which says what is wrong with it.
func walkArguments(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return walkKeys(d, "")
}

// duplicate stops walkKeys at a key given twice.
type duplicate struct{ path string }

func (d *duplicate) Error() string { return "duplicate key " + d.path }

// huge stops walkKeys at a number past every argument's range: past
// int64, which the integer arguments are, and far past any the others
// (seconds) take.
type huge struct{ path, number string }

func (h *huge) Error() string { return "number " + h.number + " at " + h.path }

// pastRange reports whether n is past int64's range: exactly for an
// integer, as a float64 (2^63 or more) for any other.
func pastRange(n json.Number) bool {
	if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return false
	}
	f, err := n.Float64()
	return err != nil || math.Abs(f) >= math.MaxInt64
}

// walkKeys reads one value from d, checking the keys of every object in it
// and every number, at path (the value's place, "" for the arguments themselves). The depth
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
		if n, ok := tok.(json.Number); ok && pastRange(n) {
			return &huge{path: path, number: string(n)}
		}
		return nil
	}
	_, err = d.Token() // the closing delimiter
	return err
}
