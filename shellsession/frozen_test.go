package shellsession

import (
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// A subshell a command forked without an exec keeps the shell's own
// descriptors (its output, which the engine reads) and the command's
// FIFOs: frozen, it outlives KILL and the cgroup's end, and none of them
// ends. Close returns all the same, soon after the cgroup's end gave up:
// after the command that started it ended, and while that command runs.
func TestCloseDoesNotWaitForAFrozenSubshell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, cmd string }{
		{"ended", "( FREEZE ) & sleep 0.5"},
		{"running", "( FREEZE ) & sleep 300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: "bash", Containment: containmenttest.Root(t, containment.Limits{})})
			fz := containmenttest.Freezer(t) // thawed at cleanup before the session's Close
			cmd := strings.Replace(tc.cmd, "FREEZE", containmenttest.Freeze(fz), 1)
			if tc.name == "ended" {
				expectRun(t, s, cmd, 0, "")
			} else if _, err := s.Submit(CommandOptions{Cmd: cmd}); err != nil {
				t.Fatal(err)
			}
			containmenttest.WaitFrozen(t, fz)
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				s.Close()
			}()
			select {
			case <-closed:
			case <-time.After(60 * time.Second):
				t.Fatal("Close did not return within 60 s while a frozen subshell holds the session's pipes")
			}
			requireEnds(t, s, "Close")
		})
	}
}
