package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Process is the API's ProcessDto: one exec, PTY, session shell or session
// command. Zero optional fields are absent on the wire.
type Process struct {
	ID               string        `json:"id"`
	Name             string        `json:"name,omitempty"`
	PID              int           `json:"pid,omitempty"`
	Kind             Kind          `json:"kind"`
	State            State         `json:"state"`
	System           bool          `json:"system"`
	SessionID        string        `json:"sessionId,omitempty"`
	Argv             []string      `json:"argv,omitempty"`
	ShellCommand     string        `json:"shellCommand,omitempty"`
	Code             string        `json:"code,omitempty"`     // a code cell's text
	Language         string        `json:"language,omitempty"` // a code context's or cell's
	Shell            string        `json:"shell,omitempty"`
	ResolvedShell    string        `json:"resolvedShell,omitempty"`
	Login            bool          `json:"login,omitempty"`
	Cwd              string        `json:"cwd,omitempty"`
	User             string        `json:"user,omitempty"`
	Stdin            Stdin         `json:"stdin"`
	ExecutionTimeout Millis        `json:"executionTimeout,omitempty"`
	Terminal         *TerminalSize `json:"terminal,omitempty"`
	KeepLogs         KeepLogs      `json:"keepLogs"`
	ExitCode         *int          `json:"exitCode,omitempty"`
	Signal           string        `json:"signal,omitempty"`
	Handled          bool          `json:"handled,omitempty"` // as on WaitResult
	Reason           Reason        `json:"reason,omitempty"`
	Error            string        `json:"error,omitempty"`
	CreatedAt        Time          `json:"createdAt"`
	StartedAt        Time          `json:"startedAt,omitzero"`
	ExitedAt         Time          `json:"exitedAt,omitzero"`
	TruncatedHead    bool          `json:"truncatedHead"`
	// FirstAvailableCursor is the cursor of the oldest retained frame.
	FirstAvailableCursor string `json:"firstAvailableCursor,omitempty"`
	// LastCursor is the cursor of the newest frame written.
	LastCursor string `json:"lastCursor,omitempty"`
	// LastOutputAt is the time of the newest frame, absent before any.
	LastOutputAt Time `json:"lastOutputAt,omitzero"`
	// WaitingForInput is true while the process waits for input on its
	// open stdin or terminal.
	WaitingForInput bool `json:"waitingForInput"`
	// Ports are the loopback ports a session leased.
	Ports []int `json:"ports,omitempty"`
	// Limits are, for a session, code context, exec or PTY process, the
	// limits that bound its cgroup: those it was created with, the
	// daemon's defaults for the fields it left zero; absent when none
	// applies, and on session commands and cells.
	Limits *Limits `json:"limits,omitempty"`
	// OOMKilled and Usage are as on WaitResult, once the process ended.
	OOMKilled bool   `json:"oomKilled,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
	// StdinDroppedBytes counts the bytes written to the process's stdin
	// that were still queued, unread, when it ended.
	StdinDroppedBytes int64 `json:"stdinDroppedBytes,omitempty"`
	// ShellCommandBytes is the length of the whole shell command, of which
	// ShellCommand holds at most the first 64 KiB; ShellCommandTruncated
	// says it holds less. CodeBytes and CodeTruncated say the same of Code.
	ShellCommandBytes     int  `json:"shellCommandBytes,omitempty"`
	ShellCommandTruncated bool `json:"shellCommandTruncated,omitempty"`
	CodeBytes             int  `json:"codeBytes,omitempty"`
	CodeTruncated         bool `json:"codeTruncated,omitempty"`
	// ArgvCount is the number of elements of the whole argv, of which
	// Argv holds the first, within 64 KiB (each element counted 32 bytes
	// more than its own); ArgvTruncated says it holds fewer.
	ArgvCount     int  `json:"argvCount,omitempty"`
	ArgvTruncated bool `json:"argvTruncated,omitempty"`
}

// Ended reports whether the process is terminal.
func (p *Process) Ended() bool { return p.State == Terminal }

// WaitResult is how a process ended: the same fields as on Process.
type WaitResult struct {
	Reason   Reason `json:"reason"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Handled is true, for signaled, when the process caught the signal
	// and exited with a status of its own, ExitCode, rather than being
	// ended by it (an exec or PTY process the engine signalled).
	Handled bool `json:"handled,omitempty"`
	// Error says why, for a process that failed (never ran).
	Error string `json:"error,omitempty"`
	// Cwd is, for a session command, the shell's directory after it
	// ended, and for a cell the interpreter's, so that a caller needs no
	// second request to learn it.
	Cwd string `json:"cwd,omitempty"`
	// StdinDroppedBytes counts the bytes written to the process's stdin
	// that were still queued, unread, when it ended.
	StdinDroppedBytes int64 `json:"stdinDroppedBytes,omitempty"`
	// OOMKilled is true when the kernel's OOM killer ended the process at
	// its memory limit.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// Usage is what the process cost.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is what an ended process, command or cell cost.
type Usage struct {
	// CPUMs is user plus system CPU time in milliseconds.
	CPUMs int64 `json:"cpuMs"`
	// MemoryPeakBytes is the most memory it held at once; absent where
	// the daemon has no cgroups.
	MemoryPeakBytes int64 `json:"memoryPeakBytes,omitempty"`
}

// Limits bound a session's, process's or code context's cgroup: all its
// processes together. Zero fields take the daemon's defaults (none unless
// conch serve --default-limits sets them).
type Limits struct {
	// MemoryBytes bounds memory, without swap; past it the OOM killer ends
	// a process.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Pids bounds processes and threads at once; a fork past it fails.
	Pids int64 `json:"pids,omitempty"`
	// CPUMillis is CPU time per second of wall time: 1000 is one core.
	CPUMillis int64 `json:"cpuMillis,omitempty"`
}

// Result returns the WaitResult of a terminal process, or nil.
func (p *Process) Result() *WaitResult {
	if p.Reason == "" {
		return nil
	}
	return &WaitResult{Reason: p.Reason, ExitCode: p.ExitCode, Signal: p.Signal, Handled: p.Handled, Error: p.Error,
		OOMKilled: p.OOMKilled, Usage: p.Usage}
}

// String describes the result the way a shell user reads it.
func (r WaitResult) String() string {
	switch {
	case r.Reason == Exited && r.ExitCode != nil:
		return "exited " + strconv.Itoa(*r.ExitCode)
	case r.Reason == Signaled:
		return "signaled " + r.Signal
	case r.Error != "":
		return string(r.Reason) + ": " + r.Error
	}
	return string(r.Reason)
}

// The encodings of a LogFrame's data.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// LogFrame is one piece of a process's output.
type LogFrame struct {
	// Cursor is opaque and strictly increasing within a process.
	Cursor string `json:"cursor"`
	// Channel is stdout, stderr or pty.
	Channel string `json:"channel"`
	// Data is the bytes as text, or base64 when Encoding says so.
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	// Timestamp is milliseconds since the epoch.
	Timestamp int64 `json:"timestamp"`
}

// Bytes returns the frame's bytes, decoding base64.
func (f LogFrame) Bytes() ([]byte, error) {
	if f.Encoding == EncodingBase64 {
		return base64.StdEncoding.DecodeString(f.Data)
	}
	return []byte(f.Data), nil
}

// RunResult is what a run answers once the process ended: its result and its
// retained output.
type RunResult struct {
	WaitResult
	ProcessID string `json:"processId"`
	// Output is stdout and stderr interleaved as they arrived. The text
	// fields hold the bytes as UTF-8 with invalid sequences replaced; Logs
	// keeps them exact.
	Output string     `json:"output"`
	Stdout string     `json:"stdout"`
	Stderr string     `json:"stderr"`
	Logs   []LogFrame `json:"logs"`
	// Truncated is true when retention dropped the head of the output.
	Truncated bool `json:"truncated"`
	// Next is the cursor of the last frame in the answer: logs after it
	// are the output that came later. An early answer (202) holds back
	// the first bytes of a character that end its output, Next the cursor
	// before them, so that the answer read on from Next has it whole.
	Next string `json:"next"`
	// OmittedBytes is the output bytes left out of the middle of the
	// answer to keep its text within the outputLimit asked for. The whole
	// output is then the frames of Logs up to the one whose cursor is
	// OmittedAfter, followed by the frames of logs pages from OmittedAfter
	// up to the one whose cursor is Next (docs/api.md).
	OmittedBytes int64  `json:"omittedBytes,omitempty"`
	OmittedAfter string `json:"omittedAfter,omitempty"`
	// HeadFrames, when OmittedBytes is not zero, is how many frames of Logs
	// make the head; the rest make the tail (see Head).
	HeadFrames int `json:"headFrames,omitempty"`
	// WaitingForInput is set in an early (202) answer when the process
	// waits for input.
	WaitingForInput bool `json:"waitingForInput,omitempty"`
	// CameBack says why an early (202) answer came: the call's timeout ran
	// out, the process was quiet for its idleTimeout, or it waits for
	// input (CameBackTimeout, CameBackIdle, CameBackInput).
	CameBack string `json:"cameBack,omitempty"`
}

// Why an early (202) run or interact answer came (RunResult.CameBack).
const (
	CameBackTimeout = "timeout"
	CameBackIdle    = "idle_timeout"
	CameBackInput   = "waiting_for_input"
)

// StartOptions start an exec or PTY process: exactly one of Cmd (run by a
// shell) and Argv (no shell); a PTY may have neither, to run the shell.
type StartOptions struct {
	Kind             Kind              `json:"kind,omitempty"` // exec (the default) or pty
	Cmd              string            `json:"cmd,omitempty"`
	Argv             []string          `json:"argv,omitempty"`
	Name             string            `json:"name,omitempty"`
	Cwd              string            `json:"cwd,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	User             string            `json:"user,omitempty"`
	Shell            string            `json:"shell,omitempty"`
	Login            bool              `json:"login,omitempty"`
	Stdin            Stdin             `json:"stdin,omitempty"`
	ExecutionTimeout Millis            `json:"executionTimeout,omitempty"`
	Terminal         *TerminalSize     `json:"terminal,omitempty"`
	KeepLogs         KeepLogs          `json:"keepLogs,omitempty"`
	// Limits bound the process's cgroup.
	Limits *Limits `json:"limits,omitempty"`
}

// RunOptions are StartOptions plus how long the caller waits.
type RunOptions struct {
	StartOptions
	// Timeout bounds the wait; zero waits until the process ends.
	Timeout Millis `json:"timeout,omitempty"`
	// IdleTimeout ends the wait once the process has written nothing for
	// this long; zero: no idle bound.
	IdleTimeout Millis `json:"idleTimeout,omitempty"`
	// Plain asks for the text fields as plain text: escape sequences
	// removed, carriage-return and backspace overwrites applied.
	Plain bool `json:"plain,omitempty"`
	// OutputLimit bounds the output in the answer (bytes): a longer output
	// keeps its head and tail, about half each, and RunResult says what it
	// left out. Zero means 1 MiB; more than the daemon's retention means the
	// retention.
	OutputLimit int64 `json:"outputLimit,omitempty"`
}

// SessionOptions create a session.
type SessionOptions struct {
	Name  string            `json:"name,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Shell string            `json:"shell,omitempty"` // bash when empty
	Login bool              `json:"login,omitempty"`
	// Language makes the session a code context running that language's
	// interpreter (python, javascript) instead of a shell.
	Language string `json:"language,omitempty"`
	// LeasePort leases one free loopback port, reported in Process.Ports.
	LeasePort bool `json:"leasePort,omitempty"`
	// Limits bound the session's cgroup: its shell or interpreter and
	// everything its commands start.
	Limits *Limits `json:"limits,omitempty"`
	// UniqueName makes Name a session's own while it runs: a running
	// session of that name refuses the creation with already_exists, and
	// of two creations of one name at once the second waits for the first
	// and is refused if it made the session.
	UniqueName bool `json:"uniqueName,omitempty"`
}

// CommandOptions submit a command to a session.
type CommandOptions struct {
	// Cmd is a shell session's command; Code is a code context's cell. A
	// body must give one of them: cmd is always sent, so that an empty
	// command is one ("" runs as in a terminal), where a body that gives
	// neither is refused.
	Cmd              string   `json:"cmd"`
	Code             string   `json:"code,omitempty"`
	Name             string   `json:"name,omitempty"`
	Stdin            Stdin    `json:"stdin,omitempty"`
	ExecutionTimeout Millis   `json:"executionTimeout,omitempty"`
	KeepLogs         KeepLogs `json:"keepLogs,omitempty"`
}

// CommandRunOptions are CommandOptions plus how long the caller waits.
type CommandRunOptions struct {
	CommandOptions
	// Timeout bounds the wait; zero waits until the command ends.
	Timeout Millis `json:"timeout,omitempty"`
	// IdleTimeout and Plain are as for RunOptions.
	IdleTimeout Millis `json:"idleTimeout,omitempty"`
	Plain       bool   `json:"plain,omitempty"`
	// OutputLimit is as for RunOptions.
	OutputLimit int64 `json:"outputLimit,omitempty"`
}

// KillOptions choose the signal of a kill. Zero values mean TERM, no
// escalation, and KILL as the escalation signal.
type KillOptions struct {
	Signal        string `json:"signal,omitempty"`
	EscalateAfter Millis `json:"escalateAfter,omitempty"`
	EscalateTo    string `json:"escalateTo,omitempty"`
}

// ProcessList is one page of processes; Next is empty on the last page.
type ProcessList struct {
	Items []Process `json:"items"`
	Next  string    `json:"next"`
}

// LogsPage is one page of a process's frames.
type LogsPage struct {
	Items []LogFrame `json:"items"`
	// Next is the cursor to ask for the following page.
	Next string `json:"next"`
	// TruncatedHead is true when frames after the cursor asked for were
	// dropped by retention.
	TruncatedHead        bool   `json:"truncatedHead"`
	FirstAvailableCursor string `json:"firstAvailableCursor,omitempty"`
}

// Health is the answer of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	// Containment is "cgroup2" when every session, process and code
	// context runs in a cgroup of its own, "none" when the daemon has no
	// writable cgroup v2 hierarchy (ContainmentReason says why).
	Containment       string `json:"containment,omitempty"`
	ContainmentReason string `json:"containmentReason,omitempty"`
	// LimitControllers says, for each limit's controller the host can
	// apply (memory, pids, cpu), whether through cgroup "v2" or "v1"; a
	// limit whose controller is absent is refused.
	LimitControllers map[string]string `json:"limitControllers,omitempty"`
	// Budgets are the daemon's bounds on what it keeps for others, with
	// what each holds now.
	Budgets []BudgetUse `json:"budgets,omitempty"`
	// MemoryLimit is the Go memory limit the daemon sets from the sum of
	// its budgets, in bytes.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
}

