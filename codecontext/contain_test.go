package codecontext

import (
	"testing"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// Children a cell starts in sessions of their own, with an empty
// environment or double-forked, end with the context.
func TestCloseEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	c := newContext(t, Options{Language: Python, Containment: root})
	marker := containmenttest.Marker()
	r, _, stderr := run(t, c, `import subprocess
subprocess.Popen(["sleep", "`+marker+`"], start_new_session=True, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.run(["sh", "-c", "( ( setsid env -i sleep `+marker+` >/dev/null 2>&1 & ) & )"])`)
	if code(r) != 0 {
		t.Fatalf("cell: %+v %s", r, stderr)
	}
	containmenttest.WaitRunning(t, marker, 2)
	c.Close()
	containmenttest.Gone(t, marker)
}
