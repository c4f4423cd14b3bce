package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
)

// Result is what run and interact answer, as structured content; the text
// content says the same in words.
type Result struct {
	Session string `json:"session,omitempty" jsonschema:"name of the session the command ran in"`
	ID      string `json:"id" jsonschema:"the command's id, for interact and read_output"`
	Running bool   `json:"running" jsonschema:"the command is still running: the answer came first"`
	// WaitingForInput is set when the command is blocked reading its input.
	WaitingForInput bool   `json:"waitingForInput,omitempty" jsonschema:"the running command waits for input: answer it with interact"`
	ExitCode        *int   `json:"exitCode,omitempty" jsonschema:"exit code of the ended command"`
	Signal          string `json:"signal,omitempty" jsonschema:"signal that ended the command"`
	Reason          string `json:"reason,omitempty" jsonschema:"how the command ended: exited, signaled, timeout, failed_to_start, ..."`
	Error           string `json:"error,omitempty" jsonschema:"why the command could not run"`
	Cwd             string `json:"cwd,omitempty" jsonschema:"the session's working directory after the command"`
	OOMKilled       bool   `json:"oomKilled,omitempty" jsonschema:"the OOM killer ended the command at its session's memory limit"`
	CPUMs           int64  `json:"cpuMs,omitempty" jsonschema:"CPU time the ended command used, in milliseconds"`
	MemoryPeakBytes int64  `json:"memoryPeakBytes,omitempty" jsonschema:"the most memory the session held while the command ran"`
	Output          string `json:"output" jsonschema:"stdout and stderr interleaved, as plain text; a cut output holds a line saying what was omitted between its head and tail"`
	OmittedBytes    int64  `json:"omittedBytes,omitempty" jsonschema:"output bytes left out between head and tail"`
	OmittedAfter    string `json:"omittedAfter,omitempty" jsonschema:"cursor to read the omitted output from with read_output"`
	Truncated       bool   `json:"truncated,omitempty" jsonschema:"the oldest output was dropped by retention before it was read"`
	Next            string `json:"next,omitempty" jsonschema:"cursor after the last output in this answer, for interact or read_output"`
	Note            string `json:"note,omitempty"`
}

// result turns a run or interact answer into a Result, its output within
// limit bytes; p is the still running process, nil when it ended. The cwd is the session's, read once
// the command ended.
func (s *Server) result(ctx context.Context, r *client.RunResult, p *client.Process, sessionID string, limit int64) Result {
	out := Result{ID: r.ProcessID, Output: render(r, int(limit)), OmittedBytes: r.OmittedBytes,
		OmittedAfter: r.OmittedAfter, Truncated: r.Truncated, Next: r.Next}
	if p != nil {
		out.ID = p.ID
		out.Running = true
		out.WaitingForInput = r.WaitingForInput || p.WaitingForInput
		return out
	}
	out.ExitCode, out.Signal, out.Reason, out.Error = r.ExitCode, r.Signal, string(r.Reason), r.Error
	out.OOMKilled = r.OOMKilled
	if r.Usage != nil {
		out.CPUMs, out.MemoryPeakBytes = r.Usage.CPUMs, r.Usage.MemoryPeakBytes
	}
	if sessionID != "" {
		if sess, err := s.c.Session(ctx, sessionID); err == nil {
			out.Cwd = sess.Cwd
		}
	}
	return out
}

// render is the answer's output as plain text within limit bytes: the
// head and the tail each rendered on its own, with a line between them
// saying what was left out, which counts in the limit (a limit shorter
// than that line leaves the line alone).
func render(r *client.RunResult, limit int) string {
	if r.OmittedBytes == 0 {
		return plaintext.CutEnd(plainFrames(r.Logs), limit)
	}
	split := min(max(r.HeadFrames, 0), len(r.Logs))
	head, tail := plainFrames(r.Logs[:split]), plainFrames(r.Logs[split:])
	omitted := fmt.Sprintf("\n[... %d bytes omitted; read_output with cursor %q reads them ...]\n", r.OmittedBytes, r.OmittedAfter)
	room := max(limit-len(omitted), 0)
	// Rendering can make text longer than its bytes (a cursor move becomes
	// blanks): hold the two together to the room.
	tail = plaintext.CutStart(tail, room-min(len(head), room/2))
	head = plaintext.CutEnd(head, room-len(tail))
	return strings.TrimSuffix(head, "\n") + omitted + tail
}

// plainFrames is the frames' bytes as plain text.
func plainFrames(frames []client.LogFrame) string {
	var b []byte
	for _, f := range frames {
		data, err := f.Bytes()
		if err != nil {
			continue
		}
		b = append(b, data...)
	}
	return plaintext.String(b)
}

// text is the Result in words, for a model to read.
func (r Result) text() string {
	var b strings.Builder
	switch {
	case r.Running && r.WaitingForInput:
		fmt.Fprintf(&b, "still running as %s; waiting for input (answer with interact)\n", r.ID)
	case r.Running:
		fmt.Fprintf(&b, "still running as %s (interact to wait more, send input or interrupt)\n", r.ID)
	case r.Error != "":
		fmt.Fprintf(&b, "failed (%s): %s\n", r.Reason, plaintext.Escape(r.Error))
	case r.Signal != "":
		fmt.Fprintf(&b, "ended by signal %s (%s)\n", r.Signal, r.Reason)
	case r.ExitCode != nil:
		fmt.Fprintf(&b, "exit code %d\n", *r.ExitCode)
	default:
		fmt.Fprintf(&b, "ended (%s)\n", r.Reason)
	}
	if r.OOMKilled {
		b.WriteString("killed by the OOM killer: the session is over its memory limit\n")
	}
	if r.Session != "" {
		fmt.Fprintf(&b, "session: %s\n", plaintext.Escape(r.Session))
	}
	if r.Cwd != "" {
		fmt.Fprintf(&b, "cwd: %s\n", plaintext.Escape(r.Cwd))
	}
	if r.Truncated {
		b.WriteString("(the oldest output was dropped before it was read)\n")
	}
	if r.Running && r.Next != "" {
		fmt.Fprintf(&b, "next cursor: %s\n", r.Next)
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", plaintext.Escape(r.Note))
	}
	if r.Output == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString("output:\n")
		b.WriteString(r.Output)
		if !strings.HasSuffix(r.Output, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// textResult is the tool result holding r's text; the SDK adds r as
// structured content.
func textResult(r Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.text()}}}
}
