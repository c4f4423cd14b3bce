package server

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// readyPoll is how often the ready route looks for a listening port (once
// for all the calls waiting on a process: see portWatch) and for new output
// to match.
const readyPoll = 100 * time.Millisecond

// readyWindow is how much of the output, at least, a pattern is matched
// against at once (less for a large pattern: see readySpan): a longer
// match is not found. The output is matched in
// pieces of readyPiece new bytes, each after what came before it, so that
// the matching costs a few times the output's length, however small its
// frames, and a wait heeds its end between pieces.
//
// A match costs up to the bytes matched times the pattern's compiled size
// (RE2 matches in time linear in both; about 9 ns a step on a small
// machine): readySteps bounds it, about 150 ms, by matching a large
// pattern in a shorter window and pieces, so that a wait still heeds its
// end, and the client's going, between them. A pattern that would leave
// less than readyMinSpan bytes a match is refused. Unbounded, 60
// alternatives of [\w\s-]{1000}Q held a core for 30 s whatever the
// call's timeout, and ran on after the client had gone.
const (
	readyWindow  = 64 << 10
	readyPiece   = 32 << 10
	readySteps   = 16 << 20
	readyMinSpan = 8 << 10
)

// matchSlots is how many ready patterns match a piece of output at once:
// half the cores, at least one. A match takes up to about 150 ms of a core
// (readySteps); a hundred waits of a large pattern on a fast writer, each
// matching on its own, held both cores of a small machine, so that
// /healthz took up to 2.5 s and waits came back 5 s after their timeout.
// The others wait their turn, heeding their end meanwhile.
func matchSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// readyPatternBytes bounds a pattern's text, which is parsed before its
// compiled size is known: a parse costs some 20 bytes of heap a byte of
// text, and a megabyte of it took 20 MB. No pattern within the
// instructions readySpan takes needs more: the longest of them, a
// literal, is 2 KiB, and 16 KiB hold hundreds of classes.
const readyPatternBytes = 16 << 10

// readyPattern compiles a ready call's pattern and returns the window and
// piece it is matched in (see readySpan), or refuses it, at little cost,
// for its length or its size. A repetition is compiled as many times as it
// counts, so that 1 KB of text, (?:a...a){1000}, compiles to a million
// instructions, some 200 MB of heap: its size is bounded from the parsed
// pattern first, and only one that bound lets through is compiled.
func readyPattern(text string) (re *regexp.Regexp, window, piece int, err error) {
	if len(text) > readyPatternBytes {
		return nil, 0, 0, badRequest("pattern: %d bytes long, at most %d", len(text), readyPatternBytes)
	}
	parsed, err := syntax.Parse(text, syntax.Perl)
	if err != nil {
		return nil, 0, 0, badRequest("pattern: %v", err)
	}
	most := readySteps / readyMinSpan
	// The bound is loose by a few times at most: a pattern well past
	// most by it is surely past most.
	if instBound(parsed, 16*most) > 16*most {
		return nil, 0, 0, tooComplex(fmt.Sprintf("well over %d", most))
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, 0, 0, badRequest("pattern: %v", err)
	}
	if window, piece, err = readySpan(len(prog.Inst)); err != nil {
		return nil, 0, 0, err
	}
	// regexp takes text, not a parsed pattern: this second parse and
	// compile is of one known to be small.
	if re, err = regexp.Compile(text); err != nil {
		return nil, 0, 0, badRequest("pattern: %v", err)
	}
	return re, window, piece, nil
}

// instBound returns a bound above the instructions re compiles to once
// simplified, or a number past ceiling once it is past ceiling: the
// program's fail and match instructions, and nodeBound of its tree.
func instBound(re *syntax.Regexp, ceiling int) int {
	return min(2+nodeBound(re, ceiling), ceiling+1)
}

// nodeBound bounds the instructions of re's tree, or returns a number past
// ceiling. It counts each node, and a repetition's operand as many times as
// the repetition may run, with more instructions than the compiler takes
// for each (a capture's two, a loop's or a choice's one, a loop of what
// may match empty two), so that the bound is never below the size.
func nodeBound(re *syntax.Regexp, ceiling int) int {
	switch re.Op {
	case syntax.OpLiteral:
		return max(1, len(re.Rune))
	case syntax.OpRepeat:
		count := re.Max
		if count < 0 {
			count = re.Min + 2
		}
		sub := nodeBound(re.Sub[0], ceiling) + 1
		if count > 0 && sub > ceiling/count {
			return ceiling + 1
		}
		return max(1, count*sub)
	}
	n := 2 + len(re.Sub)
	for _, sub := range re.Sub {
		if n += nodeBound(sub, ceiling); n > ceiling {
			return ceiling + 1
		}
	}
	return n
}

// readySpan returns the window and piece a pattern of size instructions
// is matched in: readyWindow and readyPiece, or less for a large pattern
// (see readySteps); an error for one too large.
func readySpan(size int) (window, piece int, err error) {
	span := min(readyWindow+readyPiece, readySteps/size)
	if span < readyMinSpan {
		return 0, 0, tooComplex(strconv.Itoa(size))
	}
	piece = span * readyPiece / (readyWindow + readyPiece)
	return span - piece, piece, nil
}

