package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/plaintext"
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
//
// It also bounds the text of every tool error (see toolErrorText).
func refuseAmbiguousArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		if msg := ambiguity(call.Params.Arguments); msg != "" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: clipError(msg)}}}, nil
		}
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			for _, c := range r.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					t.Text = toolErrorText(t.Text)
				}
			}
		}
		return res, err
	}
}

// maxErrorText bounds the bytes of an error's text, a tool's or a JSON-RPC
// one: a value sent may be megabytes long, and an error that repeats it
// whole is an answer as long.
const maxErrorText = 1024

// clipError is s cut to maxErrorText bytes, at a character boundary, with
// a word that it was cut, when it is longer.
func clipError(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	more := fmt.Sprintf("... (%d bytes in all)", len(s))
	return plaintext.CutEnd(s, maxErrorText-len(more)) + more
}

// The SDK's words for arguments its schema refuses, which quote the
// value whole ("type: map[x:yyy...] has type ...") and name the schema's
// paths: validating "arguments": validating root: validating
// /properties/timeout: type: VALUE has type "object", want "number".
var (
	validationPrefix = regexp.MustCompile(`^validating "arguments": (validating root: )?`)
	propertyPath     = regexp.MustCompile(`validating /properties/([^:/]*): `)
	mistyped         = regexp.MustCompile(`(?s)type: .* has type "([a-z]+)", want (.*)$`)
)

// toolErrorText is the text of a tool error worded for a user and within
// maxErrorText bytes: the SDK's refusal of arguments its schema does not
// take says which argument and what it wants, without the value sent.
func toolErrorText(s string) string {
	if loc := validationPrefix.FindStringIndex(s); loc != nil {
		s = "arguments: " + propertyPath.ReplaceAllString(s[loc[1]:], "argument $1: ")
		s = mistyped.ReplaceAllString(s, "want $2, got a JSON $1")
		s = strings.Replace(s, "unexpected additional properties", "unknown arguments", 1)
	}
	return clipError(s)
}

// ambiguity says what makes the arguments raw ambiguous, or out of every
// argument's range, "" when nothing does.
func ambiguity(raw json.RawMessage) string {
	if kind := jsonKind(raw); kind != "" && kind != "object" && kind != "null" {
		// The SDK's own words named Go's map[string]interface {}.
		return "arguments: want an object of the tool's arguments ({\"command\": ...} for run), got a JSON " + kind
	}
	var dup *duplicate
	var h *huge
	switch err := walkArguments(raw); {
	case errors.As(err, &dup):
		return fmt.Sprintf("arguments: key %s is given twice: give each argument once", api.Quote(dup.path))
	case errors.As(err, &h):
		// The SDK's own words for it named Go's struct field and type.
		return fmt.Sprintf("arguments: %s is %s, more than any argument takes: give one of at most %d",
			api.Quote(h.path), api.Clip([]byte(h.number)), int64(math.MaxInt64))
	}
	if escape := loneSurrogate(raw); escape != "" {
		return fmt.Sprintf("arguments: a string escapes a lone UTF-16 surrogate (%s), which is no character: "+
			"send the text as UTF-8, or escape a character past U+FFFF as a surrogate pair", escape)
	}
	return ""
}

// jsonKind is the kind of the JSON value raw (object, array, string,
// number, boolean, null), "" when raw is empty or starts with none.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return ""
	}
	switch c := t[0]; {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == '-' || '0' <= c && c <= '9':
		return "number"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
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
