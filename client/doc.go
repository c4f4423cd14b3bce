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
// that accepts the connection and never answers holds it for as long. The
// deadline bounds the whole answer, its headers and body together, not
// each read: an answer trickled a byte at a time ends with it.
//
// What a call reads is bounded too, so that a server that is not the
// daemon (or a daemon gone wrong) cannot grow a client's memory: an
// answer's headers at 1 MiB (its interim answers' with them), its body at
// MaxAnswer (a Content-Length over it fails at once), a log stream's event
// at 4 MiB, and an attachment's message at 1 MiB. A body that is not the
// JSON of its route (nested past encoding/json's depth of 10000, or of the
// wrong types) is an error that names the route; text that is not UTF-8
// comes as U+FFFD.
package client
