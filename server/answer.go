package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Answers that carry output (a run's RunResult, a logs page) are written
// frame by frame as they are encoded, never built whole: their size follows
// the output's (a NUL is six bytes of JSON), and only a bounded buffer of it
// is in memory at once.

// DefaultOutputLimit is the output a run answer holds when the request does
// not say: its head and tail, about half each.
const DefaultOutputLimit = 1 << 20

// logsPageBytes bounds the frame bytes of one logs page; a page holds at
// least one frame, and its next cursor continues after the last one.
const logsPageBytes = 1 << 20

// answerBuffer is the size of the buffer between the encoder and the
// connection.
const answerBuffer = 32 << 10

// answerBuffers are the encoders' buffers, reused: making and clearing 32
// KiB for each answer was the largest cost of a short command's round trip.
var answerBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, answerBuffer) }}

// outputLimit checks a run's outputLimit: zero means DefaultOutputLimit, and
// more than the retention means the retention, since no answer can hold
// more.
func (s *Server) outputLimit(n int64) (int, error) {
	if n < 0 {
		return 0, badRequest("outputLimit %d: want a number of bytes, 0 or more (0: the default, 1 MiB)", n)
	}
	limit := int64(DefaultOutputLimit)
	if n > 0 {
		limit = n
	}
	return int(min(limit, int64(s.opts.LogRetention))), nil
}

// runAnswer is what a run or interact answer holds: the output after a
// cursor, cut to a limit, as text made plain or not.
type runAnswer struct {
	after    logstore.Cursor
	limit    int
	plain    bool
	cameBack string // why an early answer came (api.CameBack...)
}

// endedOutputWait bounds how long an answer for a process that ended waits
// for the reading of its output to end.
const endedOutputWait = 50 * time.Millisecond

// writeRunAnswer answers with p's output after a.after: 200 with the
// RunResult when p has ended (its log closed, so the output is all there;
// or terminal, its result final, while a job it left holds its output,
// which a reader reads on from next), else 202 with the process's fields,
// the output so far and waitingForInput.
func (s *Server) writeRunAnswer(w http.ResponseWriter, p process.Process, a runAnswer) error {
	done := doneNow(p)
	if !done && endedNow(p) {
		// Ended, its output read on: what it wrote before its end is
		// most often read a moment after it, what a job it left holds
		// comes later or never (see endedNow).
		t := time.NewTimer(endedOutputWait)
		select {
		case <-p.Done():
		case <-t.C:
		}
		t.Stop()
		done = true
	}
	excerpt := func(limit int) logstore.Excerpt {
		e := p.Log().Excerpt(a.after, limit)
		if !done {
			if from := heldFrom(e.Next, a.after, frameIn(p.Log())); from > 0 {
				e = p.Log().ExcerptTo(a.after, from-1, limit)
			}
		}
		return e
	}
	e := excerpt(a.limit)
	var output []string // the plain text of all channels, when it fits
	if a.plain && a.limit > 0 {
		e, output = fitPlain(p.Log(), a.after, a.limit, e, excerpt)
	}
	status := http.StatusOK
	if !done {
		status = http.StatusAccepted
	}
	enc := newEncoder(w, status, time.Duration(s.writeTimeout.Load()))
	enc.raw("{")
	if done {
		wr := waitResult(p.Info())
		enc.field("reason", string(wr.Reason))
		if wr.ExitCode != nil {
			enc.field("exitCode", *wr.ExitCode)
		}
		if wr.Signal != "" {
			enc.field("signal", wr.Signal)
		}
		if wr.Handled {
			enc.field("handled", true)
		}
		if wr.Error != "" {
			enc.field("error", wr.Error)
		}
		if wr.Cwd != "" {
			enc.field("cwd", wr.Cwd)
		}
		if wr.OOMKilled {
			enc.field("oomKilled", true)
		}
		if wr.Usage != nil {
			enc.field("usage", wr.Usage)
		}
		if wr.StdinDroppedBytes > 0 {
			enc.field("stdinDroppedBytes", wr.StdinDroppedBytes)
		}
	} else {
		enc.members(s.processDTO(p))
		if a.cameBack != "" {
			enc.field("cameBack", a.cameBack)
		}
	}
	enc.field("processId", p.ID())
	parts := [][]logstore.Frame{e.Head, e.Tail}
	all := func(logstore.Channel) bool { return true }
	out := func(c logstore.Channel) bool { return c != logstore.Stderr }
	errs := func(c logstore.Channel) bool { return c == logstore.Stderr }
	if a.plain {
		open := openBefore(p.Log(), a.after)
		if output == nil {
			output = plainParts(parts, all, a.limit, open.All)
		}
		_, errLen := renderParts(parts, errs, a.limit, open.Err)
		stdout := plainParts(parts, out, a.limit-min(errLen, a.limit/2), open.Out)
		stderr := plainParts(parts, errs, a.limit-plainLen(stdout), open.Err)
		enc.plainText("output", output)
		enc.plainText("stdout", stdout)
		enc.plainText("stderr", stderr)
	} else {
		enc.text("output", parts, all)
		enc.text("stdout", parts, out)
		enc.text("stderr", parts, errs)
	}
	enc.key("logs")
	enc.raw("[")
	first := true
	for _, part := range parts {
		for i := range part {
			if !first {
				enc.raw(",")
			}
			first = false
			enc.frame(&part[i], false)
		}
	}
	enc.raw("]")
	enc.field("truncated", e.TruncatedHead)
	enc.field("next", e.Next.String())
	if e.Omitted > 0 {
		enc.field("omittedBytes", e.Omitted)
		enc.field("omittedAfter", e.OmittedAfter.String())
		if len(e.Head) > 0 {
			enc.field("headFrames", len(e.Head))
		}
	}
	enc.raw("}\n")
	return enc.flush()
}

