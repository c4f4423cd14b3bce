// Command conch runs the conch daemon (conch serve) and drives it: one-shot
// commands, sessions, process listings, logs, signals and PTY attachment.
//
// The client commands find the daemon by themselves: $CONCH_URL and
// $CONCH_TOKEN when set, else what the daemon wrote under the user's state
// directory ($XDG_STATE_HOME/conch or ~/.local/state/conch).
//
// Exit statuses are listed in exitStatuses, which `conch --help` prints: a
// command run through conch (run, wait, attach, interact) exits with the
// command's status; conch's own failures exit 125 in every client command,
// so that they differ from any status a command reports.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/conchsh/conch/server"
)

// Exit codes of conch itself.
const (
	exitFailure = 1   // serve or mcp failed; ready: the process ended before it was ready
	exitUsage   = 2   // bad flags or arguments
	exitOwn     = 125 // a client command failed: no daemon, no such process, a refused request
)

// exitStatuses is what every exit status of conch means, for --help.
const exitStatuses = `Exit status:
  0      success; for run, wait, attach and interact: the command's own status
  1-122  the command's own status (run, wait, attach, interact)
  1      serve or mcp failed; ready: the process ended before it was ready
  2      usage error: unknown command, bad flag or argument
  123    run --idle/--timeout, interact, ready: the command still runs (it went
         quiet, waits for input, or the wait ran out); conch prints its id
  124    the command reached its execution timeout (--exec-timeout) and was stopped
  125    conch itself failed: no daemon answers, no such process or session, or
         the daemon refused the request (the message says why: a --cwd that is
         no directory, a --shell that is not installed); also a command the
         engine lost (its session's shell died under it)
  127    the command could not start (no such program)
  128+N  the command was ended by signal N (130: INT, 137: KILL, 143: TERM);
         in a ksh93 session N, as ksh93 reports it
A command that exits 123, 124 or 125 itself gives that status too, silently:
conch's own 123, 124 and 125 always say why on stderr (run --json gives the
command's result whole).
`

// env is what a subcommand sees of the world.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

var commands = map[string]command{
	"serve":    {"run the daemon", cmdServe},
	"run":      {"run a command and wait for it, streaming its output", cmdRun},
	"start":    {"start a command and print its id", cmdStart},
	"wait":     {"wait for a process and exit with its status", cmdWait},
	"session":  {"manage sessions: new, ls, rm", cmdSession},
	"ps":       {"list processes", cmdPs},
	"logs":     {"print a process's output (-f to follow, --plain as plain text, line by line)", cmdLogs},
	"kill":     {"signal a process and its descendants", cmdKill},
	"rm":       {"stop and delete processes", cmdRm},
	"attach":   {"attach the terminal to a PTY process (Ctrl-] detaches)", cmdAttach},
	"interact": {"answer a running command, wait and read on", cmdInteract},
	"ready":    {"wait until a process listens on a port or prints a pattern", cmdReady},
	"mcp":      {"serve sessions to agents over the Model Context Protocol (stdio)", cmdMcp},
	"sandboxd": {"run the daemon as an agent-sandbox runtime (sandboxd's gRPC and REST API)", cmdSandboxd},
	"version":  {"print the version, and the daemon's when one answers", cmdVersion},
}

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(run(context.Background(), e, os.Args[1:]))
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && args[0] == "help" && len(args) > 1 {
		// conch help CMD [SUB] is conch CMD [SUB] --help; what follows
		// is dropped, never run: with it after them, --help was one more
		// argument, and conch help kill ID killed the process.
		args = helpArgs(args[1:])
	}
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		// Help asked for is the output (conch help | less).
		usage(e.stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "conch: unknown command %q\n", args[0])
		usage(e.stderr)
		return exitUsage
	}
	return c.run(ctx, e, args[1:])
}

// helpArgs returns the arguments that ask for the help of the command
// args names: its name, and a session's subcommand, then --help.
func helpArgs(args []string) []string {
	n := 1
	if args[0] == "session" && len(args) > 1 && slices.Contains([]string{"new", "ls", "rm"}, args[1]) {
		n = 2
	}
	return append(slices.Clone(args[:n]), "--help")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: conch COMMAND [flags] [args]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'conch help COMMAND' (or 'conch COMMAND -h') for a command's flags,")
	fmt.Fprintln(w, "and 'conch --version' for the version.")
	fmt.Fprintln(w)
	fmt.Fprint(w, exitStatuses)
	fmt.Fprint(w, `
Ctrl-C: run and interact pass it to the command (it gets SIGINT) and exit as
the command then does (125 when the daemon does not take it within 5 s);
wait, ready and logs -f stop waiting and exit 130 (on SIGTERM too),
leaving the process running; attach sends it to the terminal's program
(Ctrl-] detaches).

The client commands find the daemon through $CONCH_URL and $CONCH_TOKEN, else
through what 'conch serve' records in $XDG_STATE_HOME/conch (~/.local/state/conch).
`)
}