// BudgetUse is one of the daemon's budgets: its name (logs, stdin,
// endedRecords), the flag of conch serve that sets it, its unit (bytes or
// records), its limit and what it holds now.
type BudgetUse struct {
	Name  string `json:"name"`
	Flag  string `json:"flag"`
	Unit  string `json:"unit"`
	Limit int64  `json:"limit"`
	Used  int64  `json:"used"`
}

// Time is a time that travels as RFC 3339 with milliseconds.
type Time struct{ time.Time }

// TimeLayout is the wire form of a Time.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes t in TimeLayout, in UTC.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// Millis is a duration that travels as whole milliseconds.
type Millis time.Duration

// Duration returns m as a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) }

// MarshalJSON writes m as an integer count of milliseconds, a positive
// duration under one as 1: 0 means none (no timeout), and 999µs sent as 0
// waited for good.
func (m Millis) MarshalJSON() ([]byte, error) {
	ms := time.Duration(m).Milliseconds()
	if ms == 0 && m > 0 {
		ms = 1
	}
	return strconv.AppendInt(nil, ms, 10), nil
}

// maxMillis is the most milliseconds a time.Duration holds (292 years).
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// UnmarshalJSON reads a non-negative count of milliseconds; null is zero.
// Its errors say what the value should be and what it is, in JSON's terms,
// for the daemon to put after the name of the field.
func (m *Millis) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		if string(b) == "null" {
			*m = 0
			return nil
		}
		return fmt.Errorf("want a number of milliseconds, got %s", jsonKind(b))
	}
	var n float64
	err := json.Unmarshal(b, &n) // fails only past float64's range
	// A number too small for a float64 (1e-400) reads as 0: its digits
	// say whether it was.
	some := n != 0 || nonzeroDigits(b)
	if err != nil || n < 0 || (some && b[0] == '-') || n > float64(maxMillis) {
		return fmt.Errorf("want a number of milliseconds from 0 to %d, got %s", maxMillis, Clip(b))
	}
	d := time.Duration(n * float64(time.Millisecond))
	if d == 0 && some {
		d = 1 // a timeout, however short: 0 would be none
	}
	*m = Millis(d)
	return nil
}

