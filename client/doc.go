// Package client talks to a conch daemon (conch serve) over its HTTP API: it
// starts and watches processes and sessions, pages and follows their logs,
// and attaches to PTYs. The wire contract is docs/api.md; its JSON shapes
// are package api's types, which this package names as its own. The client
// imports nothing of the engine.
//
// A Client is safe for concurrent use. Every call takes a context; an API
// error comes back as an *Error whose Code is one of the Code constants.
package client
