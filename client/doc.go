// Package client talks to a conch daemon (conch serve) over its HTTP API: it
// starts and watches processes and sessions, pages and follows their logs,
// and attaches to PTYs. The wire contract is docs/api.md; its JSON shapes
// are package api's types, which this package names as its own. The client
// imports nothing of the engine.
//
// A Client is safe for concurrent use. Every call takes a context; an API
// error comes back as an *Error whose Code is one of the Code constants.
//
// A Client sends no request twice but a GET whose kept connection the
// daemon had closed: a refusal (CodeDraining while the daemon drains,
// CodeResourceExhausted over a limit) created nothing, and Error.RetryAfter
// says when it may be sent again; a request whose connection broke after it
// was written is an error, since the daemon may have carried it out. A call
// has no time bound but its context's: give it a deadline, or a daemon
// that accepts the connection and never answers holds it for as long.
package client
