package server

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/conchsh/conch/process"
)

// The daemon's log of processes: one line when each starts and one when it
// ends. What a process runs (command text, argv, a cell's code) may hold
// secrets, so it is logged only at debug level, on a line of its own.

// line logs msg with attrs at level as Logger.LogAttrs does, but hands the
// record to the handler without the caller's program counter: Logger looks
// it up (runtime.Callers) for every line whether or not its handler writes
// sources, which conch's handlers do not. The lines of every request and
// of every process's start and end go through here: that lookup was a
// quarter of what they cost (3 µs a line on a one-shot's path after a fork).
// A handler that writes sources gets none for these lines.
func (s *Server) line(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	h := s.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r) // as Logger does: a handler's error goes nowhere
}

func (s *Server) logStart(i process.Info) {
	s.line(context.Background(), slog.LevelInfo, "process started",
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
		if r.Error != "" {
			attrs = append(attrs, slog.String("error", r.Error))
		}
	}
	if start := i.StartedAt; !start.IsZero() && !i.ExitedAt.IsZero() {
		attrs = append(attrs, slog.Float64("durationMs", float64(i.ExitedAt.Sub(start).Microseconds())/1000))
	}
	s.line(context.Background(), slog.LevelInfo, "process ended", attrs...)
}
