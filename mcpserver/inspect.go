package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
)

// ReadOutput is the read_output tool's answer.
type ReadOutput struct {
	ID      string `json:"id"`
	Output  string `json:"output" jsonschema:"the output read, as plain text"`
	Bytes   int64  `json:"bytes" jsonschema:"output bytes read"`
	Next    string `json:"next,omitempty" jsonschema:"cursor to read on from"`
	More    bool   `json:"more" jsonschema:"there is more output after next right now"`
	Running bool   `json:"running" jsonschema:"the command is still running and may print more"`
	// Truncated says that output right after the cursor was dropped by
	// the daemon's retention before it was read: the output read starts
	// at the oldest output kept.
	Truncated bool `json:"truncated,omitempty" jsonschema:"output after the cursor was dropped before it was read (the daemon keeps a bounded amount); what was read starts at the oldest output kept"`
}

func (s *Server) readOutput(ctx context.Context, req *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	if in.ID == "" {
		return nil, ReadOutput{}, errors.New("id is empty: give the command's id")
	}
	if in.Limit < 0 {
		return nil, ReadOutput{}, errors.New("limit is bytes and cannot be negative")
	}
	if in.Limit > MaxOutputLimit {
		return nil, ReadOutput{}, fmt.Errorf("limit is at most %d bytes: read on from the answer's next cursor", MaxOutputLimit)
	}
	limit := int64(DefaultOutputLimit)
	if in.Limit > 0 {
		limit = in.Limit
	}
	cursor, skip, open, err := parseReadCursor(in.Cursor)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	limit, _ = s.budget.take(req, limit)      // cut: a shorter page, "more" set
	from, _, _ := strings.Cut(in.Cursor, "~") // where it points, without open
	// Read frames until there is more than limit (or nothing more), then
	// cut at a character boundary, at a line end when one is near.
	out := ReadOutput{ID: in.ID}
	// Whether the command runs is asked first: output read after it ended
	// is all there will be, while a running command may finish the escape
	// sequence its output ends with.
	if p, err := s.c.Get(ctx, in.ID); err == nil {
		out.Running = !p.Ended()
	}
	type piece struct {
		before     string // the cursor of the frame before this one
		cursor     string
		origin     int // bytes of the frame before the piece
		start, end int // in buf
	}
	var buf []byte
	var pieces []piece
	before := cursor
	seen := map[string]bool{cursor: true} // the cursors asked for
	for int64(len(buf)) <= limit {
		page, err := s.c.Logs(ctx, in.ID, client.LogsOptions{Cursor: cursor, Limit: readPageFrames})
		if err != nil {
			return nil, ReadOutput{}, explain(err)
		}
		if len(page.Items) == 0 {
			break
		}
		if seen[page.Next] {
			// Cursors only increase: a page naming one asked for
			// already would be read for ever (frames with no bytes
			// never reach the limit).
			return nil, ReadOutput{}, fmt.Errorf("the daemon's logs pages of %s do not move on (next %q again): not the daemon's answer",
				in.ID, api.Clip([]byte(page.Next)))
		}
		seen[page.Next] = true
		if page.TruncatedHead && len(pieces) == 0 {
			// The frame after the cursor was dropped: what follows is no
			// part of the sequence open was, and the offset was into a
			// frame that is gone, not into the first one kept.
			open, skip = nil, 0
			out.Truncated = true
			// A cut inside the first frame kept points into it from the
			// frame before it, not from the cursor asked for: the frame
			// after that one is gone, and the daemon would answer from the
			// first frame kept again, the same bytes for ever.
			before = frameBefore(page.Items[0].Cursor)
		}
		for _, f := range page.Items {
			data, err := f.Bytes()
			if err != nil {
				return nil, ReadOutput{}, err
			}
			if len(data) == 0 {
				// The daemon's frames hold a byte at least: pages of
				// empty frames, each of a new cursor, would never reach
				// the limit, and be read for ever.
				return nil, ReadOutput{}, fmt.Errorf("the daemon's logs pages of %s hold a frame with no bytes (cursor %q): not the daemon's answer",
					in.ID, api.Clip([]byte(f.Cursor)))
			}
			// The offset is into the first frame read only.
			if skip > len(data) {
				return nil, ReadOutput{}, fmt.Errorf("cursor %s: the frame after %s holds %d bytes, not %d: give a cursor an answer gave", api.Quote(in.Cursor), before, len(data), skip)
			}
			origin := skip
			skip = 0
			pieces = append(pieces, piece{before, f.Cursor, origin, len(buf), len(buf) + len(data) - origin})
			buf = append(buf, data[origin:]...)
			before = f.Cursor
			if int64(len(buf)) > limit {
				break
			}
		}
		cursor = page.Next
	}
	end := len(buf)
	whole := false // one character over limit goes whole
	if int64(end) > limit {
		if end = cutPoint(buf, int(limit)); end == 0 {
			// The next character is longer than limit: it goes whole,
			// over the limit, so that a reader goes on (the same next
			// came again, with nothing, for ever).
			end = firstChar(buf)
			whole = true
		}
		out.More = true
	} else if out.Running {
		// An escape sequence or a character left unfinished is read whole
		// next time, as run and interact hold it back (output.holdBack).
		end = heldEnd(open, buf)
	}
	// A page that more output follows, now or later, may stop inside a
	// line: its blanks there are text, or nothing, as what follows them
	// decides (see pageEnd). Fits and fitCut measure the text so too.
	cut := out.More || out.Running
	if !whole {
		end, cut = pageEnd(open, buf, end, cut)
	}
	// Rendered held to the limit, never whole first: text can be a
	// hundred times longer than its bytes (see plaintext.Bounded).
	text, n := plaintext.Bounded(joined(open, buf[:end]), int(limit), cut)
	if whole {
		text = plaintext.String(joined(open, buf[:end])) // one character
	} else if n > int(limit) {
		// Rendering made the text longer than its bytes: fewer bytes go
		// in the answer, rather than a text cut short of what next skips.
		out.More = true
		most := int(limit)
		if end = fitCut(open, buf, end, most); end == 0 {
			// Not even one character's text fits: it goes, whole, as a
			// character longer than limit does (U+FFFD for a byte that is
			// not UTF-8), so that a reader goes on; a cursor move's
			// blanks stay cut to limit.
			end = firstChar(buf)
			most = max(most, utf8.UTFMax)
		} else {
			end, cut = pageEnd(open, buf, end, true)
		}
		text, _ = plaintext.Bounded(joined(open, buf[:end]), most, cut)
		text = plaintext.CutEnd(text, most)
	}
	// next is the last frame read whole, or the one before the frame the
	// cut is in and how far into that frame it is; with the escape
	// sequence the output is inside there, if any.
	out.Next = from
	for _, p := range pieces {
		if p.end <= end {
			out.Next = p.cursor
		} else {
			out.Next = at(p.before, p.origin+max(0, end-p.start))
		}
		if p.end >= end {
			break
		}
	}
	out.Next = withOpen(out.Next, plaintext.Open(joined(open, buf[:end])))
	out.Bytes = int64(end)
	out.Output = text
	if !out.More {
		// All there was: look whether anything came meanwhile.
		if page, err := s.c.Logs(ctx, in.ID, client.LogsOptions{Cursor: cursor, Limit: 1}); err == nil {
			out.More = len(page.Items) > 0
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d bytes of output of %s", out.Bytes, in.ID)
	if out.Running {
		b.WriteString(" (still running)")
	}
	if out.Truncated {
		b.WriteString("; output after the cursor was dropped before it was read, this starts at the oldest kept")
	}
	fmt.Fprintf(&b, "; next cursor: %s", out.Next)
	if out.More {
		b.WriteString("; more to read: call read_output again with that cursor")
	}
	b.WriteString("\n")
	b.WriteString(out.Output)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

// frameBefore is the cursor of the frame before the one whose cursor is c:
// the daemon's cursors grow by one a frame (see logstore.Cursor), opaque as
// they are to its other clients.
func frameBefore(c string) string {
	n, err := strconv.ParseUint(c, 10, 64)
	if err != nil || n == 0 {
		return c // never so for a cursor the daemon gave
	}
	return strconv.FormatUint(n-1, 10)
}

// parseReadCursor parses a cursor an answer gave: a cursor the daemon
// gave (omittedAfter, next), or "CURSOR+N", which is N bytes into the frame
// after CURSOR; either may end in "~HEX", the escape sequence the output
// is inside at that point (see withOpen).
func parseReadCursor(s string) (cursor string, skip int, open []byte, err error) {
	bad := fmt.Errorf("cursor %s: want a cursor an answer gave, like its next", api.Quote(s))
	s, seq, ok := strings.Cut(s, "~")
	if ok {
		open, err = hex.DecodeString(seq)
		// What withOpen wrote: bytes that Open gives back as they are.
		if err != nil || len(open) == 0 || !bytes.Equal(plaintext.Open(open), open) {
			return "", 0, nil, bad
		}
	}
	cursor, n, ok := strings.Cut(s, "+")
	if !ok {
		return s, 0, open, nil
	}
	skip, err = strconv.Atoi(n)
	if err != nil || skip < 0 {
		return "", 0, nil, bad
	}
	return cursor, skip, open, nil
}

// withOpen is cursor with open, the start of the escape sequence the
// output is inside at that point (plaintext.Open), after a "~" in hex: an
// answer read from it renders the sequence's rest as the whole output
// renders it (as nothing, for the body of an OSC or DCS string) rather than
// as text. It is how a cursor goes on past a sequence that could not be
// held back (holdBack): one longer than plaintext.MaxUnfinished, or one
// whose start has no cursor.
func withOpen(cursor string, open []byte) string {
	if len(open) == 0 {
		return cursor
	}
	return cursor + "~" + hex.EncodeToString(open)
}

// heldEnd is where output b ends once an escape sequence left unfinished
// at its end is held back: before that sequence when it starts in b,
// within plaintext.MaxUnfinished of b's end; else at b's end, where the
// cursor carries the sequence (withOpen). open is the sequence the output
// before b left open. A character whose first bytes end b is held back so
// too: the daemon may send them in a frame of their own when the rest
// comes later, and the rest, read alone, would be a U+FFFD of its own.
func heldEnd(open, b []byte) int {
	n := max(plaintext.Unfinished(joined(open, b)), plaintext.IncompleteTail(b))
	if n > len(b) { // it started before b
		return len(b)
	}
	return len(b) - n
}

// joined is a and b in a new slice.
func joined(a, b []byte) []byte {
	return append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
}

// cutPoint returns where to cut b to at most limit bytes: at a character
// boundary, just after a newline when one is within lineSlack bytes, and
// never inside an escape sequence, whose rest would read as text on the
// next page ("1mred" of ESC [ 3 1 m red): before its start, or, when it
// starts the page, after its end, which may be past limit (it shows as
// nothing).
func cutPoint(b []byte, limit int) int {
	end := min(limit, len(b))
	for end > 0 && end < len(b) && !utf8.RuneStart(b[end]) {
		end--
	}
	lo := max(0, end-lineSlack)
	if i := bytes.LastIndexByte(b[lo:end], '\n'); i >= 0 {
		end = lo + i + 1
	}
	if end == len(b) {
		return end
	}
	open := plaintext.Unfinished(b[:end])
	switch {
	case open == 0:
		return end
	case open < end:
		return end - open
	}
	if n := plaintext.SequenceEnd(b); n > 0 {
		return n
	}
	return end // a sequence longer than the page and what was read: cut
}

// lineSlack is how far before its limit a cut moves to fall at a line end.
const lineSlack = 256

// fitCut returns where to cut b, at most at end, so that its text
// (rendered after open, the sequence the output before b left open) holds
// at most limit bytes; 0 when no character fits. Text can be longer than
// its bytes: a cursor move of 7 bytes becomes a thousand blanks, a byte
// that is not UTF-8 the three of U+FFFD. The cut is the latest such one
// between characters (text grows with the bytes, give or take an erase),
// moved as cutPoint moves it when its text still fits.
func fitCut(open, b []byte, end, limit int) int {
	fits := func(n int) bool { return plaintext.Fits(joined(open, b[:n]), limit, true) }
	between := func(n int) bool { return n == len(b) || utf8.RuneStart(b[n]) }
	lo, hi := 0, end // b[:lo]'s text fits; no cut past hi is looked at
	for lo < hi {
		half := (lo + hi + 1) / 2
		mid := half
		for mid < hi && !between(mid) {
			mid++
		}
		switch {
		case !between(mid): // none from half to hi
			hi = half - 1
		case fits(mid):
			lo = mid
		default:
			hi = mid - 1
		}
	}
	if n := cutPoint(b, lo); n > 0 && n < lo && fits(n) {
		return n
	}
	return lo
}

// firstChar is the length of the character b starts with: of its U+FFFD
// when it is not UTF-8, all the bytes that one U+FFFD stands for (see
// plaintext.InvalidLen), as the whole output's text has it; cut after the
// first of them, the rest would read as another.
func firstChar(b []byte) int {
	if c, n := utf8.DecodeRune(b); c != utf8.RuneError || n != 1 {
		return n
	}
	return plaintext.InvalidLen(b)
}

// pageEnd returns where a page of b, read after open and cut at end,
// ends, and whether its text keeps the blanks at its end (see
// plaintext.Bound's Cut), cut telling that more output follows it or may.
// Each page is rendered on its own, and blanks before a cut are text when
// more follows on their line, nothing when the line ends: the page ends
// before them, and the next one renders them with what follows. A page of
// nothing but blanks looks at what b holds after it: before a line's end
// (or a carriage return, which the text after it writes over) its blanks
// are nothing. Blanks whose end b does not hold are kept: most often a
// line goes on after them.
func pageEnd(open, b []byte, end int, cut bool) (int, bool) {
	if !cut || end == len(b) {
		return end, cut
	}
	page := joined(open, b[:end])
	if start := plaintext.BlankTail(page) - len(open); start > 0 && start < end {
		return start, true
	} else if start >= end {
		return end, true // no blanks at its end
	}
	if i := end + plaintext.BlankHead(b[end:]); i < len(b) && (b[i] == '\n' || b[i] == '\r') {
		return end, false
	}
	return end, true
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

// ListOutput is the list tool's answer: the sessions and the commands
// oldest first, by the time the daemon created them (sessions created in
// the same millisecond by name), the same at every call.
type ListOutput struct {
	Sessions  []SessionInfo `json:"sessions"`
	Processes []ProcessInfo `json:"processes"`
}

func (s *Server) list(ctx context.Context, _ *mcp.CallToolRequest, _ ListInput) (*mcp.CallToolResult, ListOutput, error) {
	names := s.names()
	if s.Shared {
		// The daemon's running named sessions too: another server's, or
		// one this server's name has not taken yet.
		all, err := s.c.Sessions(ctx)
		if err != nil {
			return nil, ListOutput{}, explain(err)
		}
		for _, p := range all {
			if _, ok := names[p.ID]; !ok && p.Name != "" && !p.Ended() {
				names[p.ID] = p.Name
			}
		}
	}
	out := ListOutput{Sessions: []SessionInfo{}, Processes: []ProcessInfo{}}
	// names is a map, whose order changes from one range to the next.
	created := make(map[string]time.Time, len(names))
	for id, name := range names {
		p, err := s.c.Session(ctx, id)
		if err != nil {
			continue
		}
		created[id] = p.CreatedAt.Time
		out.Sessions = append(out.Sessions, SessionInfo{Name: name, ID: id, Shell: p.Shell, Language: p.Language,
			Cwd: p.Cwd, State: string(p.State), PID: p.PID})
	}
	slices.SortFunc(out.Sessions, func(a, b SessionInfo) int {
		return cmp.Or(created[a.ID].Compare(created[b.ID]), cmp.Compare(a.Name, b.Name))
	})
	// The daemon lists processes in the order it created them.
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
	fmt.Fprintf(&b, "%s:\n", count(len(out.Sessions), "session"))
	for _, x := range out.Sessions {
		what := x.Shell
		if x.Language != "" {
			what = x.Language + " code"
		}
		fmt.Fprintf(&b, "  %s (%s, %s) cwd %s [%s]\n", plaintext.Escape(x.Name), x.ID, plaintext.Escape(what), plaintext.Escape(x.Cwd), x.State)
	}
	fmt.Fprintf(&b, "%s running or queued:\n", count(len(out.Processes), "command"))
	for _, x := range out.Processes {
		where := x.Session
		if where == "" {
			where = "-"
		}
		state := ""
		if x.State != string(api.Running) {
			state = ", " + x.State // queued behind another: starting
		}
		if x.WaitingForInput {
			state += ", waiting for input"
		}
		fmt.Fprintf(&b, "  %s in %s%s: %s\n", x.ID, plaintext.Escape(where), state, plaintext.Escape(x.Command))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

func (s *Server) closeSession(ctx context.Context, req *mcp.CallToolRequest, in CloseInput) (*mcp.CallToolResult, CloseOutput, error) {
	name := in.Session
	if name == "" {
		name = DefaultSession
	}
	// The close takes its turn behind the calls sent to the session before
	// it (see order): the run that makes the session, say.
	if t, ok := ticketOf(req); ok {
		defer s.order.leave(name, t)
		if err := s.order.wait(ctx, name, t); err != nil {
			return nil, CloseOutput{}, err
		}
		if s.order.cancelledByClient(t) {
			return nil, CloseOutput{}, context.Canceled // cancelled before its turn: nothing is closed
		}
	}
	s.mu.Lock()
	n, ok := s.sessions[name]
	s.mu.Unlock()
	if s.Shared && (!ok || n.ended) {
		// The session a run under the name would take.
		p, err := s.daemonSession(ctx, name, n.id)
		if err != nil {
			return nil, CloseOutput{}, explain(err)
		}
		if p != nil {
			n, ok = named{id: p.ID, shell: p.Shell, language: p.Language}, true
		}
	}
	id := n.id
	if !ok {
		return nil, CloseOutput{}, fmt.Errorf("no session %s: the list tool shows the sessions", quoteName(name))
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
	text := fmt.Sprintf("session %s (%s) closed: its %s and commands ended", plaintext.Escape(name), id, what)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// count is n and noun, plural unless n is 1: "1 session", "2 sessions".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// quoteName quotes a session's name for a message, clipped (see api.Clip):
// a name the client sent may be megabytes long.
func quoteName(name string) string { return api.Clip([]byte(strconv.Quote(name))) }
