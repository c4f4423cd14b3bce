package process

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Registry lists every process of every kind, in creation order. It is safe
// for concurrent use.
type Registry struct {
	mu    sync.Mutex // guards byID, order and seq
	byID  map[string]entry
	order []string // ids in creation order; removed ids are skipped lazily
	seq   uint64
}

type entry struct {
	p   Process
	seq uint64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byID: make(map[string]entry)}
}

// Add registers p. Adding an id twice is an error.
func (r *Registry) Add(p Process) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[p.ID()]; ok {
		return fmt.Errorf("process %s is registered already", p.ID())
	}
	r.seq++
	r.byID[p.ID()] = entry{p: p, seq: r.seq}
	r.order = append(r.order, p.ID())
	return nil
}

// Get returns the process with id, or an error wrapping ErrNotFound.
func (r *Registry) Get(id string) (Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok {
		return e.p, nil
	}
	return nil, fmt.Errorf("process %s: %w", id, ErrNotFound)
}

// Remove forgets the process with id without stopping it. It reports
// whether the id was registered.
func (r *Registry) Remove(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; !ok {
		return false
	}
	delete(r.byID, id)
	if len(r.order) > 64 && len(r.byID) < len(r.order)/2 {
		r.compact()
	}
	return true
}

// compact drops removed ids from order. r.mu must be held.
func (r *Registry) compact() {
	kept := r.order[:0]
	for _, id := range r.order {
		if _, ok := r.byID[id]; ok {
			kept = append(kept, id)
		}
	}
	clear(r.order[len(kept):])
	r.order = kept
}

// Delete stops the process with id (see Process.Stop) and removes it.
func (r *Registry) Delete(ctx context.Context, id string) error {
	p, err := r.Get(id)
	if err != nil {
		return err
	}
	if err := p.Stop(ctx); err != nil {
		return err
	}
	r.Remove(id)
	return nil
}

// Filter selects processes in List. Zero fields select everything.
type Filter struct {
	State     State // Running selects Starting and Running; Terminal selects Terminal
	Kind      Kind
	SessionID string
	Name      string
	PID       int
	System    *bool
}

func (f Filter) match(i Info) bool {
	switch {
	case f.State == Terminal && i.State != Terminal,
		(f.State == Running || f.State == Starting) && i.State == Terminal,
		f.Kind != "" && i.Kind != f.Kind,
		f.SessionID != "" && i.SessionID != f.SessionID,
		f.Name != "" && i.Name != f.Name,
		f.PID != 0 && i.PID != f.PID,
		f.System != nil && i.System != *f.System:
		return false
	}
	return true
}

// Count returns how many registered processes match f.
func (r *Registry) Count(f Filter) int {
	n := 0
	for _, p := range r.snapshot(0) {
		if f.match(p.Info()) {
			n++
		}
	}
	return n
}

// List returns at most limit processes matching f, in creation order,
// starting after the opaque cursor (empty: from the first), and the cursor of
// the next page (empty when there is none). limit <= 0 means 100.
func (r *Registry) List(f Filter, cursor string, limit int) ([]Info, string, error) {
	return r.ListFitting(f, cursor, limit, nil)
}

// ListFitting is List whose page also ends before the first process fits
// refuses (fits is called for each process the filter matches, in order;
// the page always holds the first): a caller that bounds a page by the
// size of its answer. A nil fits takes every process.
func (r *Registry) ListFitting(f Filter, cursor string, limit int, fits func(Info) bool) ([]Info, string, error) {
	var after uint64
	if cursor != "" {
		n, err := strconv.ParseUint(cursor, 36, 64)
		r.mu.Lock()
		issued := r.seq
		r.mu.Unlock()
		if err != nil || n > issued {
			// Beyond every cursor issued: not a cursor of this registry
			// ("garbage" is a base-36 number), refused as logs refuse one.
			return nil, "", fmt.Errorf("%w: bad cursor %q", ErrInvalidArgument, cursor)
		}
		after = n
	}
	if limit <= 0 {
		limit = 100
	}
	var out []Info
	for _, e := range r.entriesAfter(after) {
		info := e.p.Info()
		if !f.match(info) {
			continue
		}
		if len(out) == limit || fits != nil && !fits(info) && len(out) > 0 {
			return out, strconv.FormatUint(e.seq-1, 36), nil
		}
		out = append(out, info)
	}
	return out, "", nil
}

// All returns every registered process in creation order.
func (r *Registry) All() []Process { return r.snapshot(0) }

func (r *Registry) snapshot(after uint64) []Process {
	es := r.entriesAfter(after)
	ps := make([]Process, len(es))
	for i, e := range es {
		ps[i] = e.p
	}
	return ps
}

func (r *Registry) entriesAfter(after uint64) []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []entry
	for _, id := range r.order {
		if e, ok := r.byID[id]; ok && e.seq > after {
			es = append(es, e)
		}
	}
	return es
}
