package main

import (
	"context"
	"encoding/json"

	"github.com/conchsh/conch/client"
)

func cmdLogs(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "logs", "ID")
	followFlag := fs.Bool("f", false, "follow: print new output until the process ends")
	cursor := fs.String("cursor", "", "only output after this `cursor`")
	asJSON := fs.Bool("json", false, "print frames as JSON lines (cursor, channel, data, encoding, timestamp)")
	if code, ok := parseArgs(fs, args, exactlyOne); !ok {
		return code
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitFailure, err)
	}
	id := fs.Arg(0)
	out := frameWriter(e, *asJSON)
	if *followFlag {
		for ev, err := range c.Stream(ctx, id, client.StreamOptions{Cursor: *cursor}) {
			if err != nil {
				return fail(e, exitFailure, err)
			}
			switch ev.Type {
			case client.EventLog:
				if err := out(*ev.Frame); err != nil {
					return fail(e, exitFailure, err)
				}
			case client.EventWarning:
				e.warn(ev.Warning.Message)
			}
		}
		return 0
	}
	opts := client.LogsOptions{Cursor: *cursor, Limit: 1000}
	for first := true; ; first = false {
		page, err := c.Logs(ctx, id, opts)
		if err != nil {
			return fail(e, exitFailure, err)
		}
		if first && page.TruncatedHead {
			e.warn("the head of the output was dropped by retention")
		}
		for _, f := range page.Items {
			if err := out(f); err != nil {
				return fail(e, exitFailure, err)
			}
		}
		// A page is bounded in bytes too: only an empty one is the end.
		if len(page.Items) == 0 {
			return 0
		}
		opts.Cursor = page.Next
	}
}

// frameWriter returns how frames are printed: their bytes to stdout or
// stderr, or one JSON object per line.
func frameWriter(e *env, asJSON bool) func(client.LogFrame) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		return func(f client.LogFrame) error { return enc.Encode(f) }
	}
	return func(f client.LogFrame) error {
		b, err := f.Bytes()
		if err != nil {
			return err
		}
		w := e.stdout
		if f.Channel == "stderr" {
			w = e.stderr
		}
		_, err = w.Write(b)
		return err
	}
}
