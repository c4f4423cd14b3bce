package codecontext

import (
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// A cell that finds the driver's end marker and writes it with what no
// driver writes after it (no _STATUS_) ends failed, saying so, and the
// marker, its nonce with it, never reaches the cell's output: passed
// through, it was output, and the cell reported what came after. The
// context runs its next cell as before.
func TestCellsOwnMarkerWithBadTrailer(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	// The driver's state is a class named _S, found through the collector.
	r, stdout, stderr := run(t, c, `import gc, os
S = [o for o in gc.get_objects() if isinstance(o, type) and o.__name__ == "_S"][0]
os.write(1, b"before\n")
os.write(1, S.marker() + b"16#0  /\0")
os.write(1, b"after\n")`)
	require.Equal(t, process.Failed, r.Reason, "%+v %d %q %q", r, code(r), stdout, stderr)
	require.Contains(t, r.Error, "end marker of its own")
	require.Equal(t, "before\n", stdout)
	r, stdout, _ = run(t, c, `print("next")`)
	require.Equal(t, 0, code(r), "%+v", r)
	require.Equal(t, "next\n", stdout)
}
