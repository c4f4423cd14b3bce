// Package localsandbox is a local sandbox session for agent harnesses: a
// working directory plus one leased loopback port, with commands run and
// spawned in that directory, file helpers, and a shutdown that leaves nothing
// it started running.
//
// The shutdown sends SIGTERM, then SIGKILL to what is still running after a
// grace (see Session.Stop); a process that both left the command's tree and
// cleared its environment is out of its reach. A harness that ends without
// Stop, however it ends (SIGKILL too), takes what its sessions still run
// with it, as far as it stayed in their process groups: the engine's
// guardian process kills those groups once the harness is gone.
//
// A harness creates one Session per sandbox with New, binds its bridge server
// to the port in Session.Ports, hands Session.Restricted to the code that
// should run commands but not end the sandbox, and calls Session.Stop when it
// is done.
//
// Commands run with /bin/bash -c. A command that fails is a result
// (RunResult.ExitCode), not a Go error; a Go error means the command could
// not be run at all, or the context ended it, or the session was stopped.
// A nil context is such an error too (pass context.Background() for none),
// never a panic.
//
// The file helpers resolve a relative path against the session's directory,
// as a command run there would (the kernel resolves the path, which is not
// cleaned first), but do not confine paths to it: an absolute path, "..",
// or a symbolic link reaches anywhere the calling user can. The sandbox is a convenience boundary for the
// harness, not a security boundary.
//
// Port leases are coordinated between processes on one machine, not only
// within one: each leased port is held by an advisory lock on a file in a
// shared directory (see package portlease), which the kernel drops when the process
// holding it exits, however it exits.
package localsandbox
