package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
)

// Result is what run and interact answer, as structured content; the text
// content says the same in words.
type Result struct {
	Session string `json:"session,omitempty" jsonschema:"name of the session the command ran in"`
	ID      string `json:"id" jsonschema:"the command's id, for interact and read_output"`
	Running bool   `json:"running" jsonschema:"the command is still running: the answer came first"`
	// Queued is set when the command has not started: it waits behind the
	// command its session runs.
	Queued bool `json:"queued,omitempty" jsonschema:"the command waits behind the one its session runs, not started yet"`
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
	OmittedBytes    int64  `json:"omittedBytes,omitempty" jsonschema:"output bytes left out between head and tail: whose text is not shown, read_output from omittedAfter reads them"`
	OmittedAfter    string `json:"omittedAfter,omitempty" jsonschema:"cursor to read the omitted output from with read_output"`
	Truncated       bool   `json:"truncated,omitempty" jsonschema:"the oldest output was dropped by retention before it was read"`
	Next            string `json:"next,omitempty" jsonschema:"cursor after the last output in this answer, for interact or read_output"`
	Note            string `json:"note,omitempty"`
}

// result turns a run or interact answer into a Result, its output o (the
// answer's, see answerOutput) within limit bytes; p is the still running
// process, nil when it ended. The cwd is the session's, read once the
// command ended.
func (s *Server) result(ctx context.Context, r *client.RunResult, o output, p *client.Process, sessionID string, limit int64) Result {
	next := r.Next
	if p != nil {
		// What holdBack holds back is not shown either: a character's
		// first bytes would show as a U+FFFD, and its rest, read next
		// time, as another.
		var held int
		next, held = o.holdBack(r.Next)
		o = o.dropEnd(held)
	}
	shown := o.fitted(int(limit))
	out := Result{ID: r.ProcessID, OmittedBytes: shown.omitted, Truncated: r.Truncated, Next: next}
	out.Output, out.OmittedAfter, out.OmittedBytes = render(shown, int(limit))
	if p != nil {
		out.ID = p.ID
		out.Running = true
		out.Queued = p.State == api.Starting
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
			if sess.Ended() {
				// The daemon ends a session before the command its shell
				// or interpreter ended under (exit, sys.exit()).
				out.Note = endedNote(sess)
			}
		}
	}
	return out
}

// endedNote says that the session sess has ended, for the answer of a
// command that ended with it.
func endedNote(sess *client.Process) string {
	if sess.Language != "" {
		return "the session has ended: its " + sess.Language + " interpreter is gone, and its variables and imports with it"
	}
	return "the session has ended: its " + cmp.Or(sess.Shell, "shell") + " shell is gone, and its cwd, environment and shell state with it"
}

// output is an answer's output as bytes: all of it in head, or a head and a
// tail with omitted bytes between them.
type output struct {
	// open is the escape sequence the output before head left open, as
	// the cursor read from gave it (withOpen): head is rendered after it.
	open       []byte
	head, tail []piece
	omitted    int64
	// from is the cursor read_output reads the omitted bytes from; reread
	// is the one it reads from when render cuts the head further (it reads
	// some of the head again rather than lose what was not shown), the
	// first rereadAt bytes of head before it. from is after all of head.
	from, reread string
	rereadAt     int
}

// piece is bytes of one frame of output: those from byte off on of the
// frame after the cursor before. known says that before and off are known:
// they are not for a frame the daemon cut at its start (a tail's first),
// the first frame after frames retention dropped, or the first of an
// answer read from no cursor.
type piece struct {
	data   []byte
	before string
	off    int
	known  bool
}

// at is the cursor off bytes into the frame after cursor, as read_output
// gives it: "CURSOR+N", or cursor itself at the frame's start.
func at(cursor string, off int) string {
	if off == 0 && cursor != "" {
		return cursor
	}
	return cursor + "+" + strconv.Itoa(off)
}

// answerOutput is the output of r, the daemon's answer from the cursor
// asked (a daemon cursor: the frame after it is r's first).
func answerOutput(r *client.RunResult, asked string) output {
	split := len(r.Logs)
	if r.OmittedBytes > 0 {
		split = r.Head()
	}
	pieces := make([]piece, len(r.Logs))
	for i, f := range r.Logs {
		data, _ := f.Bytes() // base64 the daemon wrote: an error leaves the frame empty
		pieces[i].data = data
		switch {
		case r.OmittedBytes > 0 && i == split: // cut at its start
		case i == 0: // asked "" is interact's "after the input": no cursor
			pieces[i].before, pieces[i].known = asked, asked != "" && !r.Truncated
		default:
			pieces[i].before, pieces[i].known = r.Logs[i-1].Cursor, true
		}
	}
	o := output{head: pieces[:split], tail: pieces[split:], omitted: r.OmittedBytes}
	if r.OmittedBytes > 0 {
		o.from, o.reread, o.rereadAt = omittedFrom(r), r.OmittedAfter, size(o.head)
		if split > 0 && r.Logs[split-1].Cursor != r.OmittedAfter {
			o.rereadAt -= len(pieces[split-1].data) // the head's last frame, cut
		}
	}
	return o
}

