package codecontext

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// deadline bounds every blocking step of a test.
const deadline = 30 * time.Second

var languages = []Language{Python, JavaScript}

func output(cell *Cell) (stdout, stderr string) { return processtest.Output(cell.Log()) }

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
	return processtest.Wait(t, p, deadline)
}

func code(r process.Result) int { return processtest.Code(r) }

// exitCode runs cmd to its end and returns the status it exited with: what
// the interpreter run alone does, for a context to match. It is started
// and waited for as the engine starts its children, through proctree:
// TestMain's reaper reaps any child it was not told of, often before
// os/exec's own wait, which then fails with "waitid: no child processes".
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	require.NoError(t, proctree.Start(cmd))
	err := proctree.Wait(cmd)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// cellOut is a cell and what it is to print.
type cellOut struct{ code, out string }

// runEach runs the cells in c in turn: each ends with exit 0, prints its
// out and nothing on stderr.
func runEach(t *testing.T, c *Context, cells []cellOut) {
	t.Helper()
	for _, tc := range cells {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 0, code(r), "%s: %+v, stderr %q", tc.code, r, errOut)
		require.Equal(t, tc.out, out, tc.code)
		require.Empty(t, errOut, tc.code)
	}
}
