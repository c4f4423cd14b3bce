package api

// Kind says how a process was started.
type Kind string

// The kinds of process.
const (
	KindExec    Kind = "exec"
	KindPTY     Kind = "pty"
	KindCode    Kind = "code"
	KindSession Kind = "session"
)

// State is where a process is in its life. It only moves forward.
type State string

// The states of a process.
const (
	Starting State = "starting" // accepted, not running yet (a queued session command)
	Running  State = "running"
	Terminal State = "terminal"
)

// Reason says why a terminal process ended.
type Reason string

// The reasons a process ends.
const (
	Exited   Reason = "exited"    // it exited by itself; ExitCode is set
	Signaled Reason = "signaled"  // a signal ended it; Signal is set
	TimedOut Reason = "timed_out" // its execution timeout was reached
	Lost     Reason = "lost"      // the engine lost it (its session's shell died under it)
	Failed   Reason = "failed"    // it never ran; Error says why
)

// Stdin says whether a process reads bytes written through the API.
type Stdin string

// Stdin modes. The zero value means StdinClosed.
const (
	StdinClosed Stdin = "closed"
	StdinOpen   Stdin = "open"
)

// TerminalSize is the size of a PTY in character cells.
type TerminalSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// KeepLogs is a retention policy for a process's frames.
type KeepLogs string

// The keep-logs policies. The zero value means KeepUntilCleanup.
const (
	KeepUntilCleanup KeepLogs = "until_cleanup" // until the process is deleted
	KeepOnExitTTL    KeepLogs = "on_exit_ttl"   // until a configured time after exit
	KeepNone         KeepLogs = "none"          // no frames kept; live followers still get them
)