// flags returns a FlagSet for the subcommand name that writes to e. The
// notes, when given, are printed after the flags in its usage.
func flags(e *env, name, argsUsage string, notes ...string) *flag.FlagSet {
	fs := flag.NewFlagSet("conch "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{stdout: e.stdout, stderr: e.stderr})
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: conch %s [flags] %s\n", name, argsUsage)
		fs.PrintDefaults()
		for _, n := range notes {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(n))
		}
	}
	return fs
}

// flagOutput is where a FlagSet made by flags writes: stderr, or, while
// parse parses, a buffer that parse then sends to stdout when the usage
// was asked for (-h, --help) and to stderr when it follows a usage error.
type flagOutput struct {
	stdout, stderr io.Writer
	held           *bytes.Buffer
}

func (o *flagOutput) Write(b []byte) (int, error) {
	if o.held != nil {
		return o.held.Write(b)
	}
	return o.stderr.Write(b)
}

// parse parses args into fs; it returns the exit code and false when the
// command should stop (help asked for, or a usage error). Help asked for
// goes to stdout; a usage error and the usage after it to stderr.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	out, _ := fs.Output().(*flagOutput)
	if out != nil {
		out.held = new(bytes.Buffer)
	}
	err := fs.Parse(args)
	if out != nil {
		w := out.stderr
		if errors.Is(err, flag.ErrHelp) {
			w = out.stdout
		}
		_, _ = out.held.WriteTo(w)
		out.held = nil
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return exitUsage, false
	}
	return 0, true
}

// parseArgs is parse, then a check of how many arguments are left: when
// want refuses their number, it prints the usage and returns exitUsage.
func parseArgs(fs *flag.FlagSet, args []string, want func(n int) bool) (int, bool) {
	if code, ok := parse(fs, args); !ok {
		return code, false
	}
	if !want(fs.NArg()) {
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

// parseIDs is parseArgs for a command whose arguments are ids: its flags
// may come before, between or after them (conch kill ID -s INT, as docker
// and kubectl take them), and a flag is never taken for an id. Taken so,
// kill ID -s INT sent TERM to ID, then failed on "-s" and "INT": a
// session's command asked to stop ended its whole session. After "--",
// every argument is an id.
func parseIDs(fs *flag.FlagSet, args []string, want func(n int) bool) (ids []string, code int, ok bool) {
	for {
		if code, ok := parse(fs, args); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			ids = append(ids, rest...)
			break
		}
		i := 0
		for i < len(rest) && (rest[i] == "-" || !strings.HasPrefix(rest[i], "-")) {
			i++
		}
		ids = append(ids, rest[:i]...)
		if i == len(rest) {
			break
		}
		args = rest[i:]
	}
	if !want(len(ids)) {
		fs.Usage()
		return nil, exitUsage, false
	}
	return ids, 0, true
}

// parseID is parseIDs for a command that takes one id.
func parseID(fs *flag.FlagSet, args []string) (id string, code int, ok bool) {
	ids, code, ok := parseIDs(fs, args, exactlyOne)
	if !ok {
		return "", code, false
	}
	return ids[0], 0, true
}

func exactlyOne(n int) bool { return n == 1 }
func atLeastOne(n int) bool { return n > 0 }

// warn reports a problem that does not stop the command.
func (e *env) warn(msg string) { fmt.Fprintf(e.stderr, "conch: warning: %s\n", msg) }

func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.stdout, format, args...) }

func version() string { return server.Version() }

// cmdVersion prints the client's version, and the daemon's when one answers.
func cmdVersion(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "version", "")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, "version takes no arguments")
	}
	c, err := dial()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if h, err := c.Health(ctx); err == nil {
			e.printf("daemon %s at %s\n", h.Version, c.URL())
		}
	}
	e.printf("conch %s\n", version())
	return 0
}

// fail reports err and returns code.
func fail(e *env, code int, err error) int {
	fmt.Fprintf(e.stderr, "conch: %s\n", describe(err))
	return code
}

// usageError reports a usage problem and returns exitUsage.
func usageError(e *env, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "conch: "+format+"\n", args...)
	return exitUsage
}

// envFlag collects repeated KEY=VALUE flags.
type envFlag map[string]string

func (f envFlag) String() string { return "" }

func (f envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	f[k] = val
	return nil
}
