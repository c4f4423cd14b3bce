package codecontext

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// deadline bounds every blocking step of a test.
const deadline = 30 * time.Second

var languages = []Language{Python, JavaScript}

func output(cell *Cell) (stdout, stderr string) {
	var o, e strings.Builder
	for _, f := range cell.Log().Page(0, 0).Frames {
		if f.Channel == logstore.Stdout {
			o.Write(f.Data)
		} else {
			e.Write(f.Data)
		}
	}
	return o.String(), e.String()
}

func newContext(t *testing.T, opts Options) *Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	c, err := New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// run runs code in c and returns its result and output.
func run(t *testing.T, c *Context, code string) (process.Result, string, string) {
	t.Helper()
	return runOpts(t, c, CellOptions{Code: code})
}

func runOpts(t *testing.T, c *Context, opts CellOptions) (process.Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	cell, r, err := c.Run(ctx, opts)
	require.NoError(t, err, "cell %q", opts.Code)
	o, e := output(cell)
	return r, o, e
}

func wait(t *testing.T, p process.Process) process.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	r, err := process.Wait(ctx, p)
	require.NoError(t, err)
	return r
}

func code(r process.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}