// nonzeroDigits reports whether the JSON number b has a digit other than
// 0 before its exponent: whether it is other than zero.
func nonzeroDigits(b []byte) bool {
	for _, c := range b {
		switch {
		case c == 'e' || c == 'E':
			return false
		case '1' <= c && c <= '9':
			return true
		}
	}
	return false
}

// jsonKind names the JSON type of the value b that is not a number.
func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '"':
		return "a string"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	}
	return "null"
}

// clipLen is the most bytes of a value Clip keeps.
const clipLen = 40

// Clip returns b, a JSON value quoted in an error message (a number a
// field does not take), cut to its first 40 bytes followed by "..." when
// longer: a number may be a megabyte of digits.
func Clip(b []byte) string {
	if len(b) <= clipLen {
		return string(b)
	}
	return string(b[:clipLen]) + "..."
}

// quoteLen is the most bytes of a string Quote keeps.
const quoteLen = 256

// Quote returns s quoted (see strconv.Quote) for an error message, cut to
// its first 256 bytes, at a character boundary, followed by "..." when
// longer: a value a client sent (a cwd, a shell) may be megabytes long, and
// an error quoting it whole is an answer as long.
func Quote(s string) string {
	if len(s) <= quoteLen {
		return strconv.Quote(s)
	}
	n := quoteLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "..."
}