// tooComplex refuses a pattern that compiles to size instructions.
func tooComplex(size string) error {
	return badRequest("pattern: too complex: it compiles to %s instructions, at most %d (a counted repetition counts each time: [a-z]{1000} is a thousand)",
		size, readySteps/readyMinSpan)
}

// treeOf is what a process offers to find its ports: its processes, those
// it left behind included.
type treeOf interface{ Tree() []int }

func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	port, anyPort := 0, false
	switch v := q.Get("port"); v {
	case "":
	case "any":
		anyPort = true
	default:
		if port, err = strconv.Atoi(v); err != nil || port <= 0 || port > 65535 {
			return badRequest("port %q: want a TCP port number or any", v)
		}
	}
	var re *regexp.Regexp
	window, piece := 0, 0
	if v := q.Get("pattern"); v != "" {
		if re, window, piece, err = readyPattern(v); err != nil {
			return err
		}
	}
	if port == 0 && !anyPort && re == nil {
		return badRequest("ready: give port, pattern or both")
	}
	timeout, err := millisParam(q, "timeout")
	if err != nil {
		return err
	}
	ctx := r.Context()
	if timeout > 0 {
		var stop func()
		ctx, stop = s.deadlines.with(ctx, timeout)
		defer stop()
	}
	rd := readiness{p: p, port: port, anyPort: anyPort, re: re, windowBytes: window, pieceBytes: piece, slots: s.matching}
	if re != nil && p.Log().Keep() == logstore.KeepNone {
		// Nothing is kept for later reading: the wait holds what comes
		// from now on, or nothing would reach it, and matches from there:
		// what came before is no gap.
		release, from := p.Log().HoldFrom()
		defer release()
		rd.after = from
	}
	ans, ok := rd.wait(ctx, &s.ports)
	if !ok {
		if err := r.Context().Err(); err != nil {
			return err
		}
		return writeJSON(w, http.StatusAccepted, s.processDTO(p))
	}
	return writeJSON(w, http.StatusOK, ans)
}

// readiness is one ready call's state.
type readiness struct {
	p       process.Process
	port    int
	anyPort bool
	re      *regexp.Regexp
	// windowBytes and pieceBytes are what re is matched in (see
	// readySpan).
	windowBytes, pieceBytes int
	// slots is the server's, a place in which each match of a piece
	// takes (see matchSlots); nil: none is needed.
	slots chan struct{}

	portSeen int
	matched  bool
	match    string
	cursor   logstore.Cursor
	after    logstore.Cursor // output read up to here
	window   []byte          // the output's last bytes, for a match across frames
	// cut says that window starts with the byte before its text, which
	// starts where the output was cut to its last bytes (or after a gap,
	// as if after a NUL), not at the output's start: see matchIndex.
	cut   bool
	reCut *regexp.Regexp // re after any one character, made once needed
	ends  []frameEnd     // the frames of the piece being matched
	// partOf is the frame after after whose first partAt bytes were
	// matched, a piece ending in it.
	partOf logstore.Cursor
	partAt int
	// dropped says that output the wait was to match was dropped
	// (retention, the log budget) before it read it.
	dropped bool
}

// frameEnd is where a frame of the output ends in readiness.window.
type frameEnd struct {
	at     int
	cursor logstore.Cursor
}

// ready reports whether everything asked for holds now.
func (rd *readiness) ready() bool {
	return (rd.re == nil || rd.matched) && (rd.portSeen > 0 || !rd.wantsPort())
}

func (rd *readiness) wantsPort() bool { return rd.port > 0 || rd.anyPort }

// see takes the ports a look saw listening.
func (rd *readiness) see(ports []int) {
	switch {
	case rd.anyPort && len(ports) > 0:
		rd.portSeen = ports[0]
	case rd.port > 0 && slices.Contains(ports, rd.port):
		rd.portSeen = rd.port
	}
}

// scan matches the pattern against the output that came since the last
// look, a piece at a time, each with the readyWindow bytes before it, until
// it matched, there is no more, or ctx is done. A match names the frame it
// ends in (the piece's first when it ends before the piece: it matched once
// the piece came, as a \B at its end may).
func (rd *readiness) scan(ctx context.Context) {
	for ctx.Err() == nil {
		frames, gap := rd.more()
		if gap {
			rd.dropped = true
			// What came before the gap does not run on into what comes
			// after it: a match across it would be text never written.
			rd.window, rd.cut = append(rd.window[:0], 0), true
		}
		if len(frames) == 0 {
			return
		}
		off := 0 // into frames[0]
		if frames[0].Cursor == rd.partOf {
			off = rd.partAt // matched before
		}
		for len(frames) > 0 && ctx.Err() == nil {
			rd.ends = rd.ends[:0]
			// A piece of at most pieceBytes: a frame longer than what is
			// left of it goes in parts, each in a piece of its own.
			for n := 0; len(frames) > 0 && n < rd.pieceBytes; {
				d := frames[0].Data[off:]
				take := min(len(d), rd.pieceBytes-n)
				rd.window = append(rd.window, d[:take]...)
				rd.ends = append(rd.ends, frameEnd{len(rd.window), frames[0].Cursor})
				n += take
				if off += take; off < len(frames[0].Data) {
					rd.partOf, rd.partAt = frames[0].Cursor, off
					break
				}
				rd.after, rd.partAt, off = frames[0].Cursor, 0, 0
				frames = frames[1:]
			}
			if !rd.take(ctx) {
				return
			}
			m := rd.matchIndex()
			rd.give()
			if m != nil {
				i, _ := slices.BinarySearchFunc(rd.ends, m[1], func(e frameEnd, at int) int { return e.at - at })
				rd.matched, rd.match, rd.cursor = true, string(rd.window[m[0]:m[1]]), rd.ends[i].cursor
				return
			}
			if n := len(rd.window); n > rd.windowBytes+1 {
				// The byte before the bytes kept goes with them.
				rd.window, rd.cut = append(rd.window[:0], rd.window[n-rd.windowBytes-1:]...), true
			}
		}
	}
}

