package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/process"
)

// sessionUsage is conch session's help.
const sessionUsage = `usage: conch session new|ls|rm [flags] [args]

  new   start a session (a shell, or a code context with --language) and print its id
  ls    list the sessions
  rm    end sessions: their shell and everything it started

Run 'conch session COMMAND -h' for a command's flags. Commands run in a session
with 'conch run --session ID'.`

func cmdSession(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, sessionUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, sessionUsage)
		return 0
	case "new":
		return cmdSessionNew(ctx, e, args[1:])
	case "ls":
		return cmdSessionLs(ctx, e, args[1:])
	case "rm":
		return cmdSessionRm(ctx, e, args[1:])
	}
	return usageError(e, "unknown session command %q: want new, ls or rm", args[0])
}

func cmdSessionNew(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "session new", "")
	var opts client.SessionOptions
	fs.StringVar(&opts.Name, "name", "", "a `name` for the session")
	fs.StringVar(&opts.Cwd, "cwd", "", "the shell's starting `directory`, relative to conch's own (default: the daemon's directory, not conch's)")
	fs.StringVar(&opts.Shell, "shell", "", "`shell`: bash (default), sh, dash, zsh, ksh, mksh or busybox")
	fs.BoolVar(&opts.Login, "login", false, "start a login shell (profile files read)")
	fs.StringVar(&opts.Language, "language", "", "make a code context instead: `language` python or javascript (not with --shell)")
	fs.BoolVar(&opts.LeasePort, "lease-port", false, "lease a free loopback port for the session")
	env := envFlag{}
	fs.Var(env, "e", "set `KEY=VALUE` in the shell's environment (repeatable)")
	asJSON := fs.Bool("json", false, "print the session as JSON")
	limits := addLimitFlags(fs, "session")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, "session new takes no arguments")
	}
	opts.Limits = limits.limits()
	if opts.Language != "" && (opts.Shell != "" || opts.Login) {
		return usageError(e, "--language makes a code context, which has no shell: drop --shell and --login")
	}
	if len(env) > 0 {
		opts.Env = env
	}
	cwd, err := absDir(opts.Cwd)
	if err != nil {
		return fail(e, exitOwn, err)
	}
	opts.Cwd = cwd
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	// Bounded as the daemon bounds a new session's start, and its answer.
	qctx, cancel := quickWithin(ctx, c, answerWait+process.ReadyWithin)
	s, err := c.CreateSession(qctx, opts)
	err = signalErr(qctx, err)
	cancel()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	if *asJSON {
		return printJSON(e, s)
	}
	return printID(e, s.ID)
}

func cmdSessionLs(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "session ls", "")
	asJSON := fs.Bool("json", false, "print the sessions as JSON")
	quiet := fs.Bool("q", false, "print ids only")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, "session ls takes no arguments")
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	qctx, cancel := quick(ctx, c)
	defer cancel()
	ss, err := c.Sessions(qctx)
	if err = signalErr(qctx, err); err != nil {
		return fail(e, exitOwn, err)
	}
	switch {
	case *asJSON:
		return printJSON(e, ss)
	case *quiet:
		for _, s := range ss {
			fmt.Fprintln(e.stdout, s.ID)
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSHELL\tPID\tCWD\tPORTS\tNAME")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, cell(cmp.Or(s.Shell, s.Language)), pid(s.PID),
			cell(s.Cwd), cell(joinInts(s.Ports)), cutCell(s.Name, nameWidth))
	}
	return flushTable(e, tw)
}

func cmdSessionRm(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "session rm", "ID...")
	return eachID(ctx, e, fs, args, func(ctx context.Context, c *client.Client, id string) error {
		return notASession(ctx, c, id, c.DeleteSession(ctx, id), func(p *client.Process) string {
			return "remove it with conch rm " + p.ID
		})
	})
}

// cell is s as a table shows it: "-" when empty, and with every control
// character and byte that is not UTF-8 written as an escape (\x1b, \u009b),
// so that text a command chose (a name, a directory, a command line) can
// neither move the terminal's cursor, retitle its window nor break the
// table's columns.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return plaintext.Escape(s)
}

// cutCell is cell(s) cut to at most n bytes, with "..." for what is cut:
// a long name or reason (a failed command's runs to 400 bytes) would make
// every row as wide as it. --json shows them whole.
func cutCell(s string, n int) string {
	s = cell(s)
	if len(s) > n {
		s = plaintext.CutEnd(s, n-3) + "..."
	}
	return s
}

// The widths of the cells tables cut (see cutCell).
const (
	nameWidth    = 40
	resultWidth  = 60
	commandWidth = 60
)

func pid(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func flushTable(e *env, tw interface{ Flush() error }) int {
	if err := tw.Flush(); err != nil {
		return fail(e, exitOwn, err)
	}
	return 0
}
