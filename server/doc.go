// Package server serves conch's HTTP API (docs/api.md) over the processes
// and shell sessions it starts: exec and PTY processes from package exec,
// sessions from package shellsession, their output from package logstore.
//
// Handlers return errors; apiError maps engine errors to the API's codes in
// one place and writeError renders them. Every route goes through the same
// wrapper: a recovered panic answers 500 and is logged, the Host and Origin
// headers must name this daemon (no DNS rebinding from a web page), the
// bearer token is compared in constant time, and request bodies are bounded.
// Log streams are server-sent events over [logstore.Log.Follow]; PTYs attach
// over WebSocket. Shutdown stops accepting, ends every process and session
// the server started, descendants included, and waits for them.
//
// Before Shutdown, Drain stops the server from taking new work while the
// work in flight finishes; /livez, /readyz (see Ready) and /metrics serve
// an orchestrator. A surface served beside the API in the same daemon
// drains with it: it refuses new work while Draining (or when BeginWork
// fails with ErrDraining), counts what it has in flight with BeginWork so
// that Drain waits for it, answers its own readiness from Ready, adds its
// metrics to MetricsRegistry, and serves nothing after Shutdown.
package server
