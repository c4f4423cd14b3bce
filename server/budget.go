package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/process"
)

// The daemon's memory is budgeted: everything it keeps for others counts
// against one of its budgets, and the budgets add up to the memory limit
// it runs under (see MemoryLimit).
const (
	// recordCost is what the daemon counts for one ended record beyond its
	// output and its text: its description, its log's bookkeeping, its
	// place in the registry (measured at about 1.5 KiB).
	recordCost = 4 << 10
	// memoryMargin is what MemoryLimit allows beyond the budgets: the
	// daemon's own heap, requests being decoded and answers being encoded,
	// the running processes' bookkeeping.
	memoryMargin = 64 << 20
)

// Budget is one of the daemon's budgets: what it bounds, the flag of
// `conch serve` that sets it, its limit and what it holds now, in its unit.
type Budget struct {
	Name  string // logs, stdin, endedRecords, endedRecordText, commandText, requestBodies, killResizeBodies
	Flag  string // empty for a bound no flag sets
	Unit  string // bytes or records
	Limit int64
	Used  int64
}

// Budgets returns every budget of the server, with what it holds now.
func (s *Server) Budgets() []Budget {
	records, text := s.endedCount()
	return []Budget{
		{Name: "logs", Flag: "--log-budget", Unit: "bytes", Limit: s.budget.Limit(), Used: s.budget.Used()},
		{Name: "stdin", Flag: "--stdin-budget", Unit: "bytes", Limit: s.opts.StdinBudget, Used: int64(s.stdinQueued())},
		{Name: "endedRecords", Flag: "--max-ended", Unit: "records", Limit: int64(s.opts.MaxEnded), Used: int64(records)},
		{Name: "endedRecordText", Unit: "bytes", Limit: endedTextBudget, Used: text},
		{Name: "commandText", Flag: "--command-text-budget", Unit: "bytes", Limit: s.opts.CommandTextBudget, Used: s.textInUse()},
		{Name: "requestBodies", Flag: "--body-limit", Unit: "bytes", Limit: s.bodies.limit, Used: s.bodies.used.Load()},
		{Name: "killResizeBodies", Unit: "bytes", Limit: s.smallBodies.limit, Used: s.smallBodies.used.Load()},
	}
}

// MemoryLimit is the Go memory limit the daemon runs under: the sum of its
// budgets (an ended record counted at its cost, and the head of its text
// and the working directories it keeps, at most process.KeptText and
// sentinel.MaxCwd each, in endedTextBudget) plus a margin for its own work.
func (s *Server) MemoryLimit() int64 {
	return s.opts.LogBudget + s.opts.StdinBudget + s.opts.CommandTextBudget +
		int64(s.opts.MaxEnded)*recordCost + endedTextBudget + memoryMargin
}

// textInUse returns the bytes of text the processes not yet ended hold.
func (s *Server) textInUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.textHeld
}

// stdinQueuer is a process that says how much of its stdin is queued.
type stdinQueuer interface{ StdinQueued() int }

// stdinQueued returns the bytes queued for the stdin of every process with
// open input.
func (s *Server) stdinQueued() int {
	n := 0
	s.inputs.Range(func(id, _ any) bool {
		if p, err := s.reg.Get(id.(string)); err == nil {
			if q, ok := p.(stdinQueuer); ok {
				n += q.StdinQueued()
			}
		}
		return true
	})
	return n
}

// queueStdin queues b for p's stdin within the stdin budget: what does not
// fit is refused with stdin_full, as a write that does not fit in the
// process's own queue is.
func (s *Server) queueStdin(p process.Process, b []byte) error {
	s.stdinMu.Lock()
	defer s.stdinMu.Unlock()
	used := int64(s.stdinQueued())
	room := max(s.opts.StdinBudget-used, 0)
	if int64(len(b)) <= room {
		return p.WriteStdin(b)
	}
	if room > 0 {
		if err := p.WriteStdin(b[:room]); err != nil {
			return err
		}
	}
	return &Error{Status: http.StatusConflict, Code: api.CodeStdinFull,
		Message: fmt.Sprintf("stdin budget full: %d bytes are queued for the stdin of all processes together, at most %d (--stdin-budget); %d bytes of this write were queued, the rest were not: write the rest once the processes have read",
			used, s.opts.StdinBudget, room),
		Cause: &process.StdinFullError{Accepted: int(room), Queued: int(used), Limit: int(s.opts.StdinBudget)}}
}

// ErrStdinBudget is what a write QueueStdin refuses over the stdin budget
// wraps (errors.Is).
var ErrStdinBudget = errors.New("stdin budget full")

// QueueStdin queues b for p's stdin within the stdin budget, as the API's
// own writes are, for another surface of the same daemon (conch sandboxd's
// ProcessService), whose processes StartExec counts in the budget. A write
// over the budget is refused with an error wrapping ErrStdinBudget and a
// *process.StdinFullError whose Accepted bytes of b were queued; one that
// does not fit in p's own queue is p.WriteStdin's *process.StdinFullError
// alone.
func (s *Server) QueueStdin(p process.Process, b []byte) error {
	err := s.queueStdin(p, b)
	if e := (*Error)(nil); errors.As(err, &e) && e.Code == api.CodeStdinFull {
		return fmt.Errorf("%w: %w", ErrStdinBudget, err)
	}
	return err
}

// health is the /healthz answer: the daemon's version and its budgets.
func (s *Server) health() api.Health {
	h := api.Health{Status: "ok", Version: s.opts.Version, MemoryLimit: s.MemoryLimit()}
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		h.MemoryLimit = debug.SetMemoryLimit(-1) // the one in force, which it sets
	}
	for _, b := range s.Budgets() {
		h.Budgets = append(h.Budgets, api.BudgetUse{Name: b.Name, Flag: b.Flag, Unit: b.Unit, Limit: b.Limit, Used: b.Used})
	}
	c := s.opts.Containment
	h.Containment = string(c.Mode())
	if c.Mode() == containment.ModeNone {
		h.ContainmentReason = c.Reason()
	} else {
		h.LimitControllers = c.Controllers()
	}
	return h
}
