package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// lookup returns the process named by the request's {id}.
func (s *Server) lookup(r *http.Request) (process.Process, error) {
	p, err := s.reg.Get(r.PathValue("id"))
	if err == nil && p.Info().System {
		notOwed(r) // a session lives until Shutdown: a drain does not wait for it
	}
	return p, err
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) error {
	var opts api.StartOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	p, err := s.start(r.Context(), opts, false)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, s.processDTO(p))
}

func (s *Server) runProcess(w http.ResponseWriter, r *http.Request) error {
	var opts api.RunOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	limit, err := s.outputLimit(opts.OutputLimit)
	if err != nil {
		return err
	}
	// Under keepLogs none the log keeps its frames for the answer, which
	// reads them, and drops them after.
	p, err := s.start(r.Context(), opts.StartOptions, opts.KeepLogs == api.KeepNone)
	if err != nil {
		return err
	}
	defer p.Log().Release()
	return s.answerRun(w, r, p, answerWait{
		timeout: opts.Timeout.Duration(), idle: opts.IdleTimeout.Duration(),
	}, runAnswer{limit: limit, plain: opts.Plain})
}

// waitDone waits until p is done, timeout runs out (zero: no timeout) or ctx
// ends, and reports whether p is done.
func (s *Server) waitDone(ctx context.Context, p process.Process, timeout time.Duration) bool {
	if timeout > 0 {
		var stop func()
		ctx, stop = s.deadlines.with(ctx, timeout)
		defer stop()
	}
	select {
	case <-p.Done():
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f process.Filter
	switch st := q.Get("state"); st {
	case "", "all":
	case "running":
		f.State = process.Running
	case "terminal":
		f.State = process.Terminal
	default:
		return badRequest("state %q: want running, terminal or all", st)
	}
	kind, err := parseKind(q.Get("kind"), true)
	if err != nil {
		return err
	}
	f.Kind = kind
	f.SessionID = q.Get("sessionId")
	f.Name = q.Get("name")
	if f.PID, err = intParam(q, "pid"); err != nil {
		return err
	}
	limit, err := intParam(q, "limit")
	if err != nil {
		return err
	}
	// A page ends before the record that would take its JSON past
	// listPageBytes (it holds one at least): records of commands with 64
	// KiB of text each made a page of 2,000 of them 390 MB, built whole in
	// memory and held for a client that read nothing.
	var items []byte
	fits := func(i process.Info) bool {
		// The registry lists snapshots; describe each from its process so
		// that log bounds and ports are filled in the same way everywhere.
		p, err := s.reg.Get(i.ID)
		if err != nil {
			return true // gone meanwhile: nothing of it is listed
		}
		b, err := json.Marshal(s.processDTO(p))
		if err != nil || len(items) > 0 && len(items)+1+len(b) > listPageBytes {
			return false
		}
		if len(items) > 0 {
			items = append(items, ',')
		}
		items = append(items, b...)
		return true
	}
	_, next, err := s.reg.ListFitting(f, q.Get("cursor"), limit, fits)
	if err != nil {
		return err
	}
	enc := newEncoder(w, http.StatusOK, time.Duration(s.writeTimeout.Load()))
	enc.raw(`{"items":[`)
	enc.rawBytes(items)
	enc.raw("]")
	enc.comma = true
	enc.field("next", next)
	enc.raw("}\n")
	return enc.flush()
}

// listPageBytes bounds the JSON of the records a page of GET /v1/processes
// holds, as logsPageBytes bounds a logs page's frames.
const listPageBytes = 1 << 20

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.processDTO(p))
}

