package resident

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/proctree"
)

// A fork of the interpreter that did not exec holds the interpreter's own
// output (bash keeps copies of it on descriptors that no exec closes):
// frozen, it outlives KILL and the cgroup's end, and the pipe never ends.
// Close returns all the same, soon after the cgroup's end gave up, and
// what the interpreter said before is kept.
func TestCloseDoesNotWaitForWhatOutlivesKill(t *testing.T) {
	root := containmenttest.Root(t, containment.Limits{})
	fz := containmenttest.Freezer(t) // thawed first at cleanup, then the root goes
	id := "frozen-" + containmenttest.Nonce()
	h := New(Config{ID: id, Noun: "session", Ended: errors.New("ended"), StopGrace: time.Second, Containment: root})
	cmd := exec.Command("bash", "-c", "echo said-before >&2; ( "+containmenttest.Freeze(fz)+" ) & sleep 300")
	cmd.Env = []string{"PATH=/usr/bin:/bin", proctree.Tag(id)}
	require.NoError(t, h.Start(cmd))
	containmenttest.WaitFrozen(t, fz)

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		h.Close()
	}()
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return within 60 s while a frozen fork of the interpreter holds its output")
	}
	select {
	case <-h.Diag().Ended():
	default:
		t.Fatal("Close returned before the reader of the interpreter's output stopped")
	}
	require.Contains(t, h.Diag().Tail(), "said-before")
}
