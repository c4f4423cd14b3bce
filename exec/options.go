package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
	"github.com/conchsh/conch/internal/rawpath"
	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// Options say what to run and how. Exactly one of Cmd and Argv is set, but
// for a PTY, which without either runs the shell itself (SHELL, or SHELL -l
// when Login is set).
type Options struct {
	// ID is the process's id; empty means a new random UUID. An id given
	// must be unique among the processes, sessions and code contexts this
	// program starts: the engine finds a process's descendants by it (see
	// proctree.Tag), so a Kill or Stop of one reaches every live process
	// tagged with the same id, another's too.
	ID string
	// Kind is process.KindExec (the zero value) or process.KindPTY.
	Kind process.Kind
	// Cmd is a shell string, run as `SHELL -c Cmd` (`SHELL -l -c Cmd` when
	// Login is set).
	Cmd string
	// Argv is a program and its arguments, run without a shell. A program
	// name without a slash is looked up in the PATH of the process's
	// environment (Env's PATH if it sets one).
	Argv []string
	// Name is a label for listing; it need not be unique.
	Name string
	// Cwd is the working directory; it must exist. Empty means the daemon's.
	Cwd string
	// Env is added to the daemon's environment (minus CONCH_TOKEN), replacing
	// variables of the same name. PWD is the process's directory unless Env
	// sets it.
	Env map[string]string
	// User runs the process as another user (name or uid); only root may.
	// HOME, USER and LOGNAME are set to that user's unless Env sets them.
	// Empty means the daemon's user.
	User string
	// Shell runs Cmd: a name or absolute path that internal/shells accepts.
	// Empty means bash.
	Shell string
	// Login runs the shell as a login shell (-l), which reads profile files.
	Login bool
	// Stdin is StdinClosed (the zero value: reads get end-of-file) or
	// StdinOpen (bytes come from WriteStdin until CloseStdin). A PTY
	// process's stdin is always open.
	Stdin process.Stdin
	// ExecutionTimeout, when positive, sends TERM to the whole tree that long
	// after the start and KILL StopGrace later, to what is left of it then
	// (also when the process itself has ended); the reason is timed_out.
	ExecutionTimeout time.Duration
	// StopGrace is how long the process has after TERM (from Stop or the
	// execution timeout) before KILL; zero means process.StopGrace.
	StopGrace time.Duration
	// DrainDelay bounds how long output is still read after the process
	// exited, for children that hold its stdout, stderr or terminal open;
	// zero means process.DrainDelay.
	DrainDelay time.Duration
	// Terminal is the initial size of a PTY; nil means 80×24. Set only for
	// KindPTY.
	Terminal *process.TerminalSize
	// KeepLogs is the log policy; zero means until_cleanup. on_exit_ttl is
	// carried out by whoever keeps the record (the daemon drops it a set
	// time after the exit).
	KeepLogs logstore.KeepLogs
	// HoldLogs starts the log held (logstore.Options.Held): the caller
	// calls Log().Release once it has read what it waited for.
	HoldLogs bool
	// Retention bounds the bytes of output kept; zero means
	// logstore.DefaultRetention.
	Retention int
	// AttachStall is how long a PTY's output waits for an attached reader
	// that has stopped reading; zero means process.StopGrace.
	AttachStall time.Duration
	// Containment is where the process gets a cgroup of its own, entered
	// as it starts, which everything it starts stays in and ends with
	// it; nil contains nothing (processes that leave the tree are found by
	// tags only).
	Containment *containment.Root
	// Limits bound the process's cgroup, its zero fields taken from the
	// Containment's defaults; a limit the host cannot apply is refused with
	// an error wrapping containment.ErrUnsupported.
	Limits containment.Limits
}

// tokenEnv is the daemon's API token, which must never reach a command.
const tokenEnv = "CONCH_TOKEN"

// plan is what Start worked out from Options before starting anything.
type plan struct {
	path string   // program to execute; empty when lookup failed
	argv []string // argv[0] included
	dir  string   // absolute working directory
	// inheritDir: dir is the daemon's own, which was removed, and the
	// process starts in it by inheriting it
	inheritDir bool
	env        []string
	cred       *syscall.Credential
	shell      shells.Shell // for Cmd
	// shellItself: a PTY with no Cmd nor Argv runs the shell itself, shown
	// as its argv
	shellItself bool
	fail        error // why the program cannot run: a Failed process, not an error
}

