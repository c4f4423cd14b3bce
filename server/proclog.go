package server

import (
	"context"
	"log/slog"
	"strings"

	"github.com/conchsh/conch/process"
)

// The daemon's log of processes: one line when each starts and one when it
// ends. What a process runs (command text, argv, a cell's code) may hold
// secrets, so it is logged only at debug level, on a line of its own.

func (s *Server) logStart(i process.Info) {
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "process started",
		slog.String("id", i.ID), slog.String("kind", metricKind(i)), slog.String("sessionId", i.SessionID))
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	text := i.ShellCommand
	switch {
	case i.Code != "":
		text = i.Code
	case text == "" && len(i.Argv) > 0:
		text = strings.Join(i.Argv, " ")
	}
	if text != "" {
		s.log.Debug("process command", "id", i.ID, "cmd", text)
	}
}

func (s *Server) logEnd(i process.Info) {
	attrs := []slog.Attr{slog.String("id", i.ID), slog.String("kind", metricKind(i))}
	if r := i.Result; r != nil {
		attrs = append(attrs, slog.String("reason", string(r.Reason)))
		if r.ExitCode != nil {
			attrs = append(attrs, slog.Int("exitCode", *r.ExitCode))
		}
		if r.Signal != "" {
			attrs = append(attrs, slog.String("signal", r.Signal))
		}
	}
	if start := i.StartedAt; !start.IsZero() && !i.ExitedAt.IsZero() {
		attrs = append(attrs, slog.Float64("durationMs", float64(i.ExitedAt.Sub(start).Microseconds())/1000))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "process ended", attrs...)
}
