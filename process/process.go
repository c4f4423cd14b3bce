package process

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/conchsh/conch/logstore"
)

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

// Result is how a process ended.
type Result struct {
	Reason   Reason
	ExitCode *int   // set for Exited, and where a code is known for the others
	Signal   string // signal name without "SIG" (TERM, KILL, INT), for Signaled
	Error    string // why, for Failed (and Lost where known)
	// Cwd is, for a session command, the shell's working directory once the
	// command ended, where the next command starts; empty for other
	// processes and where unknown (the command never ran, or its shell died).
	Cwd string
}

// ExitedWith returns the Result of a process that exited with code.
func ExitedWith(code int) Result { return Result{Reason: Exited, ExitCode: &code} }

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
	Argv             []string
	ShellCommand     string
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
