package process

import "time"

// The engine's durations, one name each across the module. Each is the
// default of an options field that a library user may set (exec.Options,
// shellsession.Options, codecontext.Options), where zero means this default.
const (
	// StopGrace is how long a process that was asked to stop — TERM from
	// Stop or an execution timeout, or an interrupt at a session command's
	// timeout — has before it is killed, and how long a kill is then given
	// to take effect before Stop gives up.
	StopGrace = 5 * time.Second
	// DrainDelay bounds how long output is still read after a process (or a
	// session's shell) exited, for background children that keep its
	// streams open; os/exec's Cmd.WaitDelay does the same.
	DrainDelay = 2 * time.Second
	// ReadyWithin bounds how long a session's shell has to run its first
	// command (a login shell reads its profile first), and a code context's
	// interpreter to connect, before the start is refused as invalid input
	// and the tree under it killed: a login profile that blocks (`sleep
	// 1000`) or node under a pids limit of a few would hold the start, and
	// the daemon's drain, until its caller gave up.
	ReadyWithin = 30 * time.Second
)

// OrDefault returns d, or def when d is zero or negative: how options fields
// of the durations above take their defaults.
func OrDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
