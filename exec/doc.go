// Package exec runs one-shot processes — a shell string or an argv, with or
// without a pseudo-terminal — as [process.Process] values whose output goes to
// a [logstore.Log].
//
// [Start] starts one. A command that fails is a result, not an error: a
// non-zero exit is Result{Reason: Exited, ExitCode: n}, and a program that
// cannot be executed (a missing argv[0]) is a terminal process with reason
// Failed. Start returns an error only for options that are wrong before
// anything runs (a missing cwd, an unknown shell): those wrap
// [process.ErrInvalidArgument].
//
// Every process leads its own session and process group, without a
// controlling terminal (a PTY process has its terminal as its own), and
// carries [proctree.Tag] of its id in its environment, so that a signal
// reaches it and every current descendant, including children that called
// setsid and orphans that were reparented away from it. Children are started
// through [proctree.Start], so a program that reaps orphans as their
// subreaper, as conch serve does, never steals a process's exit status.
//
// The end of a process is its own exit: the result is set then, and its
// output drains for at most [Options.DrainDelay] more, so that a background child
// holding stdout open does not hold up the result (os/exec's WaitDelay does
// the same). Output written after that is not recorded.
//
// A process on pipes costs one goroutine while it runs: it waits in an epoll
// set of its own on both outputs and the process's pidfd, and holds a
// thread there, as a wait for the exit does. It also keeps the process's
// ends of both output pipes open until the exit, so that their hang-up as
// the process exits does not wake it apart from the exit. Where the kernel gives no
// pidfds (before Linux 5.3), and for a PTY process, a goroutine copies each
// output and another waits for the exit.
package exec