// prepare checks opts and works out what to run. Its errors wrap
// process.ErrInvalidArgument or process.ErrUnsupported.
func prepare(id string, opts Options) (plan, error) {
	var pl plan
	switch opts.Kind {
	case "", process.KindExec, process.KindPTY:
	default:
		return pl, fmt.Errorf("%w: kind %s is not exec or pty", process.ErrInvalidArgument, api.Quote(string(opts.Kind)))
	}
	switch {
	case opts.Argv != nil && opts.Cmd != "":
		return pl, fmt.Errorf("%w: give cmd or argv, not both", process.ErrInvalidArgument)
	case opts.Argv == nil && opts.Cmd == "" && opts.Kind != process.KindPTY:
		return pl, fmt.Errorf("%w: give cmd or argv", process.ErrInvalidArgument)
	case opts.Argv != nil && (len(opts.Argv) == 0 || opts.Argv[0] == ""):
		return pl, fmt.Errorf("%w: argv has no program", process.ErrInvalidArgument)
	case opts.Argv != nil && (opts.Shell != "" || opts.Login):
		return pl, fmt.Errorf("%w: shell and login apply to cmd, not to argv", process.ErrInvalidArgument)
	}
	if err := process.CheckArg("id", id); err != nil {
		return pl, err // it goes in the environment, as the tree's tag
	}
	if err := checkStrings(opts); err != nil {
		return pl, err
	}
	if opts.Terminal != nil && opts.Kind != process.KindPTY {
		return pl, fmt.Errorf("%w: terminal is only for pty processes", process.ErrInvalidArgument)
	}
	if opts.Terminal != nil && (opts.Terminal.Cols == 0 || opts.Terminal.Rows == 0) {
		return pl, fmt.Errorf("%w: terminal size %dx%d: cols and rows must be positive", process.ErrInvalidArgument, opts.Terminal.Cols, opts.Terminal.Rows)
	}
	if opts.ExecutionTimeout < 0 {
		return pl, fmt.Errorf("%w: negative executionTimeout", process.ErrInvalidArgument)
	}
	switch opts.Stdin {
	case "", process.StdinClosed, process.StdinOpen:
	default:
		return pl, fmt.Errorf("%w: stdin %q: want closed or open", process.ErrInvalidArgument, opts.Stdin)
	}
	if _, err := logstore.ParseKeepLogs(string(opts.KeepLogs)); err != nil {
		return pl, fmt.Errorf("%w: %v", process.ErrInvalidArgument, err)
	}
	var err error
	if pl.dir, pl.inheritDir, err = workDir(opts.Cwd); err != nil {
		return pl, err
	}
	var u *user.User
	if opts.User != "" {
		if u, pl.cred, err = credential(opts.User); err != nil {
			return pl, err
		}
	}
	pwd := pl.dir
	if pl.inheritDir {
		pwd = "" // no path leads there: the daemon's PWD is as good as any
	}
	pl.env = environ(id, opts.Env, u, pwd)
	if opts.Argv == nil {
		if pl.shell, err = resolveShell(opts.Shell); err != nil {
			return pl, fmt.Errorf("%w: %v", process.ErrInvalidArgument, err)
		}
		pl.argv = pl.shell.Argv(opts.Login, opts.Cmd)
		if opts.Cmd == "" { // a PTY with nothing to run is a terminal on the shell itself
			pl.argv = append([]string{pl.shell.Path}, pl.shell.Prefix...)
			if opts.Login {
				pl.argv = append(pl.argv, "-l")
			}
			pl.shellItself = true
		}
		pl.path = pl.argv[0]
		return pl, nil
	}
	pl.argv = opts.Argv
	pl.path, pl.fail = lookPath(opts.Argv[0], pl.dir, pl.env)
	return pl, nil
}

// MaxArgBytes is the most bytes Linux passes in one argument of a program
// (MAX_ARG_STRLEN, 32 pages, less the NUL that ends it): a cmd, which the
// shell gets as one argument, or an element of argv, that is longer cannot
// be started ("argument list too long").
const MaxArgBytes = 32*4096 - 1

