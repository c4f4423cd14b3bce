package codecontext

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// TestForkedPythonServesNoCells: os.fork() in a cell leaves a child that
// runs its part of the cell, but only the context's own interpreter reads
// cells: every later cell is run by it, with its state, and the child
// exits once its part is done rather than wait for cells. It once stayed,
// and the two interpreters served cells in turn, each with its own state.
func TestForkedPythonServesNoCells(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	interp := c.Info().PID
	ran := filepath.Join(t.TempDir(), "ran")
	_, out, errOut := run(t, c, fmt.Sprintf(`import os, time
x = "interpreter"
pid = os.fork()
if pid == 0:
    x = "child"
    time.sleep(0.3)
    with open(%q, "w") as f:
        f.write("ran")
else:
    print(pid)`, ran))
	require.Empty(t, errOut)
	child, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err, "output %q", out)

	want := fmt.Sprintf("%d interpreter\n", interp)
	check := func() {
		t.Helper()
		r, out, errOut := run(t, c, "print(os.getpid(), x)")
		require.Equal(t, 0, code(r), "stderr %q", errOut)
		require.Equal(t, want, out)
	}
	for range 5 {
		check() // while the child runs its part
	}
	// The child ran its part, then exited: it does not wait for cells.
	start := time.Now()
	for proctree.Alive(child) {
		require.Less(t, time.Since(start), deadline, "the forked child %d still runs once its part of the cell is done", child)
		time.Sleep(10 * time.Millisecond)
	}
	b, err := os.ReadFile(ran)
	require.NoError(t, err, "the child ran its part of the cell")
	require.Equal(t, "ran", string(b))
	for range 10 {
		check()
	}
}

// TestForkedPythonChildLoops: a forked child that goes on running (a loop,
// a server) runs on while the interpreter serves cells, and ends with its
// context.
func TestForkedPythonChildLoops(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	interp := c.Info().PID
	_, out, errOut := run(t, c, `import os, time
x = "interpreter"
pid = os.fork()
if pid == 0:
    x = "child"
    while True:
        time.sleep(0.05)
print(pid)`)
	require.Empty(t, errOut)
	child, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err, "output %q", out)
	for range 10 {
		_, out, _ := run(t, c, "print(os.getpid(), x)")
		require.Equal(t, fmt.Sprintf("%d interpreter\n", interp), out)
	}
	require.True(t, proctree.Alive(child), "the child loops on")
	require.NoError(t, c.Close())
	start := time.Now()
	for proctree.Alive(child) {
		require.Less(t, time.Since(start), deadline, "the forked child %d outlived its context", child)
		time.Sleep(10 * time.Millisecond)
	}
}
