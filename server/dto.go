package server

import (
	"encoding/base64"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// processDTO describes p as the API's ProcessDto.
func (s *Server) processDTO(p process.Process) client.Process {
	i := p.Info()
	d := client.Process{
		ID:               i.ID,
		Name:             i.Name,
		PID:              i.PID,
		Kind:             i.Kind,
		State:            i.State,
		System:           i.System,
		SessionID:        i.SessionID,
		Argv:             i.Argv,
		ShellCommand:     i.ShellCommand,
		Shell:            i.Shell,
		ResolvedShell:    i.ResolvedShell,
		Login:            i.Login,
		Cwd:              i.Cwd,
		User:             i.User,
		Stdin:            i.Stdin,
		ExecutionTimeout: client.Millis(i.ExecutionTimeout),
		Terminal:         i.Terminal,
		KeepLogs:         i.KeepLogs,
		CreatedAt:        client.Time{Time: i.CreatedAt},
		StartedAt:        client.Time{Time: i.StartedAt},
		ExitedAt:         client.Time{Time: i.ExitedAt},
		Ports:            i.Ports,
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
		d.Error = i.Result.Error
	}
	truncated, first, last := p.Log().Bounds()
	d.TruncatedHead = truncated
	if first > 0 {
		d.FirstAvailableCursor = first.String()
	}
	if last > 0 {
		d.LastCursor = last.String()
	}
	d.LastOutputAt = client.Time{Time: p.Log().LastFrameTime()}
	d.WaitingForInput = s.input(p.ID()).Waiting()
	return d
}

// waitResult is the API's WaitResult of r.
func waitResult(r process.Result) client.WaitResult {
	return client.WaitResult{Reason: r.Reason, ExitCode: r.ExitCode, Signal: r.Signal, Error: r.Error}
}

// frameDTO is the API's LogFrame of f: text when its bytes are UTF-8 and
// base64 was not asked for.
func frameDTO(f *logstore.Frame, forceBase64 bool) client.LogFrame {
	lf := client.LogFrame{
		Cursor:    f.Cursor.String(),
		Channel:   f.Channel.String(),
		Timestamp: f.Time.UnixMilli(),
	}
	if !forceBase64 && f.IsText() {
		lf.Data, lf.Encoding = string(f.Data), client.EncodingText
	} else {
		lf.Data, lf.Encoding = base64.StdEncoding.EncodeToString(f.Data), client.EncodingBase64
	}
	return lf
}
