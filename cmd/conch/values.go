package main

import (
	"errors"
	"flag"
	"slices"
	"strconv"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// The flag values below are checked as they are parsed: a value the CLI
// can tell is wrong without the daemon (one outside a fixed set, a port
// that is no port) is a usage error, exit 2, said with the flag and the
// usage, with or without a daemon. Values only the daemon can judge (a
// shell, a directory, a limit its host may not apply) go to it as they are.

// oneOf defines a string flag that takes one of values, or "" (as when it
// is not given: the daemon's default); want says which in a refusal
// ("running, terminal or all").
func oneOf(fs *flag.FlagSet, p *string, name, usage, want string, values ...string) {
	fs.Func(name, usage, func(v string) error {
		if v != "" && !slices.Contains(values, v) {
			return errors.New("want " + want)
		}
		*p = v
		return nil
	})
}

// keepLogsFlag defines --keep-logs, the retention policy of what starts.
func keepLogsFlag(fs *flag.FlagSet) *string {
	p := new(string)
	oneOf(fs, p, "keep-logs", "retention `policy`: until_cleanup, on_exit_ttl or none",
		"until_cleanup, on_exit_ttl or none",
		string(logstore.KeepUntilCleanup), string(logstore.KeepOnExitTTL), string(logstore.KeepNone))
	return p
}

// signalFlag is a signal given by name (TERM, SIGTERM, term) or number
// (15), as kill(1) takes it; it holds the name the daemon takes.
type signalFlag string

func (s *signalFlag) String() string { return string(*s) }

func (s *signalFlag) Set(v string) error {
	name := signalName(v)
	if _, err := process.ParseSignal(name); err != nil {
		return errors.New("want a signal name such as TERM, INT, KILL or HUP, or its number (15, 2, 9, 1)")
	}
	*s = signalFlag(name)
	return nil
}

// signalVar defines a signal flag, def ("" for none) when not given.
func signalVar(fs *flag.FlagSet, name, def, usage string) *signalFlag {
	s := signalFlag(def)
	fs.Var(&s, name, usage)
	return &s
}

// portFlag defines ready's --port: a TCP port number, or any.
func portFlag(fs *flag.FlagSet, p *string) {
	fs.Func("port", "wait until it listens on this TCP `port`, or on any port (any)", func(v string) error {
		if n, err := strconv.Atoi(v); v != "any" && (err != nil || n < 1 || n > 65535) {
			return errors.New("want a TCP port number (1-65535) or any")
		}
		*p = v
		return nil
	})
}
