package process

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"

	"github.com/conchsh/conch/logstore"
)

// Kind says how a process was started.
type Kind = api.Kind

// The kinds of process.
const (
	KindExec    = api.KindExec
	KindPTY     = api.KindPTY
	KindCode    = api.KindCode
	KindSession = api.KindSession
)

// State is where a process is in its life. It only moves forward.
type State = api.State

// The states of a process.
const (
	Starting = api.Starting // accepted, not running yet (a queued session command)
	Running  = api.Running
	Terminal = api.Terminal
)

// Reason says why a terminal process ended.
type Reason = api.Reason

// The reasons a process ends.
const (
	Exited   = api.Exited   // it exited by itself; ExitCode is set
	Signaled = api.Signaled // a signal ended it; Signal is set
	TimedOut = api.TimedOut // its execution timeout was reached
	Lost     = api.Lost     // the engine lost it (its session's shell died under it)
	Failed   = api.Failed   // it never ran; Error says why
)

// Result is how a process ended.
type Result struct {
	Reason   Reason
	ExitCode *int   // set for Exited, and where a code is known for the others
	Signal   string // signal name without "SIG" (TERM, KILL, INT), for Signaled
	// Handled is set, for Signaled, when the process exited with its own
	// status after the signal reached it (a handler's exit 143), rather
	// than being ended by it: ExitCode is then what it chose.
	Handled bool
	// Error says why, for Failed (and Lost where known); for a command or
	// cell that ended otherwise, why Cwd is empty (sentinel.CwdTooLong);
	// for a session whose shell ended by itself while no command ran (an
	// idle bash with TMOUT set logs out), that it did, how, and what the
	// shell said last.
	Error string
	// Cwd is, for a session command, the shell's working directory once the
	// command ended, where the next command starts, and for a cell the
	// interpreter's; empty for other processes and where unknown (the
	// command never ran, or its shell or interpreter died) or its path is
	// longer than the engine reports (sentinel.MaxCwd).
	Cwd string
	// OOMKilled is true when the kernel's OOM killer ended the process (or,
	// for a session, its shell) at its cgroup's memory limit.
	OOMKilled bool
	// Usage is what the process cost; nil when it never ran.
	Usage *Usage
}

// Usage is what a process, command or cell cost while it ran.
type Usage struct {
	// CPU is user plus system time of its cgroup (a session command's
	// includes its shell's share) or, without cgroups, of the process and
	// the children it reaped.
	CPU time.Duration
	// MemoryPeak is the most memory its cgroup held at once, in bytes;
	// zero when unknown (no cgroups).
	MemoryPeak int64
}

// ExitedWith returns the Result of a process that exited with code.
func ExitedWith(code int) Result { return Result{Reason: Exited, ExitCode: &code} }

// Stdin says whether a process reads bytes written through the API.
type Stdin = api.Stdin

// Stdin modes. The zero value means StdinClosed.
const (
	StdinClosed = api.StdinClosed
	StdinOpen   = api.StdinOpen
)

// TerminalSize is the size of a PTY in character cells.
type TerminalSize = api.TerminalSize

// Info describes a process at one moment. Pointer and zero fields are the
// optional fields of the API's ProcessDto.
type Info struct {
	ID               string
	Name             string
	PID              int
	Kind             Kind
	State            State
	System           bool // a session's own shell
	SessionID        string
	Argv             []string // at most its first elements within KeptText; see ArgvCount
	ShellCommand     string   // at most its first KeptText bytes; see ShellCommandBytes
	Code             string   // a code cell's text: at most its first KeptText bytes; see CodeBytes
	Language         string   // a code context's or cell's language: python, javascript
	Shell            string
	ResolvedShell    string
	Login            bool
	Cwd              string
	User             string
	Stdin            Stdin
	ExecutionTimeout time.Duration
	Terminal         *TerminalSize
	KeepLogs         logstore.KeepLogs
	Result           *Result // set once State is Terminal
	CreatedAt        time.Time
	StartedAt        time.Time
	ExitedAt         time.Time
	Ports            []int
	// ShellCommandBytes and CodeBytes are the lengths of the whole
	// ShellCommand and Code, which the record keeps the first KeptText
	// bytes of.
	ShellCommandBytes, CodeBytes int
	// ArgvCount is the number of elements of the whole argv, of which Argv
	// holds the first within KeptText (see KeepArgv).
	ArgvCount int
	// StdinDroppedBytes counts the bytes written to the process's stdin
	// that were still queued, unread, when it ended.
	StdinDroppedBytes int64
}

// Process is one process of any kind, as the registry and the HTTP layer see it.
type Process interface {
	// ID returns the process's id, unique within the registry.
	ID() string
	// Info returns a snapshot of the process's description and state.
	Info() Info
	// Log returns the process's output.
	Log() *logstore.Log
	// Done is closed once the process is terminal and its log is closed.
	Done() <-chan struct{}
	// Kill sends sig to the process and its descendants and, when
	// escalateAfter is positive, escalateTo if it is still running then.
	Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error
	// WriteStdin writes to the process's stdin; ErrStdinNotOpen when it is closed.
	WriteStdin(p []byte) error
	// CloseStdin closes the process's stdin; ErrStdinNotOpen when it is closed.
	CloseStdin() error
	// Resize changes a PTY's size; ErrNotPTY for other processes.
	Resize(size TerminalSize) error
	// Stop ends the process (TERM, then KILL after a grace) and waits until it
	// is terminal or ctx is done. The registry calls it before removing it.
	Stop(ctx context.Context) error
}

// Errors shared by every kind of process. The HTTP layer maps them to codes;
// use errors.Is to test for them.
var (
	ErrNotFound        = errors.New("not found")
	ErrStdinNotOpen    = errors.New("stdin is not open")
	ErrNotPTY          = errors.New("not a PTY process")
	ErrUnsupported     = errors.New("unsupported operation")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrLimit           = errors.New("limit reached")
)

// Wait blocks until p is terminal or ctx is done, and returns its result.
func Wait(ctx context.Context, p Process) (Result, error) {
	select {
	case <-p.Done():
		return *p.Info().Result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}
