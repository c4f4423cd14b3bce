package server

import (
	"context"
	"github.com/conchsh/conch/internal/rawnet"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/portlease"
	"github.com/conchsh/conch/process"
)

// SetHeartbeat shortens the keep-alive period of s's streams.
func SetHeartbeat(s *Server, d time.Duration) { s.heartbeat.Store(int64(d)) }

// SetWriteTimeout shortens the time a stream event has to reach its client.
func SetWriteTimeout(s *Server, d time.Duration) { s.writeTimeout.Store(int64(d)) }

// SetBodyIdle shortens the wait for each next byte of a request body.
func SetBodyIdle(s *Server, d time.Duration) { s.bodyIdle.Store(int64(d)) }

// SetBodyGrace shortens the time a request body may come slowly in before
// it must keep to the least rate.
func SetBodyGrace(s *Server, d time.Duration) { s.bodyGrace.Store(int64(d)) }

// SetLeasePort makes s lease sessions' ports with lease.
func SetLeasePort(s *Server, lease func() (*portlease.Lease, error)) { s.leasePort.Store(&lease) }

// LogBudgetUsed returns the bytes the logs of s's processes hold, as its
// log budget counts them: their output and their frame tables.
func LogBudgetUsed(s *Server) int64 { return s.budget.Used() }

// WriteRunAnswer writes the answer of a run of p, as POST .../run does
// once it has waited, with the default output limit.
func WriteRunAnswer(s *Server, w http.ResponseWriter, p process.Process) error {
	return s.writeRunAnswer(w, p, runAnswer{limit: DefaultOutputLimit})
}

// EndedOrder returns how many ids the order of ended records of s holds
// (kept ones and forgotten ones not yet dropped) and how many records it
// keeps.
func EndedOrder(s *Server) (order, kept int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ended.order) - s.ended.head, len(s.ended.live)
}

// StreamFrames follows l as a stream's follower does, and returns the data
// of each frame it hands over, in turn, on frames, until ctx ends.
func StreamFrames(ctx context.Context, l *logstore.Log) <-chan string {
	frames := make(chan string)
	events, done := follow(ctx, l, 0)
	go func() {
		defer close(frames)
		for ev := range events {
			if ev.End {
				continue
			}
			if ev.Frame != nil {
				select {
				case frames <- string(ev.Frame.Data):
				case <-ctx.Done():
				}
			}
			ev.back <- struct{}{}
		}
		<-done
	}()
	return frames
}

// HungUp reports what the attach handler's pinger is told of c's peer, c
// wrapped as the daemon's listener wraps the connections it accepts.
func HungUp(c net.Conn) bool { return hungUp(&jsonErrorConn{Conn: rawnet.Of(c)}) }

// SetReadRest bounds what the daemon reads of a body its answer did not
// need: at most n bytes, for at most d.
func SetReadRest(s *Server, n int64, d time.Duration) {
	s.restBytes.Store(n)
	s.restFor.Store(int64(d))
}

// PortLooks returns how many looks s made at the ports of processes that
// ready calls wait on.
func PortLooks(s *Server) int64 { return s.ports.looks.Load() }

// PortWaiters returns how many ready calls of s wait on the ports of the
// process id.
func PortWaiters(s *Server, id string) int {
	s.ports.mu.Lock()
	defer s.ports.mu.Unlock()
	if g := s.ports.groups[id]; g != nil {
		return g.waiters
	}
	return 0
}

// InteractLines returns how many processes s keeps a line of interact
// calls for.
func InteractLines(s *Server) int {
	n := 0
	s.interacts.Range(func(any, any) bool { n++; return true })
	return n
}

// MetricsMaxConnections bounds the metrics listener's connections.
const MetricsMaxConnections = metricsMaxConnections

// SetMetricsWriteTimeout sets how long the metrics listener gives a
// request's answer, from its headers read to its last byte written.
func SetMetricsWriteTimeout(s *Server, d time.Duration) { s.ms.WriteTimeout = d }

// SpareHeld reports whether the API listener holds its spare descriptor.
func SpareHeld(s *Server) bool {
	sp := s.spare.Load()
	return sp != nil && sp.held()
}

// SetRefuseTimes bounds the reading of a connection s refuses past
// MaxConnections: total in all, idle for each wait for its client.
func SetRefuseTimes(s *Server, total, idle time.Duration) {
	s.refuse.total.Store(int64(total))
	s.refuse.idle.Store(int64(idle))
}

// SetDrainLinger sets how long a drain of s goes on once the last of its
// work, and the last request about it, is over.
func SetDrainLinger(s *Server, d time.Duration) { s.linger.Store(int64(d)) }

// EncodeField returns the member name: v as an answer's encoder writes it.
func EncodeField(name string, v any) (string, error) {
	rec := httptest.NewRecorder()
	e := newEncoder(rec, http.StatusOK, 0)
	e.field(name, v)
	err := e.flush()
	return rec.Body.String(), err
}