// checkStrings refuses a NUL in cmd or argv, an argument longer than
// MaxArgBytes, and an env that execve cannot pass as asked: refused here,
// not a process that fails to start.
func checkStrings(opts Options) error {
	if err := process.CheckArg("cmd", opts.Cmd); err != nil {
		return err
	}
	if len(opts.Cmd) > MaxArgBytes {
		return fmt.Errorf("%w: cmd is %d bytes, and a program takes at most %d in one argument, which the shell gets it as: write a longer script to a file and run that, or run it as a session command", process.ErrInvalidArgument, len(opts.Cmd), MaxArgBytes)
	}
	for i, a := range opts.Argv {
		if err := process.CheckArg("argv["+strconv.Itoa(i)+"]", a); err != nil {
			return err
		}
		if len(a) > MaxArgBytes {
			return fmt.Errorf("%w: argv[%d] is %d bytes, and a program takes at most %d in one argument", process.ErrInvalidArgument, i, len(a), MaxArgBytes)
		}
	}
	return process.CheckEnv(opts.Env)
}

// pathless is err without the path a *fs.PathError quotes whole, which
// may be megabytes long: its message quotes the path clipped (api.Quote).
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// workDir returns cwd made absolute, or the daemon's directory for "".
// When that directory was removed, dir is the path it had and inherit is
// true: the process starts in it by inheriting it, as no path leads there.
func workDir(cwd string) (dir string, inherit bool, err error) {
	if cwd == "" {
		return daemonDir()
	}
	if !filepath.IsAbs(cwd) {
		return "", false, fmt.Errorf("%w: cwd %s is not an absolute path", process.ErrInvalidArgument, api.Quote(cwd))
	}
	fi, err := os.Stat(cwd)
	if err != nil {
		return "", false, fmt.Errorf("%w: cwd %s: %v", process.ErrInvalidArgument, api.Quote(cwd), pathless(err))
	}
	if !fi.IsDir() {
		return "", false, fmt.Errorf("%w: cwd %s is not a directory", process.ErrInvalidArgument, api.Quote(cwd))
	}
	// Where the kernel, which os.Stat asked, goes: a cleaned "link/.."
	// would run the process elsewhere than the directory checked, and
	// than a session given the same cwd.
	if dir, err = process.RunDir(cwd); err != nil {
		return "", false, fmt.Errorf("%w: cwd %s: %v", process.ErrInvalidArgument, api.Quote(cwd), pathless(err))
	}
	return dir, false, nil
}

// daemonDir is the daemon's directory as procfs.Cwd gives it, looked for
// first as os.Getwd does: $PWD, when it names the directory "." names. Made
// with two raw stats (see package rawcall), that look costs a third of
// os.Getwd's on a one-shot's path, which makes it with package os's stats.
func daemonDir() (dir string, inherit bool, err error) {
	if pwd := os.Getenv("PWD"); filepath.IsAbs(pwd) {
		if p, err := rawcall.NewPath(pwd); err == nil {
			id, ok := p.ID()
			dot, dotOK := dotPath.ID()
			if ok && dotOK && id == dot {
				return pwd, false, nil
			}
		}
	}
	return procfs.Cwd()
}

var dotPath, _ = rawcall.NewPath(".")

// ErrNeedsRoot is wrapped, with process.ErrUnsupported, by Start's error for
// a User other than this process's own when this process is not root. No
// later request can find that changed: the APIs answer it as they answer
// limits the host cannot apply.
var ErrNeedsRoot = errors.New("needs the daemon to run as root")