// InteractOptions answer a running process, wait and read on
// (POST /v1/processes/{id}/interact).
type InteractOptions struct {
	// Input is written to stdin or the terminal first; InputBase64 is the
	// same as bytes.
	Input       string `json:"input,omitempty"`
	InputBase64 string `json:"inputBase64,omitempty"`
	// EOF closes stdin after the input.
	EOF bool `json:"eof,omitempty"`
	// Signal is sent before waiting (INT, TERM, ...).
	Signal string `json:"signal,omitempty"`
	// Cursor: the answer holds the output after it. Empty: the output
	// that arrives after the input was written.
	Cursor      string `json:"cursor,omitempty"`
	Timeout     Millis `json:"timeout,omitempty"`
	IdleTimeout Millis `json:"idleTimeout,omitempty"`
	OutputLimit int64  `json:"outputLimit,omitempty"`
	Plain       bool   `json:"plain,omitempty"`
}

// Ready is a 200 answer of the ready route.
type Ready struct {
	Ready  bool   `json:"ready"`
	Port   int    `json:"port,omitempty"`
	Match  string `json:"match,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// Result is how the process ended, when it ended first (Ready false).
	Result *WaitResult `json:"result,omitempty"`
	// Truncated, when it ended first, says that retention or the log
	// budget dropped output before the wait matched it: the pattern may
	// have been there.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxNameBytes bounds the name of a process, session, command or cell: the
// daemon keeps a name in its record and in every listing of it, outside the
// budgets, so a 15 MiB name in each of 20 processes took 400 MB. A longer
// one is 400 invalid_argument.
const MaxNameBytes = 1024

// Head returns how many frames of r.Logs make the head of a cut output
// (HeadFrames, held to the frames there are); the rest make the tail.
func (r *RunResult) Head() int { return min(max(r.HeadFrames, 0), len(r.Logs)) }
