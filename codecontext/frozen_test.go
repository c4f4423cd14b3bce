package codecontext

import (
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// A fork of the interpreter that did not exec keeps every descriptor the
// interpreter had: its own output, which the engine reads, the driver's
// and the cell's. Frozen, it outlives KILL and the cgroup's end, and none
// of them ends. Close returns all the same, soon after the cgroup's end
// gave up: after the cell that forked it ended, and while that cell runs.
func TestCloseDoesNotWaitForAFrozenFork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after string // what the cell does once it forked
	}{
		{"ended", "time.sleep(0.5)"},
		{"running", "time.sleep(300)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: Python, Containment: containmenttest.Root(t, containment.Limits{})})
			fz := containmenttest.Freezer(t) // thawed at cleanup before the context's Close
			code := `import os, time
if os.fork() == 0:
    open("` + fz + `/tasks", "w").write(str(os.getpid()))
    open("` + fz + `/freezer.state", "w").write("FROZEN")
    time.sleep(1)
    os._exit(0)
` + tc.after
			if tc.name == "ended" {
				if r, _, stderr := run(t, c, code); r.ExitCode == nil || *r.ExitCode != 0 {
					t.Fatalf("cell: %+v %s", r, stderr)
				}
			} else if _, err := c.Submit(CellOptions{Code: code}); err != nil {
				t.Fatal(err)
			}
			containmenttest.WaitFrozen(t, fz)
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				c.Close()
			}()
			select {
			case <-closed:
			case <-time.After(60 * time.Second):
				t.Fatal("Close did not return within 60 s while a frozen fork of the interpreter holds its pipes")
			}
		})
	}
}
