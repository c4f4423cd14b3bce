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
package server
