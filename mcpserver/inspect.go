package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/client"
)

// ReadOutput is the read_output tool's answer.
type ReadOutput struct {
	ID      string `json:"id"`
	Output  string `json:"output" jsonschema:"the output read, as plain text"`
	Bytes   int64  `json:"bytes" jsonschema:"output bytes read"`
	Next    string `json:"next,omitempty" jsonschema:"cursor to read on from"`
	More    bool   `json:"more" jsonschema:"there is more output after next right now"`
	Running bool   `json:"running" jsonschema:"the command is still running and may print more"`
}

func (s *Server) readOutput(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	if in.ID == "" {
		return nil, ReadOutput{}, errors.New("id is empty: give the command's id")
	}
	if in.Limit < 0 {
		return nil, ReadOutput{}, errors.New("limit is bytes and cannot be negative")
	}
	limit := int64(DefaultOutputLimit)
	if in.Limit > 0 {
		limit = in.Limit
	}
	out := ReadOutput{ID: in.ID, Next: in.Cursor}
	var frames []client.LogFrame
	for out.Bytes < limit {
		page, err := s.c.Logs(ctx, in.ID, client.LogsOptions{Cursor: out.Next, Limit: readPageFrames})
		if err != nil {
			return nil, ReadOutput{}, explain(err)
		}
		if len(page.Items) == 0 {
			break
		}
		for _, f := range page.Items {
			if out.Bytes >= limit {
				out.More = true
				break
			}
			data, _ := f.Bytes()
			out.Bytes += int64(len(data))
			frames = append(frames, f)
			out.Next = f.Cursor
		}
	}
	if !out.More && out.Bytes >= limit {
		// The limit was met exactly: look whether anything follows.
		if page, err := s.c.Logs(ctx, in.ID, client.LogsOptions{Cursor: out.Next, Limit: 1}); err == nil {
			out.More = len(page.Items) > 0
		}
	}
	out.Output = plainFrames(frames)
	if p, err := s.c.Get(ctx, in.ID); err == nil {
		out.Running = !p.Ended()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d bytes of output of %s", out.Bytes, in.ID)
	if out.Running {
		b.WriteString(" (still running)")
	}
	fmt.Fprintf(&b, "; next cursor: %s", out.Next)
	if out.More {
		b.WriteString("; more to read: call read_output again with that cursor")
	}
	b.WriteString("\n")
	b.WriteString(out.Output)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

// SessionInfo is a session in the list tool's answer.
type SessionInfo struct {
	Name  string `json:"name" jsonschema:"the session's name, for run and close_session"`
	ID    string `json:"id"`
	Shell string `json:"shell,omitempty" jsonschema:"a shell session's shell"`
	// Language is set for a code context, which has no shell.
	Language string `json:"language,omitempty" jsonschema:"a code context's language (python, javascript): its runs are code, not shell commands"`
	Cwd      string `json:"cwd,omitempty"`
	State    string `json:"state"`
	PID      int    `json:"pid,omitempty"`
}

// ProcessInfo is a running command in the list tool's answer.
type ProcessInfo struct {
	ID              string `json:"id"`
	Session         string `json:"session,omitempty" jsonschema:"name of its session; empty for a command outside the sessions"`
	Command         string `json:"command"`
	State           string `json:"state"`
	WaitingForInput bool   `json:"waitingForInput,omitempty"`
	PID             int    `json:"pid,omitempty"`
}

// ListOutput is the list tool's answer.
type ListOutput struct {
	Sessions  []SessionInfo `json:"sessions"`
	Processes []ProcessInfo `json:"processes"`
}

func (s *Server) list(ctx context.Context, _ *mcp.CallToolRequest, _ ListInput) (*mcp.CallToolResult, ListOutput, error) {
	names := s.names()
	out := ListOutput{Sessions: []SessionInfo{}, Processes: []ProcessInfo{}}
	for id, name := range names {
		p, err := s.c.Session(ctx, id)
		if err != nil {
			continue
		}
		out.Sessions = append(out.Sessions, SessionInfo{Name: name, ID: id, Shell: p.Shell, Language: p.Language,
			Cwd: p.Cwd, State: string(p.State), PID: p.PID})
	}
	for p, err := range s.c.Processes(ctx, client.ListOptions{State: "running"}) {
		if err != nil {
			return nil, ListOutput{}, explain(err)
		}
		if p.System {
			continue // a session's own shell: listed as its session
		}
		// A cell's code is shown on one line, as the list's text has a
		// line per command.
		cmd := cmp.Or(p.ShellCommand, strings.ReplaceAll(p.Code, "\n", `\n`))
		if cmd == "" {
			cmd = strings.Join(p.Argv, " ")
		}
		out.Processes = append(out.Processes, ProcessInfo{ID: p.ID, Session: names[p.SessionID], Command: cmd,
			State: string(p.State), WaitingForInput: p.WaitingForInput, PID: p.PID})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d sessions:\n", len(out.Sessions))
	for _, x := range out.Sessions {
		what := x.Shell
		if x.Language != "" {
			what = x.Language + " code"
		}
		fmt.Fprintf(&b, "  %s (%s, %s) cwd %s [%s]\n", x.Name, x.ID, what, x.Cwd, x.State)
	}
	fmt.Fprintf(&b, "%d commands running:\n", len(out.Processes))
	for _, x := range out.Processes {
		where := x.Session
		if where == "" {
			where = "-"
		}
		wait := ""
		if x.WaitingForInput {
			wait = ", waiting for input"
		}
		fmt.Fprintf(&b, "  %s in %s%s: %s\n", x.ID, where, wait, x.Command)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

func (s *Server) closeSession(ctx context.Context, _ *mcp.CallToolRequest, in CloseInput) (*mcp.CallToolResult, CloseOutput, error) {
	name := in.Session
	if name == "" {
		name = DefaultSession
	}
	s.mu.Lock()
	n, ok := s.sessions[name]
	s.mu.Unlock()
	id := n.id
	if !ok {
		return nil, CloseOutput{}, fmt.Errorf("no session %q: the list tool shows the sessions", name)
	}
	err := s.c.DeleteSession(ctx, id)
	var ce *client.Error
	if err != nil && !(errors.As(err, &ce) && ce.Code == client.CodeNotFound) {
		return nil, CloseOutput{}, explain(err)
	}
	s.forget(name, id)
	out := CloseOutput{Session: name, ID: id, Closed: true}
	what := "shell"
	if n.language != "" {
		what = "interpreter"
	}
	text := fmt.Sprintf("session %s (%s) closed: its %s and commands ended", name, id, what)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
