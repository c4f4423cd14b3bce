package server

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/listenport"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// readyPoll is how often the ready route looks for a listening port.
const readyPoll = 100 * time.Millisecond

// readyWindow is how much of the output, at least, a pattern is matched
// against at once: a longer match is not found. The output is matched in
// pieces of readyPiece new bytes, each after what came before it, so that
// the matching costs a few times the output's length, however small its
// frames, and a wait heeds its end between pieces.
const (
	readyWindow = 64 << 10
	readyPiece  = 32 << 10
)

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
	if v := q.Get("pattern"); v != "" {
		if re, err = regexp.Compile(v); err != nil {
			return badRequest("pattern: %v", err)
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
	if re != nil && p.Log().Keep() == logstore.KeepNone {
		// Nothing is kept for later reading: the wait holds what comes
		// from now on, or nothing would reach it.
		defer p.Log().Hold()()
	}
	rd := readiness{p: p, port: port, anyPort: anyPort, re: re}
	ans, ok := rd.wait(ctx)
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

	portSeen int
	matched  bool
	match    string
	cursor   logstore.Cursor
	after    logstore.Cursor // output read up to here
	window   []byte          // the output's last bytes, for a match across frames
	ends     []frameEnd      // the frames of the piece being matched
}

// frameEnd is where a frame of the output ends in readiness.window.
type frameEnd struct {
	at     int
	cursor logstore.Cursor
}

// ready reports whether everything asked for holds now; ctx ends the
// matching of the output early.
func (rd *readiness) ready(ctx context.Context) bool {
	if rd.re != nil && !rd.matched {
		rd.scan(ctx)
	}
	if (rd.port > 0 || rd.anyPort) && rd.portSeen == 0 {
		rd.lookPorts()
	}
	return (rd.re == nil || rd.matched) && (rd.portSeen > 0 || (rd.port == 0 && !rd.anyPort))
}

// scan matches the pattern against the output that came since the last
// look, a piece at a time, each with the readyWindow bytes before it, until
// it matched, there is no more, or ctx is done. A match names the frame it
// ends in (the piece's first when it ends before the piece: it matched once
// the piece came, as a \B at its end may).
func (rd *readiness) scan(ctx context.Context) {
	for ctx.Err() == nil {
		frames := rd.more()
		if len(frames) == 0 {
			return
		}
		for len(frames) > 0 && ctx.Err() == nil {
			rd.ends = rd.ends[:0]
			for n := 0; len(frames) > 0 && (n == 0 || n+len(frames[0].Data) <= readyPiece); frames = frames[1:] {
				n += len(frames[0].Data)
				rd.window = append(rd.window, frames[0].Data...)
				rd.ends = append(rd.ends, frameEnd{len(rd.window), frames[0].Cursor})
			}
			rd.after = rd.ends[len(rd.ends)-1].cursor
			if m := rd.re.FindIndex(rd.window); m != nil {
				i, _ := slices.BinarySearchFunc(rd.ends, m[1], func(e frameEnd, at int) int { return e.at - at })
				rd.matched, rd.match, rd.cursor = true, string(rd.window[m[0]:m[1]]), rd.ends[i].cursor
				return
			}
			if n := len(rd.window); n > readyWindow {
				rd.window = append(rd.window[:0], rd.window[n-readyWindow:]...)
			}
		}
	}
}

// more returns frames after those read: a page's worth, or under keepLogs
// none what the wait's hold kept (see Server.ready), which no page has.
func (rd *readiness) more() []logstore.Frame {
	l := rd.p.Log()
	if l.Keep() == logstore.KeepNone {
		return l.Excerpt(rd.after, 0).Head
	}
	return l.PageBytes(rd.after, 0, logsPageBytes).Frames
}

func (rd *readiness) lookPorts() {
	t, ok := rd.p.(treeOf)
	if !ok {
		return
	}
	ports, err := listenport.Ports(t.Tree())
	if err != nil {
		return
	}
	switch {
	case rd.anyPort && len(ports) > 0:
		rd.portSeen = ports[0]
	case rd.port > 0 && slices.Contains(ports, rd.port):
		rd.portSeen = rd.port
	}
}

// wait polls until ready, the process and everything it left behind ended
// first (ready false), or ctx ends (ok false).
func (rd *readiness) wait(ctx context.Context) (readyAnswer, bool) {
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if rd.ready(ctx) {
			return rd.answer(), true
		}
		select {
		case <-rd.p.Done():
			if rd.ready(ctx) {
				return rd.answer(), true
			}
			if !rd.alive() {
				res := waitResult(rd.p.Info())
				return readyAnswer{Ready: api.Ready{Result: &res}}, true
			}
		default:
		}
		select {
		case <-ctx.Done():
			return readyAnswer{}, false
		case <-tick.C:
		}
	}
}

// alive reports whether a process the ended process left behind still runs
// and could still open the port (a server started with & in a session). A
// pattern alone needs the process's own output, which ended with it.
func (rd *readiness) alive() bool {
	if rd.port == 0 && !rd.anyPort {
		return false
	}
	t, ok := rd.p.(treeOf)
	return ok && len(t.Tree()) > 0
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
