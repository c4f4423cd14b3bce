package codecontext

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPythonCellSourcesBounded: the Python driver puts each cell's source
// in linecache for tracebacks, and keeps only the latest cells' there, up
// to its budget (16 MiB, at most 1,000 cells): a long-lived context that
// ran megabytes of cells does not keep them all. A function defined in a
// recent cell shows its source line in a traceback; one of an evicted cell
// shows none, as the README says.
func TestPythonCellSourcesBounded(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	pad := "# " + strings.Repeat("x", 1<<20) + "\n"
	const cells = 24 // of a little over 1 MiB each: more than the budget
	for i := range cells {
		r, _, stderr := run(t, c, fmt.Sprintf("def f%d():\n    raise ValueError('from cell %d')\n%s", i, i, pad))
		require.Equal(t, 0, code(r), stderr)
	}
	_, out, stderr := run(t, c, `import linecache
kept = [n for n in linecache.cache if n.startswith("<cell ")]
print(len(kept), sum(linecache.cache[n][0] for n in kept))`)
	fields := strings.Fields(out)
	require.Len(t, fields, 2, stderr)
	kept, _ := strconv.Atoi(fields[0])
	size, _ := strconv.Atoi(fields[1])
	require.Less(t, kept, cells, "every cell's source is kept")
	require.LessOrEqual(t, size, 16<<20, "more than the budget kept")

	_, _, stderr = run(t, c, fmt.Sprintf("f%d()", cells-1))
	require.Contains(t, stderr, "raise ValueError('from cell 23')", "a recent cell's line is missing")
	_, _, stderr = run(t, c, "f0()")
	require.Contains(t, stderr, "ValueError: from cell 0")
	require.NotContains(t, stderr, "raise ValueError", "an evicted cell's line is shown")

	// A cell that fails shows its own line, however many cells came before.
	for range 1100 {
		run(t, c, "pass")
	}
	_, out, _ = run(t, c, `print(sum(1 for n in linecache.cache if n.startswith("<cell ")))`)
	kept, _ = strconv.Atoi(strings.TrimSpace(out))
	require.LessOrEqual(t, kept, 1000)
	_, _, stderr = run(t, c, "1/0  # the failing line")
	require.Contains(t, stderr, "1/0  # the failing line")
}