func (s *Server) deleteProcess(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if s.isSession(id) {
		if err := s.removeSession(id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	p, err := s.reg.Get(id)
	if err != nil {
		return err
	}
	// Stop sends TERM, and KILL after process.StopGrace; a session command that
	// outlives that too is refused by the engine after another process.StopGrace.
	ctx, cancel := context.WithTimeout(r.Context(), 3*process.StopGrace)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: process %s did not stop within %v", process.ErrUnsupported, id, process.StopGrace)
		}
		return err
	}
	// Of DELETEs at once, the one that removes the record deleted it; the
	// others find it gone, as a second DELETE of a session does.
	if !s.removeRecord(id) {
		return fmt.Errorf("process %s: %w", id, process.ErrNotFound)
	}
	s.settle(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	var opts api.KillOptions
	if err := decodeJSON(r, &opts); err != nil {
		return err
	}
	sig, err := parseSignal("signal", opts.Signal, syscall.SIGTERM)
	if err != nil {
		return err
	}
	to, err := parseSignal("escalateTo", opts.EscalateTo, syscall.SIGKILL)
	if err != nil {
		return err
	}
	if err := p.Kill(sig, opts.EscalateAfter.Duration(), to); err != nil {
		return err
	}
	s.input(p.ID()).Written() // a yes from before the signal is stale (see deliver)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (s *Server) waitProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	timeout, err := millisParam(r.URL.Query(), "timeout")
	if err != nil {
		return err
	}
	if !s.waitDone(r.Context(), p, timeout) {
		if err := r.Context().Err(); err != nil {
			return err
		}
		// Its result is final once it is terminal, while what it left
		// holding its output is given up to 2 s to let go of it.
		if i := p.Info(); i.State != process.Terminal || i.Result == nil {
			return writeJSON(w, http.StatusAccepted, s.processDTO(p))
		}
	}
	return writeJSON(w, http.StatusOK, waitResult(p.Info()))
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	after, err := logCursor(p, q.Get("cursor"))
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit")
	if err != nil {
		return err
	}
	b64, err := parseEncoding(q.Get("encoding"))
	if err != nil {
		return err
	}
	return s.writeLogsPage(w, p.Log().PageBytes(after, limit, logsPageBytes), b64)
}

func (s *Server) writeStdin(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	eof := false
	switch v := r.URL.Query().Get("eof"); v {
	case "", "false":
	case "true":
		eof = true
	default: // as the query is read: exactly as written (strconv took 1, T, TRUE)
		return badRequest("eof %q: want true or false", v)
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if len(data) > 0 || !eof {
		p.Log().Seal() // as interact does: replies start a frame of their own
		if err := s.queueStdin(p, data); err != nil {
			return err
		}
	}
	if eof {
		if err := p.CloseStdin(); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) resize(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	var size process.TerminalSize
	if err := decodeJSON(r, &size); err != nil {
		return err
	}
	if err := checkSize(size); err != nil {
		return err
	}
	if err := p.Resize(size); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func checkSize(size process.TerminalSize) error {
	if size.Cols == 0 || size.Rows == 0 {
		return badRequest("terminal size %dx%d: cols and rows must be positive", size.Cols, size.Rows)
	}
	return nil
}

// intParam parses the non-negative integer query parameter name; absent is
// zero.
func intParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if errors.Is(err, strconv.ErrRange) && v[0] != '-' {
		return 0, badRequest("%s %s: out of range: at most %d", name, api.Clip([]byte(v)), math.MaxInt)
	}
	if err != nil || n < 0 {
		return 0, badRequest("%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}

// millisParam parses the query parameter name, a non-negative number of
// milliseconds; absent is zero. One past what a time.Duration holds (292
// years) is refused, as in a JSON body: it wrapped to a wait of 4 ms.
func millisParam(q url.Values, name string) (time.Duration, error) {
	n, err := intParam(q, name)
	if err != nil {
		return 0, err
	}
	if int64(n) > math.MaxInt64/int64(time.Millisecond) {
		return 0, badRequest("%s %d: out of range (milliseconds)", name, n)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func parseCursor(s string) (logstore.Cursor, error) {
	c, err := logstore.ParseCursor(s)
	if err != nil {
		return 0, badRequest("cursor: %v", err)
	}
	return c, nil
}

// logCursor parses a cursor into p's log. One past its newest frame is
// refused: no answer gave it, and a page or stream after it would skip,
// without a word, the frames up to it once they come.
func logCursor(p process.Process, s string) (logstore.Cursor, error) {
	c, err := parseCursor(s)
	if err != nil {
		return 0, err
	}
	return c, issued(p, c)
}

// issued refuses c when it is past p's newest frame (see logCursor).
func issued(p process.Process, c logstore.Cursor) error {
	if _, _, last := p.Log().Bounds(); c > last {
		return badRequest("cursor %s is past the newest frame of %s (%s)", c, p.ID(), last)
	}
	return nil
}

// parseEncoding reports whether base64 is forced.
func parseEncoding(s string) (bool, error) {
	switch s {
	case "", api.EncodingText:
		return false, nil
	case api.EncodingBase64:
		return true, nil
	}
	return false, badRequest("encoding %q: want text or base64", s)
}

// parseSignal parses the signal name given as the body's field; empty is
// def. A kill names two signals: the refusal says which one is unknown.
func parseSignal(field, name string, def syscall.Signal) (syscall.Signal, error) {
	if name == "" {
		return def, nil
	}
	sig, err := process.ParseSignal(name)
	if err != nil {
		return 0, badRequest("%s %q: unknown signal: want a name such as TERM, INT, KILL or HUP", field, name)
	}
	return sig, nil
}

// parseKind checks a kind name; empty is allowed (and returned) when
// optional, for a filter.
func parseKind(s string, filter bool) (process.Kind, error) {
	switch k := process.Kind(s); k {
	case process.KindExec, process.KindPTY, process.KindCode, process.KindSession:
		if filter {
			return k, nil
		}
		if k == process.KindExec || k == process.KindPTY {
			return k, nil
		}
	case "":
		if filter {
			return "", nil
		}
		return process.KindExec, nil
	}
	if filter {
		return "", badRequest("kind %q: want exec, pty, code or session", s)
	}
	return "", badRequest("kind %q: want exec or pty", s)
}
