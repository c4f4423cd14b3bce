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
	out := Result{ID: r.ProcessID, OmittedBytes: r.OmittedBytes, Truncated: r.Truncated, Next: r.Next}
	out.Output, out.OmittedAfter = render(r, int(limit))
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
// than that line leaves the line alone); and the cursor read_output reads
// what was left out from, which the line names.
func render(r *client.RunResult, limit int) (text, omittedAfter string) {
	if r.OmittedBytes == 0 {
		return plaintext.CutEnd(plainFrames(r.Logs), limit), ""
	}
	split := headFrames(r)
	head, tail := plainFrames(r.Logs[:split]), plainFrames(r.Logs[split:])
	line := func(cursor string) string {
		return fmt.Sprintf("\n[... %d bytes omitted; read_output with cursor %q reads them ...]\n", r.OmittedBytes, cursor)
	}
	after := omittedFrom(r)
	room := max(limit-len(line(after)), 0)
	// Rendering can make text longer than its bytes (a cursor move becomes
	// blanks): hold the two together to the room.
	tail = plaintext.CutStart(tail, room-min(len(head), room/2))
	if shown := plaintext.CutEnd(head, room-len(tail)); shown != head {
		// The head lost its end here: read from where the daemon's
		// omission starts, the head's last frame again, rather than past
		// what was not shown.
		head, after = shown, r.OmittedAfter
	}
	return strings.TrimSuffix(head, "\n") + line(after) + tail, after
}

// omittedReserve is the room kept in an answer's outputLimit for the line
// render puts between a head and a tail: the daemon is asked for that much
// less, so that render need not cut the head further.
const omittedReserve = 96

// daemonLimit is the outputLimit asked of the daemon for limit bytes of
// text: at least 1, since the daemon takes 0 for no limit (an outputLimit
// of 1 brought the whole output back, cut here with nothing said).
func daemonLimit(limit int64) int64 { return max(limit-omittedReserve, limit/2, 1) }

// omittedFrom is the cursor read_output reads what r omitted from: its
// omittedAfter, or, when the head ends with the start of the frame after
// it (a frame cut in two), that many bytes into that frame ("CURSOR+N"),
// so that the head is not read twice.
func omittedFrom(r *client.RunResult) string {
	split := headFrames(r)
	if split == 0 {
		return r.OmittedAfter
	}
	last := r.Logs[split-1]
	if last.Cursor == r.OmittedAfter {
		return r.OmittedAfter
	}
	data, err := last.Bytes()
	if err != nil {
		return r.OmittedAfter
	}
	return fmt.Sprintf("%s+%d", r.OmittedAfter, len(data))
}

// headFrames is how many frames of r's logs make the head of a cut output.
func headFrames(r *client.RunResult) int { return min(max(r.HeadFrames, 0), len(r.Logs)) }

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
