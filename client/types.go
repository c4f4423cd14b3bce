package client

import (
	"time"

	"github.com/conchsh/conch/api"
)

// The wire types of the API, under the names this package has always
// used; package api defines them.
type (
	Process           = api.Process
	WaitResult        = api.WaitResult
	LogFrame          = api.LogFrame
	RunResult         = api.RunResult
	StartOptions      = api.StartOptions
	RunOptions        = api.RunOptions
	SessionOptions    = api.SessionOptions
	CommandOptions    = api.CommandOptions
	CommandRunOptions = api.CommandRunOptions
	KillOptions       = api.KillOptions
	ProcessList       = api.ProcessList
	LogsPage          = api.LogsPage
	Health            = api.Health
	BudgetUse         = api.BudgetUse
	Time              = api.Time
	Millis            = api.Millis
	InteractOptions   = api.InteractOptions
	Ready             = api.Ready
	Limits            = api.Limits
	Usage             = api.Usage
)

// The encodings of a LogFrame's data, and the wire form of a Time.
const (
	EncodingText   = api.EncodingText
	EncodingBase64 = api.EncodingBase64
	TimeLayout     = api.TimeLayout
)

// ListOptions filter and page a process listing. Zero values select
// everything.
type ListOptions struct {
	State     string // running, terminal or all
	Kind      api.Kind
	SessionID string
	Name      string
	PID       int
	Cursor    string
	Limit     int
}

// LogsOptions page a process's logs.
type LogsOptions struct {
	Cursor string // frames after this cursor; empty: from the start
	Limit  int    // at most this many frames; zero: no bound but the page's bytes
	Base64 bool   // force base64 encoding of every frame
}

// ReadyOptions say what GET /v1/processes/{id}/ready waits for: a port
// (a number, or "any"), an output pattern (RE2), or both.
type ReadyOptions struct {
	Port    string
	Pattern string
	Timeout time.Duration
}
