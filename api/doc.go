// Package api holds the wire types of conch's HTTP API (docs/api.md): the
// processes, options, results, frames, events and error codes that the daemon
// answers and takes, in their JSON shapes. The daemon and the Go client both
// use it, and it imports nothing of the engine, so a program that only calls
// the daemon does not carry the engine with it. The engine's own packages
// (process, logstore) name these enums as their own.
package api