// writeLogsPage answers 200 with page as the API's logs page.
func (s *Server) writeLogsPage(w http.ResponseWriter, page logstore.Page, forceBase64 bool) error {
	enc := newEncoder(w, http.StatusOK, time.Duration(s.writeTimeout.Load()))
	enc.raw("{")
	enc.key("items")
	enc.raw("[")
	for i := range page.Frames {
		if i > 0 {
			enc.raw(",")
		}
		enc.frame(&page.Frames[i], forceBase64)
	}
	enc.raw("]")
	enc.field("next", page.Next.String())
	enc.field("truncatedHead", page.TruncatedHead)
	if page.FirstAvailable > 0 {
		enc.field("firstAvailableCursor", page.FirstAvailable.String())
	}
	enc.raw("}\n")
	return enc.flush()
}

// encoder writes one JSON object to a response through a bounded buffer.
// It keeps the first write error and writes nothing after it. flush ends
// it: its buffer goes back to answerBuffers.
//
// An answer that fits the buffer is sent whole at flush, with its length,
// at once: the client has it while the daemon is still logging and
// counting the request. A larger one is sent as it is encoded.
type encoder struct {
	w     *bufio.Writer
	out   answerWriter
	comma bool // a member was written: the next one needs a comma
	err   error
	// held is text's character a frame ended in the middle of: a local
	// array of text's went to the heap at each call (the buffer hands
	// what does not fit to its writer), three times an answer.
	held [utf8.UTFMax]byte
}

// answerWriter is what an encoder's buffer writes to: the response, whose
// header it writes first.
type answerWriter struct {
	rw     http.ResponseWriter
	status int
	begun  bool // the header was written
	// timeout bounds each write of an answer that outgrows the encoder's
	// buffer: a client that reads none of it for that long is let go, its
	// connection closed, rather than holding the handler (and what it
	// holds: a run's log under keepLogs none) for as long as it keeps the
	// connection open. An answer written whole in one write (most are)
	// sets no deadline. rc is set once one was; net/http clears it once
	// the answer is done.
	timeout time.Duration
	whole   bool
	rc      *http.ResponseController
}

func (a *answerWriter) Write(p []byte) (int, error) {
	if !a.begun {
		a.begun = true
		a.rw.WriteHeader(a.status)
	}
	if a.timeout > 0 && (!a.whole || a.rc != nil) {
		if a.rc == nil {
			a.rc = http.NewResponseController(a.rw)
		}
		_ = a.rc.SetWriteDeadline(time.Now().Add(a.timeout))
	}
	return a.rw.Write(p)
}

// newEncoder starts an answer of status on w, each of its writes bounded
// by timeout (see answerWriter).
func newEncoder(w http.ResponseWriter, status int, timeout time.Duration) *encoder {
	w.Header().Set("Content-Type", "application/json")
	e := &encoder{out: answerWriter{rw: w, status: status, timeout: timeout}}
	e.w = answerBuffers.Get().(*bufio.Writer)
	e.w.Reset(&e.out)
	return e
}