// withLead is o, the daemon's answer from the cursor of the frame lead is
// the end of, with lead in front: lead is what a "CURSOR+N" cursor points
// at, which the daemon cannot read from. shown is the bytes of lead the head
// may hold (the daemon was asked for that much less), limit the daemon's
// limit for the whole: a lead that does not fit is cut at shown, and the
// rest of it and what the daemon's tail leaves out are omitted.
func (o output) withLead(lead piece, shown, limit int) output {
	if o.omitted == 0 && len(lead.data)+size(o.head) <= limit || shown >= len(lead.data) {
		o.head = append([]piece{lead}, o.head...)
		if o.omitted > 0 {
			o.reread, o.rereadAt = at(lead.before, lead.off), 0
		}
		return o
	}
	rest, omitted := o.tail, int64(size(o.head))+o.omitted
	if o.omitted == 0 {
		rest, omitted = o.head, 0
	}
	head := lead
	head.data = lead.data[:shown]
	return output{
		head:    []piece{head},
		tail:    rest,
		omitted: omitted + int64(len(lead.data)-shown),
		from:    at(lead.before, lead.off+shown),
		reread:  at(lead.before, lead.off),
	}
}

// fitted is o, or, when o is not cut but its text is longer than limit
// (the daemon bounds bytes, and rendering made the text longer than its
// bytes: a cursor move of 7 bytes becomes a thousand blanks), o cut to the
// most bytes whose text fits with the line saying what was left out, the
// rest omitted: read_output reads it from where it starts, with no tail.
// A cut in a piece whose place is not known moves to its start; with no
// cursor for that, o is left whole (render cuts its text).
func (o output) fitted(limit int) output {
	if o.omitted > 0 {
		return o
	}
	b := pieceBytes(o.head)
	if plaintext.Fits(joined(o.open, b), limit, false) {
		return o
	}
	n := 0
	if room := limit - omittedReserve; room > 0 {
		n = fitCut(o.open, b, len(b), room)
	}
	cut := output{open: o.open, omitted: int64(len(b) - n)}
	start := 0 // of the piece the cut is in
	for _, p := range o.head {
		if k := n - start; k < len(p.data) {
			if !p.known && k > 0 {
				// Read from the piece's start: its first frame after
				// frames retention dropped is the first after before.
				cut.omitted, n, k = cut.omitted+int64(k), start, 0
			}
			if p.before == "" && !p.known {
				return o // no cursor names where the cut is: cut as text
			}
			cut.from = at(p.before, p.off+k)
			break
		}
		start += len(p.data)
	}
	for _, p := range o.head { // the head: n bytes
		if n == 0 {
			break
		}
		p.data = p.data[:min(n, len(p.data))]
		cut.head = append(cut.head, p)
		cut.reread, cut.rereadAt = at(p.before, p.off), size(cut.head)-len(p.data)
		n -= len(p.data)
	}
	if cut.head == nil {
		cut.reread = cut.from
	}
	return cut
}

// holdBack is next, the cursor after o's output, moved back to the start
// of an escape sequence its end leaves unfinished, so that the next answer
// reads that sequence whole rather than its rest as text ("31mred" after
// "ab ESC ["), and to the start of a character whose first bytes end it
// (the daemon may send them in a frame of their own when the rest comes
// later), so that the next answer reads it whole rather than a U+FFFD for
// its rest; held is how many bytes at o's end it held back, which the
// rendering is not to show (see dropEnd). A sequence that cannot be
// held back so — one longer than plaintext.MaxUnfinished (an OSC 52
// clipboard, a sixel image), one that started before the cursor read from,
// or one that starts in a piece whose place is not known (the first of a
// tail, cut at its start) — is carried instead: next, with the sequence's
// start after it (withOpen), whose rest the next answer then renders as
// the whole output does.
func (o output) holdBack(next string) (_ string, held int) {
	last, open := o.head, o.open
	if o.omitted > 0 {
		last, open = o.tail, nil // a tail is rendered on its own
	}
	b := pieceBytes(last)
	if start := heldEnd(open, b); start < len(b) { // in b; then in the piece it falls in
		held = len(b) - start
		for _, p := range last {
			if start < len(p.data) {
				if p.known {
					return at(p.before, p.off+start), held
				}
				break
			}
			start -= len(p.data)
		}
	}
	return withOpen(next, plaintext.Open(joined(open, b))), 0
}

