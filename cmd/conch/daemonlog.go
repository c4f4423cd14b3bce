package main

import (
	"io"
	"log/slog"
)

// daemonLog is what a daemon (serve, sandboxd) writes to its stderr: its
// log, and its own lines for the operator — where it listens, where the
// token went, its containment, why it stopped. In the text format those
// are "conch: ..." lines, as every command writes them; under --log-format
// json every line of stderr is a JSON object, so that a log collector
// (the Kubernetes manifests ask for json) parses each one.
type daemonLog struct {
	*slog.Logger
	stderr io.Writer
	says   *slog.Logger // under json, the notices, at info whatever the level
}

// newDaemonLog is the log of a daemon whose stderr is lb, in format (text
// or json) at level. Under json the line lb writes about dropped lines is
// a JSON object too.
func newDaemonLog(lb *logBuffer, format string, level slog.Leveler) daemonLog {
	ho := &slog.HandlerOptions{Level: level}
	if format == "json" {
		lb.setDropNote(func(w io.Writer, n int) {
			slog.New(slog.NewJSONHandler(w, nil)).Warn("log lines dropped: stderr was not read", "bytes", n)
		})
		return daemonLog{Logger: slog.New(slog.NewJSONHandler(lb, ho)), stderr: lb, says: slog.New(slog.NewJSONHandler(lb, nil))}
	}
	return daemonLog{Logger: slog.New(slog.NewTextHandler(lb, ho)), stderr: lb}
}

// notice tells the operator something whatever the log level: text as a
// "conch: text" line, or under json msg with args at info level.
func (l daemonLog) notice(text, msg string, args ...any) {
	if l.says != nil {
		l.says.Info(msg, args...)
		return
	}
	io.WriteString(l.stderr, "conch: "+text+"\n")
}

// fail reports the error that stops the daemon as fail does, or under json
// as an error line, and returns code.
func (l daemonLog) fail(e *env, code int, err error) int {
	if l.says == nil {
		return fail(e, code, err)
	}
	l.says.Error("failed", "err", describe(err))
	return code
}