// credential looks name up (a user name or a uid) and returns the
// credential to run as it. Only root may run as another user.
func credential(name string) (*user.User, *syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var uerr error
		if u, uerr = user.LookupId(name); uerr != nil {
			var unknown user.UnknownUserError
			if errors.As(err, &unknown) {
				return nil, nil, fmt.Errorf("%w: user %q: no such user name or uid on this machine", process.ErrInvalidArgument, name)
			}
			return nil, nil, fmt.Errorf("%w: user %q: %v", process.ErrInvalidArgument, name, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, fmt.Errorf("%w: user %q: %v", process.ErrInvalidArgument, name, err)
	}
	if uint64(os.Geteuid()) == uid {
		return u, nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, nil, fmt.Errorf("%w: running as user %q %w", process.ErrUnsupported, name, ErrNeedsRoot)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	return u, cred, nil
}

// environ builds the environment: the daemon's without its token, then the
// user's identity and PWD (the process's directory, unless pwd is empty),
// then extra, then the tree's tag. extra cannot override the tag nor the
// daemon's instance mark (proctree.InstanceEnv).
//
// PWD is set as a shell sets it for what it starts: the daemon's own names
// the daemon's directory, which a program that reads $PWD for its
// directory (Python's os.environ, Node's process.env, make) would take for
// its own; a shell checks it and ignores a wrong one.
func environ(id string, extra map[string]string, u *user.User, pwd string) []string {
	base := os.Environ()
	env := make([]string, 0, len(base)+len(extra)+5)
	override := func(k string) bool {
		_, ok := extra[k]
		return (ok && k != proctree.InstanceEnv) || k == tokenEnv || k == proctree.TagEnv ||
			(u != nil && (k == "HOME" || k == "USER" || k == "LOGNAME")) || (pwd != "" && k == "PWD")
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !override(k) {
			env = append(env, kv)
		}
	}
	if u != nil {
		for k, v := range map[string]string{"HOME": u.HomeDir, "USER": u.Username, "LOGNAME": u.Username} {
			if _, ok := extra[k]; !ok {
				env = append(env, k+"="+v)
			}
		}
	}
	if _, ok := extra["PWD"]; !ok && pwd != "" {
		env = append(env, "PWD="+pwd)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if k != proctree.TagEnv && k != tokenEnv && k != proctree.InstanceEnv {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return append(env, proctree.Tag(id))
}

// lookPath finds prog as execve would for the process: a name with a slash
// relative to dir, otherwise in the PATH of env. Its error is the reason of a
// Failed process.
func lookPath(prog, dir string, env []string) (string, error) {
	if strings.ContainsRune(prog, '/') {
		p := prog
		if !filepath.IsAbs(p) {
			p = rawpath.Under(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("exec %q: %w", prog, err)
		}
		return p, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for d := range strings.SplitSeq(path, ":") {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = rawpath.Under(dir, d)
		}
		if p := rawpath.Under(d, prog); executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: %w", prog, osexec.ErrNotFound)
}

// executable checks that p is a file execve could run. Its error wraps
// the errno execve would fail with, so that callers can tell a missing
// program (ENOENT) from one that may not be run (EACCES: a directory, a
// file without an execute bit).
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return notExecutable{p + " is a directory"}
	}
	if fi.Mode()&0o111 == 0 {
		return notExecutable{p + ": permission denied"}
	}
	return nil
}

// notExecutable is why a program that exists cannot be run; it is
// syscall.EACCES, as execve would answer.
type notExecutable struct{ msg string }

func (e notExecutable) Error() string { return e.msg }
func (e notExecutable) Unwrap() error { return syscall.EACCES }

// resolved caches shells.Resolve by name, which searches PATH: a shell's
// path is checked again (one stat) on each use instead.
var resolved sync.Map // name → shells.Shell

func resolveShell(name string) (shells.Shell, error) {
	if v, ok := resolved.Load(name); ok {
		if sh := v.(shells.Shell); executable(sh.Path) == nil {
			return sh, nil
		}
	}
	sh, err := shells.Resolve(name)
	if err != nil {
		resolved.Delete(name)
		return sh, err
	}
	resolved.Store(name, sh)
	return sh, nil
}

// unenterable is err, a failed start of a process run as another user, said
// again when that user cannot enter its working directory: the child's
// chdir failed, which the kernel's error reports as the program's
// ("fork/exec /usr/bin/bash: permission denied"). It looks at the mode bits
// of each directory on the way, after the fact only, so that an ACL that
// lets the user in never refuses a start.
func unenterable(err error, pl plan) error {
	if pl.cred == nil || pl.dir == "" || !errors.Is(err, syscall.EACCES) {
		return err
	}
	gids := append([]uint32{pl.cred.Gid}, pl.cred.Groups...)
	var dirs []string // from pl.dir up to the root
	for dir := filepath.Clean(pl.dir); ; dir = filepath.Dir(dir) {
		dirs = append(dirs, dir)
		if dir == "/" || dir == "." {
			break
		}
	}
	for _, dir := range slices.Backward(dirs) { // the first that stops the user
		if !searchable(dir, pl.cred.Uid, gids) {
			return fmt.Errorf("cwd %s: uid %d cannot enter %s (permission denied): %w", pl.dir, pl.cred.Uid, dir, err)
		}
	}
	return err
}

// searchable reports whether uid, in groups gids, may search directory dir
// by its mode bits.
func searchable(dir string, uid uint32, gids []uint32) bool {
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || uid == 0 {
		return true // nothing to say
	}
	switch {
	case st.Uid == uid:
		return st.Mode&syscall.S_IXUSR != 0
	case slices.Contains(gids, st.Gid):
		return st.Mode&syscall.S_IXGRP != 0
	}
	return st.Mode&syscall.S_IXOTH != 0
}