// matchIndex returns where in window the pattern matches first, or nil.
// Where the window was cut, ^, \A, \b and the like at its start see the
// byte before it, as they would in the whole output: a match at the start
// of the text, which may be due to the cut alone, is looked for again
// with that byte before the pattern. One starting later needs no second
// look: nothing before it bears on it.
func (rd *readiness) matchIndex() []int {
	from := 0
	if rd.cut {
		from = 1
	}
	m := rd.re.FindIndex(rd.window[from:])
	if m == nil || !rd.cut {
		return m
	}
	if m[0] > 0 {
		return []int{m[0] + 1, m[1] + 1}
	}
	if rd.reCut == nil {
		// As valid as re, and about as large: its span holds.
		rd.reCut = regexp.MustCompile(`(?s:.)(` + rd.re.String() + ")")
	}
	if m = rd.reCut.FindSubmatchIndex(rd.window); m == nil {
		return nil
	}
	return m[2:4]
}

// take waits for a place to match a piece in (see matchSlots), and reports
// whether it has one: false once ctx is done.
func (rd *readiness) take(ctx context.Context) bool {
	if rd.slots == nil {
		return true
	}
	select {
	case rd.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give gives back the place take took.
func (rd *readiness) give() {
	if rd.slots != nil {
		<-rd.slots
	}
}

// more returns frames after those read: a page's worth, or under keepLogs
// none what the wait's hold kept (see Server.ready), which no page has; and
// whether output after those read was dropped before them.
func (rd *readiness) more() ([]logstore.Frame, bool) {
	l := rd.p.Log()
	if l.Keep() == logstore.KeepNone {
		e := l.Excerpt(rd.after, 0)
		return e.Head, e.TruncatedHead
	}
	p := l.PageBytes(rd.after, 0, logsPageBytes)
	return p.Frames, p.TruncatedHead
}

// wait waits until ready, the process and everything it left behind ended
// first (ready false), or ctx ends (ok false). It matches new output every
// readyPoll and takes each new look of ports's at the process.
func (rd *readiness) wait(ctx context.Context, ports *portWatch) (readyAnswer, bool) {
	var g *portGroup
	if rd.wantsPort() {
		g = ports.join(rd.p)
		defer ports.leave(g)
	}
	var tick <-chan time.Time
	if rd.re != nil {
		t := time.NewTicker(readyPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		ended := false
		select {
		case <-rd.p.Done():
			ended = true
		default:
		}
		if rd.re != nil && !rd.matched {
			rd.scan(ctx)
		}
		var looked <-chan struct{}
		left := true // nothing the process left behind runs
		if g != nil {
			var l portLook
			l, looked = g.latest()
			rd.see(l.ports)
			left = l.ended
		}
		if rd.ready() {
			return rd.answer(), true
		}
		done := rd.p.Done()
		if ended {
			if ctx.Err() != nil {
				// The wait ended before the output was matched to its
				// end: the pattern may be there, so that it did not end
				// first is all that is known.
				return readyAnswer{}, false
			}
			// A pattern alone needs the process's own output, which ended
			// with it; a port may still be opened by what it left behind
			// (a server started with & in a session) until a look sees
			// none of it run.
			if left {
				res := waitResult(rd.p.Info())
				return readyAnswer{Ready: api.Ready{Result: &res, Truncated: rd.dropped}}, true
			}
			done = nil
		}
		select {
		case <-ctx.Done():
			return readyAnswer{}, false
		case <-done:
		case <-tick:
		case <-looked:
		}
	}
}

// readyAnswer is api.Ready as the route writes it: with match whenever the
// pattern matched, an empty match too, which api.Ready's omits.
type readyAnswer struct {
	api.Ready
	Match *string `json:"match,omitempty"`
}

func (rd *readiness) answer() readyAnswer {
	a := readyAnswer{Ready: api.Ready{Ready: true, Port: rd.portSeen}}
	if rd.matched {
		a.Match = &rd.match
		a.Cursor = rd.cursor.String()
	}
	return a
}
