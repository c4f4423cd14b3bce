package server

import (
	"encoding/base64"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// processDTO describes p as the API's ProcessDto.
func (s *Server) processDTO(p process.Process) api.Process {
	i := p.Info()
	d := api.Process{
		ID:               i.ID,
		Name:             i.Name,
		PID:              i.PID,
		Kind:             i.Kind,
		State:            i.State,
		System:           i.System,
		SessionID:        i.SessionID,
		Argv:             i.Argv,
		ShellCommand:     i.ShellCommand,
		Code:             i.Code,
		Language:         i.Language,
		Shell:            i.Shell,
		ResolvedShell:    i.ResolvedShell,
		Login:            i.Login,
		Cwd:              i.Cwd,
		User:             i.User,
		Stdin:            i.Stdin,
		ExecutionTimeout: api.Millis(i.ExecutionTimeout),
		Terminal:         i.Terminal,
		KeepLogs:         i.KeepLogs,
		CreatedAt:        api.Time{Time: i.CreatedAt},
		StartedAt:        api.Time{Time: i.StartedAt},
		ExitedAt:         api.Time{Time: i.ExitedAt},
		Ports:            i.Ports,

		StdinDroppedBytes: i.StdinDroppedBytes,

		ShellCommandBytes:     i.ShellCommandBytes,
		ShellCommandTruncated: i.ShellCommandBytes > len(i.ShellCommand),
		ArgvCount:             i.ArgvCount,
		ArgvTruncated:         i.ArgvCount > len(i.Argv),
		CodeBytes:             i.CodeBytes,
		CodeTruncated:         i.CodeBytes > len(i.Code),
	}
	if d.Stdin == "" {
		d.Stdin = process.StdinClosed
	}
	if d.KeepLogs == "" {
		d.KeepLogs = logstore.KeepUntilCleanup
	}
	if i.Result != nil {
		d.Reason = i.Result.Reason
		d.ExitCode = i.Result.ExitCode
		d.Signal = i.Result.Signal
		d.Handled = i.Result.Handled
		d.Error = i.Result.Error
		d.OOMKilled = i.Result.OOMKilled
		d.Usage = usageDTO(i.Result.Usage)
	}
	truncated, first, last := p.Log().Bounds()
	d.TruncatedHead = truncated
	if first > 0 {
		d.FirstAvailableCursor = first.String()
	}
	if last > 0 {
		d.LastCursor = last.String()
	}
	d.LastOutputAt = api.Time{Time: p.Log().LastFrameTime()}
	d.WaitingForInput = s.input(p.ID()).Waiting()
	if i.Kind == process.KindSession && i.System {
		// What bounds a session, on every route that shows it (the
		// processes' too); its commands, of the same kind, have none,
		// and their answers take no lock for it.
		if e, ok := s.sessionOf(i.ID); ok && e.limits != nil {
			l := *e.limits
			d.Limits = &l
		}
	} else if lp, ok := p.(limited); ok {
		d.Limits = apiLimits(lp.Limits())
	}
	return d
}

// limited is a process with a cgroup of its own (an exec or PTY process):
// Limits are those that bound it.
type limited interface{ Limits() containment.Limits }

// waitResult is the API's WaitResult of a terminal process described by i.
func waitResult(i process.Info) api.WaitResult {
	r := i.Result
	return api.WaitResult{Reason: r.Reason, ExitCode: r.ExitCode, Signal: r.Signal, Handled: r.Handled, Error: r.Error, Cwd: r.Cwd,
		OOMKilled: r.OOMKilled, Usage: usageDTO(r.Usage), StdinDroppedBytes: i.StdinDroppedBytes}
}

// usageDTO is the API's Usage of u, nil for nil.
func usageDTO(u *process.Usage) *api.Usage {
	if u == nil {
		return nil
	}
	return &api.Usage{CPUMs: u.CPU.Milliseconds(), MemoryPeakBytes: u.MemoryPeak}
}

// frameDTO is the API's LogFrame of f: text when its bytes are UTF-8 and
// base64 was not asked for.
func frameDTO(f *logstore.Frame, forceBase64 bool) api.LogFrame {
	lf := api.LogFrame{
		Cursor:    f.Cursor.String(),
		Channel:   f.Channel.String(),
		Timestamp: f.Time.UnixMilli(),
	}
	if !forceBase64 && f.IsText() {
		lf.Data, lf.Encoding = string(f.Data), api.EncodingText
	} else {
		lf.Data, lf.Encoding = base64.StdEncoding.EncodeToString(f.Data), api.EncodingBase64
	}
	return lf
}