// dropEnd is o without the last n bytes of its output: of its tail when it
// has one, else of its head.
func (o output) dropEnd(n int) output {
	last := &o.head
	if o.omitted > 0 {
		last = &o.tail
	}
	pieces := slices.Clone(*last) // head and tail share an array
	for n > 0 && len(pieces) > 0 {
		k := len(pieces) - 1
		if len(pieces[k].data) <= n {
			n -= len(pieces[k].data)
			pieces = pieces[:k]
			continue
		}
		pieces[k].data = pieces[k].data[:len(pieces[k].data)-n]
		n = 0
	}
	*last = pieces
	return o
}

// size is the bytes of pieces.
func size(pieces []piece) int {
	n := 0
	for _, p := range pieces {
		n += len(p.data)
	}
	return n
}

// render is the answer's output as plain text within limit bytes: the
// head and the tail each rendered on its own, with a line between them
// saying what was left out, which counts in the limit (a limit shorter
// than that line leaves the line alone, whole, past the limit: the README
// and the schema say so); and the cursor read_output reads
// what was left out from, which the line names. That cursor carries the
// escape sequence the head leaves open there (withOpen), so that what is
// read from it does not start with the sequence's rest as text. omitted is
// the bytes whose text is not shown, which read_output reads from that
// cursor (after some of the head shown again, when the head's text was cut
// here).
func render(o output, limit int) (text, omittedAfter string, omitted int64) {
	// Each part is rendered held to the limit, never whole first (see
	// plaintext.Bounded).
	b := joined(o.open, pieceBytes(o.head))
	if o.omitted == 0 {
		text, _ := plaintext.Bounded(b, limit, false)
		return plaintext.CutEnd(text, limit), "", 0
	}
	// The head stops where the omitted output starts, inside a line as
	// often as not: its blanks there are text that omittedAfter reads on
	// after (see plaintext.Bound's Cut).
	head, _ := plaintext.Bounded(b, limit, true)
	tailBytes := pieceBytes(o.tail)
	line := func(cursor string, said int64) string {
		return fmt.Sprintf("\n[... %d bytes omitted; read_output with cursor %q reads them ...]\n", said, cursor)
	}
	// The room is reckoned with the most the line can say, all the bytes,
	// so that its final, smaller number still fits.
	most := o.omitted + int64(size(o.head)+len(tailBytes))
	after := withOpen(o.from, plaintext.Open(b))
	reread := withOpen(o.reread, plaintext.Open(b[:len(o.open)+o.rereadAt]))
	room := max(limit-max(len(line(after, most)), len(line(reread, most))), 0)
	// Rendering can make text longer than its bytes (a cursor move becomes
	// blanks): hold the two together to the room. The tail loses bytes at
	// its start, and the head text at its end, read again from a cursor
	// before it. What the line says is omitted is bytes either way: those
	// whose text is not shown (a count of the text cut said 12,442 bytes of
	// 1,800).
	skip := tailStart(tailBytes, room-min(len(head), room/2))
	tail, _ := plaintext.Bounded(tailBytes[skip:], limit, false)
	headShown := size(o.head)
	if shown := plaintext.CutEnd(head, room-len(tail)); shown != head {
		// The head lost its end here: read from the frame whose text was
		// cut, again, rather than past what was not shown — the head's last
		// frame, where the daemon's omission starts, or an earlier one.
		head, after = shown, reread
		if k := cutPiece(o, room-len(tail)); k >= 0 {
			again := withOpen(at(o.head[k].before, o.head[k].off), plaintext.Open(b[:len(o.open)+size(o.head[:k])]))
			if more := len(line(again, most)) - len(line(reread, most)); more > 0 {
				head = plaintext.CutEnd(head, len(head)-more)
			}
			after = again
		}
		headShown = shownBytes(o.open, b[len(o.open):], len(head))
	}
	said := o.omitted + int64(size(o.head)-headShown+skip)
	return strings.TrimSuffix(head, "\n") + line(after, said) + tail, after, said
}

