package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
)

func cmdPs(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "ps", "")
	var opts client.ListOptions
	oneOf(fs, &opts.State, "state", "only processes in this `state`: running, terminal or all",
		"running, terminal or all", "running", "terminal", "all")
	kind := new(string)
	oneOf(fs, kind, "kind", "only processes of this `kind`: exec, pty, code or session", "exec, pty, code or session",
		string(process.KindExec), string(process.KindPTY), string(process.KindCode), string(process.KindSession))
	fs.StringVar(&opts.SessionID, "session", "", "only the session with this `id` and its commands")
	fs.StringVar(&opts.Name, "name", "", "only processes with this `name`")
	asJSON := fs.Bool("json", false, "print the processes as JSON")
	quiet := fs.Bool("q", false, "print ids only")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, "ps takes no arguments")
	}
	opts.Kind = process.Kind(*kind)
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	qctx, cancel := quick(ctx, c)
	defer cancel()
	var ps []client.Process
	for p, err := range c.Processes(qctx, opts) {
		if err != nil {
			return fail(e, exitOwn, signalErr(qctx, err))
		}
		ps = append(ps, p)
	}
	if opts.SessionID != "" && len(ps) == 0 {
		// The daemon lists nothing for a session it does not have, as for
		// one with nothing to list: ask for the session itself.
		if _, err := c.Session(qctx, opts.SessionID); err != nil {
			err = notASession(qctx, c, opts.SessionID, err, func(p *client.Process) string {
				if p.SessionID != "" {
					return "list its session with conch ps --session " + p.SessionID
				}
				return "list it with conch ps, without --session"
			})
			return fail(e, exitOwn, signalErr(qctx, err))
		}
	}
	switch {
	case *asJSON:
		if ps == nil {
			ps = []client.Process{}
		}
		return printJSON(e, ps)
	case *quiet:
		for _, p := range ps {
			fmt.Fprintln(e.stdout, p.ID)
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tRESULT\tPID\tSESSION\tNAME\tCOMMAND")
	for _, p := range ps {
		result := ""
		if r := p.Result(); r != nil {
			result = r.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Kind, p.State, cutCell(result, resultWidth), pid(p.PID),
			cell(p.SessionID), cutCell(p.Name, nameWidth), commandLine(p))
	}
	return flushTable(e, tw)
}

// commandLine is what the process runs, on one line.
func commandLine(p client.Process) string {
	s := p.ShellCommand
	switch {
	case p.System:
		s = p.ResolvedShell
	case s == "" && len(p.Argv) > 0:
		s = strings.Join(p.Argv, " ")
	}
	return cutCell(strings.Join(strings.Fields(s), " "), commandWidth)
}
