package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStdioErrorsClipHugeValues sends tool calls whose values are
// megabytes long, and arguments of the wrong shapes: every error, a tool's
// or a JSON-RPC one, is within 1,024 bytes and says what to send in the
// tool's words, not Go's. They quoted the values whole (a 2 MiB tool
// error, a JSON-RPC error quoting the 2 MiB params it could not read into
// *mcp.CallToolParamsRaw), and arguments that are no object were "cannot
// unmarshal ... into Go value of type map[string]interface {}".
func TestStdioErrorsClipHugeValues(t *testing.T) {
	t.Parallel()
	m := startRawMCP(t)
	m.initialize()
	huge := strings.Repeat("y", 2<<20)
	call := func(id int, params string) reply {
		t.Helper()
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params))
		r := m.next()
		require.Equal(t, fmt.Sprint(id), string(r.ID))
		return r
	}
	toolError := func(id int, args, want string) {
		t.Helper()
		r := call(id, `{"name":"run","arguments":`+args+`}`)
		require.Nil(t, r.Error, "%.300s", args)
		var res struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.True(t, res.IsError, "%.300s", r.Result)
		require.Len(t, res.Content, 1)
		text := res.Content[0].Text
		require.LessOrEqual(t, len(text), 1024, "%.300s: %.300s", args, text)
		require.Contains(t, text, want, "%.300s", args)
		require.NotContains(t, text, "Go value", "%.300s", args)
	}
	toolError(2, `{"command":"echo","language":"`+huge+`"}`, "is not known")
	toolError(3, `{"command":"echo","timeout":{"x":"`+huge+`"}}`, `argument timeout: want "number", got a JSON object`)
	toolError(4, `{"command":"echo","`+huge+`":1}`, "unknown arguments")
	toolError(5, `[]`, "want an object of the tool's arguments")
	toolError(6, `"x"`, "want an object of the tool's arguments")
	toolError(7, `{"command":5}`, `argument command: want "string", got a JSON integer`)

	for i, c := range []struct{ params, want string }{
		{`{"name":5,"arguments":{"x":"` + huge + `"}}`, "the name is a JSON number, want a string"},
		{`{"arguments":{}}`, "the name is missing"},
		{`[1]`, "got array"},
		{`{"name":"` + huge + `","arguments":{}}`, "unknown tool"},
	} {
		r := call(10+i, c.params)
		require.NotNil(t, r.Error, "%.300s: %.300s", c.params, r.Result)
		require.Equal(t, -32602, r.Error.Code, "%.300s", c.params)
		require.LessOrEqual(t, len(r.Error.Message), 1024, "%.300s: %.300s", c.params, r.Error.Message)
		require.Contains(t, r.Error.Message, c.want, "%.300s", c.params)
		require.NotContains(t, r.Error.Message, "CallToolParamsRaw")
	}
}
