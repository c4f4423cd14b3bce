package server

import (
	"os"
	"path/filepath"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Request checks: bad input is refused with invalid_argument before anything
// starts.

// checkStart checks the options of an exec or PTY process and fills in the
// kind.
func checkStart(opts *api.StartOptions) error {
	kind, err := parseKind(string(opts.Kind), false)
	if err != nil {
		return err
	}
	opts.Kind = kind
	switch {
	case opts.Cmd != "" && len(opts.Argv) > 0:
		return badRequest("give cmd or argv, not both")
	case opts.Cmd == "" && len(opts.Argv) == 0 && kind == process.KindExec:
		return badRequest("nothing to run: give cmd or argv")
	case len(opts.Argv) > 0 && opts.Argv[0] == "":
		return badRequest("argv[0] is empty")
	case opts.Terminal != nil && kind != process.KindPTY:
		return badRequest("terminal applies to a pty process only")
	case opts.Terminal != nil:
		if err := checkSize(*opts.Terminal); err != nil {
			return err
		}
	}
	if len(opts.Argv) > 0 && (opts.Shell != "" || opts.Login) {
		return badRequest("shell and login apply to cmd, not to argv")
	}
	if opts.Shell != "" {
		if _, err := shells.Resolve(opts.Shell); err != nil {
			return err
		}
	}
	if err := checkStdin(opts.Stdin); err != nil {
		return err
	}
	if _, err := checkKeepLogs(opts.KeepLogs); err != nil {
		return err
	}
	return checkCwd(opts.Cwd)
}

// checkSession checks the options of a new session.
func checkSession(opts api.SessionOptions) error {
	if _, err := shells.Resolve(opts.Shell); err != nil {
		return err
	}
	return checkCwd(opts.Cwd)
}

// checkCommand checks the options of a session command.
func checkCommand(opts api.CommandOptions) error {
	if err := checkStdin(opts.Stdin); err != nil {
		return err
	}
	_, err := checkKeepLogs(opts.KeepLogs)
	return err
}

func checkStdin(s process.Stdin) error {
	switch s {
	case "", process.StdinClosed, process.StdinOpen:
		return nil
	}
	return badRequest("stdin %q: want closed or open", s)
}

func checkKeepLogs(k logstore.KeepLogs) (logstore.KeepLogs, error) {
	keep, err := logstore.ParseKeepLogs(string(k))
	if err != nil {
		return "", badRequest("keepLogs: %v", err)
	}
	return keep, nil
}

// checkCwd refuses a working directory that is not an absolute path to a
// directory; empty is the default.
func checkCwd(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) {
		return badRequest("cwd %q is not an absolute path", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return badRequest("cwd %q: %v", dir, err)
	}
	if !fi.IsDir() {
		return badRequest("cwd %q is not a directory", dir)
	}
	return nil
}