// shownBytes is how many of b's first bytes have their text, rendered
// after open, within its first n bytes. Each prefix is rendered with a
// character after it, as b's text has it: a cursor move at a prefix's end
// shows as nothing, and as its blanks only once something follows it. A
// prefix ends before an escape sequence it ends inside, which that
// character could end.
func shownBytes(open, b []byte, n int) int {
	settled := func(k int) int { return max(k-plaintext.Unfinished(joined(open, b[:k])), 0) }
	fits := func(k int) bool { return plaintext.Fits(append(joined(open, b[:settled(k)]), 'x'), n+1, false) }
	lo, hi := 0, len(b) // b[:lo]'s text fits; no more than b[:hi]'s can
	for lo < hi {
		if mid := (lo + hi + 1) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return settled(lo)
}

// tailStart is where b, a cut answer's tail, starts to be shown for its
// text to fit in room: the fewest bytes left out at its start, then moved
// on to a character's start, past an escape sequence it falls inside
// (whose rest would show as text), and to a line's start when one is
// within lineSlack bytes.
func tailStart(b []byte, room int) int {
	fits := func(j int) bool { return plaintext.Fits(b[j:], room, false) }
	if fits(0) {
		return 0
	}
	// The suffixes looked at grow from the end, as each costs its length to
	// render when it fits: what fits is most often far shorter than b (a
	// cursor move's bytes make a hundred times more text).
	lo, hi := 0, len(b) // b[lo:] does not fit, b[hi:] (nothing, at first) does
	for n := 1; n < hi-lo; n *= 2 {
		if fits(len(b) - n) {
			hi = len(b) - n
		} else {
			lo = len(b) - n
			break
		}
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	j := hi
	for j < len(b) && !utf8.RuneStart(b[j]) {
		j++
	}
	if n := plaintext.Unfinished(b[:j]); n > 0 {
		if end := plaintext.SequenceEnd(b[j-n:]); end > n {
			j += end - n
		}
	}
	if i := bytes.IndexByte(b[j:min(j+lineSlack, len(b))], '\n'); i >= 0 && i+1 < len(b)-j {
		j += i + 1
	}
	return j
}

// cutPiece is the index of the first piece of o's head whose text, with
// that of the pieces before it, is longer than room, when that piece's
// cursor is known and it is not the head's last (whose cursor render has
// already); else -1.
func cutPiece(o output, room int) int {
	var r plaintext.Renderer
	r.Write(o.open)
	for k, p := range o.head[:max(len(o.head)-1, 0)] {
		r.Write(p.data)
		if r.Len() > room {
			if p.known {
				return k
			}
			return -1
		}
	}
	return -1
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
	split := r.Head()
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

// pieceBytes is the pieces' bytes in a new slice.
func pieceBytes(pieces []piece) []byte {
	b := make([]byte, 0, size(pieces))
	for _, p := range pieces {
		b = append(b, p.data...)
	}
	return b
}

// text is the Result in words, for a model to read.
func (r Result) text() string {
	var b strings.Builder
	switch {
	case r.Running && r.WaitingForInput:
		fmt.Fprintf(&b, "still running as %s; waiting for input (answer with interact)\n", r.ID)
	case r.Running && r.Queued:
		fmt.Fprintf(&b, "still queued as %s behind the command its session runs (interact to wait more, or interrupt to drop it)\n", r.ID)
	case r.Running:
		fmt.Fprintf(&b, "still running as %s (interact to wait more, send input or interrupt)\n", r.ID)
	case r.Error != "":
		fmt.Fprintf(&b, "failed (%s): %s\n", r.Reason, headerField(r.Error))
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
		fmt.Fprintf(&b, "session: %s\n", headerField(r.Session))
	}
	if r.Cwd != "" {
		fmt.Fprintf(&b, "cwd: %s\n", headerField(r.Cwd))
	}
	if r.Truncated {
		b.WriteString("(the oldest output was dropped before it was read)\n")
	}
	if r.Running && r.Next != "" {
		fmt.Fprintf(&b, "next cursor: %s\n", r.Next)
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", headerField(r.Note))
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

// maxHeaderField bounds the text of a field of an answer's header (a cwd,
// a session's name, an error, a note), so that the header stays a few short
// lines: a cwd 100 directories deep, each named with 255 control bytes,
// made the text of `echo hi` 100 KB. The structured content has it whole.
const maxHeaderField = 400

// headerField is s escaped (plaintext.Escape) for a line of the header,
// within maxHeaderField bytes: a longer one keeps the text of its first and
// last bytes, half of that each, and says how many bytes of s it left out
// between them.
func headerField(s string) string {
	text := plaintext.Escape(s)
	if len(text) <= maxHeaderField {
		return text
	}
	// Cut between characters, whose escapes are each whole.
	head, room := 0, maxHeaderField/2
	for head < len(s) {
		_, n := utf8.DecodeRuneInString(s[head:])
		if room -= len(plaintext.Escape(s[head : head+n])); room < 0 {
			break
		}
		head += n
	}
	tail, room := len(s), maxHeaderField/2
	for tail > head {
		_, n := utf8.DecodeLastRuneInString(s[:tail])
		if room -= len(plaintext.Escape(s[tail-n : tail])); room < 0 {
			break
		}
		tail -= n
	}
	return fmt.Sprintf("%s[... %d bytes omitted ...]%s", plaintext.Escape(s[:head]), tail-head, plaintext.Escape(s[tail:]))
}

// textResult is the tool result holding r's text; the SDK adds r as
// structured content.
func textResult(r Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.text()}}}
}