func (e *encoder) raw(s string) {
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

// rawBytes writes b as it is: JSON encoded already.
func (e *encoder) rawBytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// key starts a member of the object being written.
func (e *encoder) key(name string) {
	if e.comma {
		e.raw(",")
	}
	e.comma = true
	e.raw(`"`)
	e.raw(name)
	e.raw(`":`)
}

// field writes a member with a small value. The values every answer has
// (numbers, booleans, short plain strings) are written as they are; others
// through encoding/json.
func (e *encoder) field(name string, v any) {
	e.key(name)
	if e.err != nil {
		return
	}
	// Values are made in the buffer's free room: a scratch array of the
	// function's own went to the heap (the buffer hands what does not fit
	// to its writer), one allocation a member.
	room := e.w.AvailableBuffer()
	switch v := v.(type) {
	case int:
		_, e.err = e.w.Write(strconv.AppendInt(room, int64(v), 10))
		return
	case int64:
		_, e.err = e.w.Write(strconv.AppendInt(room, v, 10))
		return
	case bool:
		_, e.err = e.w.Write(strconv.AppendBool(room, v))
		return
	case string:
		if plainString(v) {
			e.raw(`"`)
			e.raw(v)
			e.raw(`"`)
			return
		}
	case *api.Usage:
		// Every ended process's answer has it: written as encoding/json
		// writes it, without its reflection (3-4 µs and 3 allocations of a
		// one-shot's answer after a fork).
		if v != nil {
			b := strconv.AppendInt(append(room, `{"cpuMs":`...), v.CPUMs, 10)
			if v.MemoryPeakBytes != 0 {
				b = strconv.AppendInt(append(b, `,"memoryPeakBytes":`...), v.MemoryPeakBytes, 10)
			}
			_, e.err = e.w.Write(append(b, '}'))
			return
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	_, e.err = e.w.Write(b)
}

// plainString reports whether s is written in JSON as it is, between
// quotes: printable ASCII that encoding/json would not escape.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// members writes the members of v, a struct, into the object being
// written: the process's fields at the head of a 202 answer.
func (e *encoder) members(v any) {
	b, err := json.Marshal(v)
	if err != nil && e.err == nil {
		e.err = err
	}
	b = bytes.TrimSpace(b)
	if e.err != nil || len(b) <= 2 {
		return
	}
	if e.comma {
		e.raw(",")
	}
	e.comma = true
	if e.err == nil {
		_, e.err = e.w.Write(b[1 : len(b)-1])
	}
}

// fitPlain returns an excerpt after after whose plain text is at most
// limit bytes, e or one excerpt gives again with fewer bytes, and that text (as
// plainParts gives it), or nil when no excerpt of one byte or more fits. Rendering can make
// text longer than its bytes (a cursor move becomes blanks), and text cut
// to the limit after rendering (see plainParts) would leave out what the
// excerpt does not say it omitted: the end of its head, the start of its
// tail. With fewer bytes, what the text leaves out is the excerpt's
// omitted bytes, which a reader reads on from. The cut after rendering is
// then a last resort, for a tail of one byte whose text is still too long.
func fitPlain(l *logstore.Log, after logstore.Cursor, limit int, e logstore.Excerpt, excerpt func(int) logstore.Excerpt) (logstore.Excerpt, []string) {
	all := func(logstore.Channel) bool { return true }
	open := openBefore(l, after).All
	bytes := limit
	for range 16 {
		texts, n := renderParts([][]logstore.Frame{e.Head, e.Tail}, all, limit, open)
		if n <= limit {
			return e, texts
		}
		if bytes <= 1 {
			break
		}
		bytes = max(1, min(bytes-1, bytes*limit/n))
		e = excerpt(bytes)
	}
	return e, nil
}

// heldFrom returns the cursor of the first of the frames at the log's end,
// up to next and after after, that hold the first bytes of a character
// and nothing else, the bytes of one channel that begin a character valid
// so far but not whole (the log puts them out as frames of their own when
// the rest does not come within 50 ms); 0 when there are none. An answer
// for a process that still runs is the excerpt before them, its next the
// cursor before them: the answer read on from it has the rest when it came,
// rather than a U+FFFD for them now and another for the rest then. Bytes
// that can no longer become a character are not held.
func heldFrom(next, after logstore.Cursor, frame func(logstore.Cursor) (logstore.Frame, bool)) logstore.Cursor {
	var b [utf8.UTFMax - 1]byte
	n := 0
	var ch logstore.Channel
	for c := next; c > after; c-- {
		f, ok := frame(c)
		if !ok || c != next && f.Channel != ch || n+len(f.Data) > len(b) {
			return 0
		}
		ch = f.Channel
		copy(b[len(f.Data):n+len(f.Data)], b[:n])
		copy(b[:], f.Data)
		n += len(f.Data)
		if plaintext.IncompleteTail(b[:n]) == n {
			return c
		}
	}
	return 0
}

// frameIn returns l's frame under a cursor, when l still has it.
func frameIn(l *logstore.Log) func(logstore.Cursor) (logstore.Frame, bool) {
	return func(c logstore.Cursor) (logstore.Frame, bool) {
		pg := l.Page(c-1, 1)
		if len(pg.Frames) != 1 || pg.Frames[0].Cursor != c {
			return logstore.Frame{}, false
		}
		return pg.Frames[0], true
	}
}

// plainParts renders the frames of each part on the channels keep accepts
// as plain text, each part on its own so that what was omitted between them
// does not join their lines. Rendering can make text longer than its bytes
// (a cursor move becomes blanks): with limit > 0 the parts are cut to it
// together (limit < 0: no bound), the first keeping its start and the last
// its end.
func plainParts(parts [][]logstore.Frame, keep func(logstore.Channel) bool, limit int, open []byte) []string {
	texts, _ := renderParts(parts, keep, limit, open)
	if limit < 0 || plainLen(texts) <= limit {
		return texts
	}
	head, tail := texts[0], texts[len(texts)-1]
	if len(texts) == 1 {
		return []string{plaintext.CutEnd(head, limit)}
	}
	tail = plaintext.CutStart(tail, limit-min(len(head), limit/2))
	return []string{plaintext.CutEnd(head, limit-len(tail)), tail}
}

// renderParts renders each part as plainParts does, each held to a little
// more than limit bytes as it is rendered (limit < 0: no bound), the first
// keeping its start and the last its end, and returns the texts and the
// length they would have together whole: exact when at most limit, else
// exact or estimated (see plainPart).
func renderParts(parts [][]logstore.Frame, keep func(logstore.Channel) bool, limit int, open []byte) ([]string, int) {
	texts := make([]string, len(parts))
	total := 0
	for k, part := range parts {
		var n int
		texts[k], n = plainPart(part, keep, limit, k > 0 && k == len(parts)-1, open)
		total += n
		open = nil // what a tail follows was omitted
	}
	return texts, total
}

// plainPart renders the frames of part on the channels keep accepts as
// plain text, held as it is rendered to a little more than most bytes (most
// < 0: no bound; see plaintext.Bound): output that a cursor move blows up
// (ESC[1023C then x and a newline, 10 bytes to a line of 1,025) made a run
// answer of 8 MiB render to gigabytes, and the daemon ran out of memory.
// Without keepEnd the text keeps its start, and rendering stops once it is
// longer than most; with keepEnd it keeps its end. n is the length of the
// whole text: exact, but estimated from the bytes rendered when rendering
// stopped.
func plainPart(part []logstore.Frame, keep func(logstore.Channel) bool, most int, keepEnd bool, open []byte) (text string, n int) {
	b := plaintext.Bound{Most: most, End: keepEnd, Stop: !keepEnd}
	b.Write(open) // no text: a sequence left open
	total := 0    // the input bytes of the part
	for i := range part {
		if keep(part[i].Channel) {
			b.Write(part[i].Data)
			total += len(part[i].Data)
		}
	}
	text, n, in, over := b.Text()
	if over {
		n = int(int64(n) * int64(total) / int64(max(in, 1)))
	}
	return text, n
}

// openBefore returns what the output up to cursor after leaves open (see
// plaintext.Carried), from the frames just before it that are still kept:
// an answer that reads on from a cursor inside an escape sequence (an
// early answer's next, cut between two frames) renders its rest as the
// whole output would, not as text. An answer from the start has nothing
// before it.
func openBefore(l *logstore.Log, after logstore.Cursor) plaintext.Carried {
	var o plaintext.Carried
	if after == 0 {
		return o
	}
	from := after - min(after, plaintext.CarriedFrames)
	for _, f := range l.Page(from, plaintext.CarriedFrames).Frames {
		if f.Cursor > after {
			break // frames before it were dropped
		}
		o.Add(f.Data, f.Channel == logstore.Stderr)
	}
	return o
}

// plainLen returns the bytes of texts together.
func plainLen(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	return n
}

// plainText writes a member holding texts, one after the other.
func (e *encoder) plainText(name string, texts []string) {
	e.key(name)
	e.raw(`"`)
	for _, t := range texts {
		e.escape([]byte(t))
	}
	e.raw(`"`)
}

// text writes a member holding the bytes of the frames on the channels
// keep accepts, as one string, invalid UTF-8 replaced.
func (e *encoder) text(name string, parts [][]logstore.Frame, keep func(logstore.Channel) bool) {
	e.key(name)
	e.raw(`"`)
	// The text is that of the kept frames' bytes joined, as an SDK decodes
	// them: a character a frame ends in the middle of (its program paused
	// there, and another channel's frame came between) is held, and ended
	// by the next kept frame's first bytes if that frame is of the same
	// channel: no character is made of two channels' bytes.
	held := &e.held
	n := 0
	var heldCh logstore.Channel
	for _, part := range parts {
		for i := range part {
			if !keep(part[i].Channel) {
				continue
			}
			b := part[i].Data
			if n > 0 && part[i].Channel != heldCh {
				e.escape(held[:n]) // replaced
				n = 0
			}
			heldCh = part[i].Channel
			if n > 0 {
				var join [2 * utf8.UTFMax]byte
				k := copy(join[:], held[:n])
				k += copy(join[k:], b[:min(len(b), utf8.UTFMax)])
				switch r, size := utf8.DecodeRune(join[:k]); {
				case !utf8.FullRune(join[:k]): // still not whole: b is short
					n = copy(held[:], join[:k])
					continue
				case r != utf8.RuneError || size > 1: // the character is whole
					e.escape(join[:size])
					b = b[size-n:]
				default: // it was not one: its start alone is replaced
					e.escape(held[:n])
				}
				n = 0
			}
			cut := len(b) - plaintext.IncompleteTail(b)
			e.escape(b[:cut])
			n = copy(held[:], b[cut:])
		}
		// The parts (an answer's head and tail) are not one after the
		// other: what the head ends in is not ended by the tail.
		if n > 0 {
			e.escape(held[:n]) // replaced
			n = 0
		}
	}
	e.raw(`"`)
}

// frame writes f as the API's LogFrame: text when its bytes are UTF-8 and
// base64 was not asked for.
func (e *encoder) frame(f *logstore.Frame, forceBase64 bool) {
	e.raw(`{"cursor":"`)
	if e.err == nil { // made in the buffer's free room, as field does
		_, e.err = e.w.Write(strconv.AppendUint(e.w.AvailableBuffer(), uint64(f.Cursor), 10))
	}
	e.raw(`","channel":"`)
	e.raw(f.Channel.String())
	e.raw(`","data":"`)
	encoding := api.EncodingText
	if !forceBase64 && f.IsText() {
		e.escape(f.Data)
	} else {
		encoding = api.EncodingBase64
		b64 := base64.NewEncoder(base64.StdEncoding, e.w)
		if e.err == nil {
			_, e.err = b64.Write(f.Data)
		}
		if err := b64.Close(); e.err == nil {
			e.err = err
		}
	}
	e.raw(`","encoding":"`)
	e.raw(encoding)
	e.raw(`","timestamp":`)
	if e.err == nil {
		_, e.err = e.w.Write(strconv.AppendInt(e.w.AvailableBuffer(), f.Time.UnixMilli(), 10))
	}
	e.raw("}")
}

// escape writes b as the inside of a JSON string. Bytes that are not
// UTF-8 become U+FFFD, one for each maximal subpart (the longest start of
// a well-formed sequence, else one byte: see invalidLen), as a WHATWG
// TextDecoder and Python's decode(errors="replace") make them, so that the
// SDKs' text of frames read from the logs is the answer's text.
func (e *encoder) escape(b []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(b) && e.err == nil; {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		e.w.Write(b[start:i])
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				e.w.WriteByte('\\')
				e.w.WriteByte(c)
			case '\n':
				e.w.WriteString(`\n`)
			case '\r':
				e.w.WriteString(`\r`)
			case '\t':
				e.w.WriteString(`\t`)
			default:
				e.w.WriteString(`\u00`)
				e.w.WriteByte(hex[c>>4])
				e.w.WriteByte(hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			e.w.WriteString(`\ufffd`)
			size = plaintext.InvalidLen(b[i:])
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not valid JavaScript source.
			e.w.WriteString(`\u202` + string(hex[r&0xf]))
		default:
			e.w.Write(b[i : i+size])
		}
		i += size
		start = i
	}
	if e.err == nil {
		_, e.err = e.w.Write(b[start:])
	}
}

// flush writes what is buffered and sends it, gives the buffer back, and
// returns the first error. The encoder is not used after. After an error
// nothing is sent: when the header was not written yet, the handler's error
// answer takes its place.
func (e *encoder) flush() error {
	if e.err == nil {
		if !e.out.begun {
			e.out.rw.Header().Set("Content-Length", strconv.Itoa(e.w.Buffered()))
			e.out.whole = true
		}
		e.err = e.w.Flush()
	}
	if e.err == nil {
		e.err = http.NewResponseController(e.out.rw).Flush()
	}
	e.w.Reset(nil)
	answerBuffers.Put(e.w)
	e.w = nil
	return e.err
}
