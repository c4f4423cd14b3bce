package server

import "time"

// SetHeartbeat shortens the keep-alive period of s's streams.
func SetHeartbeat(s *Server, d time.Duration) { s.heartbeat = d }

// SetWriteTimeout shortens the time a stream event has to reach its client.
func SetWriteTimeout(s *Server, d time.Duration) { s.writeTimeout = d }

// LogBudgetUsed returns the bytes the logs of s's processes retain, as its
// log budget counts them.
func LogBudgetUsed(s *Server) int64 { return s.budget.Used() }
