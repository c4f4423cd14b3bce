package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// headerBudget bounds the bytes of requests' lines and headers being read
// at once, past the first headerFree of each: net/http reads them whole,
// up to 1 MiB and 4 KiB more, before any handler runs, and holds them until
// ReadHeaderTimeout (10 s) when the client stops before their end. 100
// connections so took 94 MB, and --max-connections (4096) of them would
// take 4 GB. A connection whose headers would take the budget past its
// limit is closed, unanswered, as one that stops for the timeout is.
type headerBudget struct {
	used  atomic.Int64
	limit int64
}

const (
	// headerFree is what a request's line and headers may take before
	// they count: no client's everyday request does.
	headerFree = 16 << 10
	// headerLimit is the budget's: 64 requests at the header limit.
	headerLimit = 64 << 20
)

// errHeadersOverBudget ends the reading of a request whose headers would
// take the budget past its limit.
var errHeadersOverBudget = errors.New("the request headers being read at once are over their budget")

// headerPhase is a connection's part in the budget: whether it reads a
// request's line and headers now, what it read of them, and what of that
// it holds of the budget.
type headerPhase struct {
	budget  *headerBudget // nil: not counted
	mu      sync.Mutex
	reading bool
	read    int64
	held    int64
}

// count counts n more bytes read by the connection, and reports false when
// they are headers past the budget.
func (h *headerPhase) count(n int) bool {
	if h.budget == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.reading {
		return true
	}
	h.read += int64(n)
	if add := h.read - headerFree - h.held; add > 0 {
		if h.budget.used.Add(add) > h.budget.limit {
			h.budget.used.Add(-add)
			return false
		}
		h.held += add
	}
	return true
}

// begin starts the reading of the connection's next request.
func (h *headerPhase) begin() { h.set(true) }

// end ends the reading of its headers (the handler runs, or the connection
// closed).
func (h *headerPhase) end() { h.set(false) }

// set gives back what the headers read held, and starts or ends reading.
func (h *headerPhase) set(reading bool) {
	if h.budget == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.budget.used.Add(-h.held)
	h.reading, h.read, h.held = reading, 0, 0
}

// connKey is the context key under which a request finds its connection.
type connKey struct{}

// withConn is the http.Server's ConnContext: a request's handler finds its
// connection there, to end its headers' part in the budget.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connState is the http.Server's ConnState: a connection that goes idle
// after an answer reads its next request's headers from its next byte on,
// and is idle (see idleConns) from then until its next request's headers
// are read.
func connState(c net.Conn, st http.ConnState) {
	jc, ok := c.(*jsonErrorConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive:
		jc.refused.Store(false)
		jc.idleSince.Store(0) // serving: not to be closed to make room
	case http.StateIdle:
		jc.headers.begin()
		jc.refused.Store(false)
		if jc.idle != nil {
			jc.idleSince.Store(jc.idle.now())
			jc.idle.wentIdle()
		}
	case http.StateHijacked, http.StateClosed:
		jc.headers.end()
		jc.idleSince.Store(0)
	}
}

// headersRead ends the headers' part in the budget of the request's
// connection, as its handler starts. A connection that took its
// listener's spare descriptor (see spareFD) is closed after the answer,
// to give the spare back for the next client; its request came, which
// its reads may have missed (the end of its headers split between two),
// so that the bound of its wait for one (spareHeaders) does not cut off
// the answer with a 429.
func headersRead(w http.ResponseWriter, r *http.Request) {
	if jc, ok := r.Context().Value(connKey{}).(*jsonErrorConn); ok {
		jc.headers.end()
		if jc.spare != nil {
			jc.spareAsked.Store(true)
			w.Header().Set("Connection", "close")
		}
	}
}
