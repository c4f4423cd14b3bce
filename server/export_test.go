package server

import (
	"net/http"
	"time"

	"github.com/conchsh/conch/process"
)

// SetHeartbeat shortens the keep-alive period of s's streams.
func SetHeartbeat(s *Server, d time.Duration) { s.heartbeat = d }

// SetWriteTimeout shortens the time a stream event has to reach its client.
func SetWriteTimeout(s *Server, d time.Duration) { s.writeTimeout = d }

// LogBudgetUsed returns the bytes the logs of s's processes retain, as its
// log budget counts them.
func LogBudgetUsed(s *Server) int64 { return s.budget.Used() }

// WriteRunAnswer writes the answer of a run of p, as POST .../run does
// once it has waited, with the default output limit.
func WriteRunAnswer(s *Server, w http.ResponseWriter, p process.Process) error {
	return s.writeRunAnswer(w, p, runAnswer{limit: DefaultOutputLimit})
}
