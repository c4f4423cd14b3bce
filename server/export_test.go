package server

import "time"

// SetHeartbeat shortens the keep-alive period of s's streams.
func SetHeartbeat(s *Server, d time.Duration) { s.heartbeat = d }
