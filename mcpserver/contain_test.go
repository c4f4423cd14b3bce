package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
)

// run's limits bound the session it creates: a command past its memory
// limit comes back killed by the OOM killer, saying so, and the session
// answers the next command.
func TestRunLimits(t *testing.T) {
	t.Parallel()
	containmenttest.Limited(t, containment.Limits{MemoryBytes: 64 << 20}) // skips without cgroups
	env, _ := testEnv(t)
	c := startMCP(t, env)
	r, text := c.run(map[string]any{"session": "limited", "command": containmenttest.Allocate(256),
		"limits": map[string]any{"memoryBytes": 64 << 20}})
	if !r.OOMKilled || r.Signal != "KILL" || !strings.Contains(text, "OOM killer") {
		t.Fatalf("256 MiB under 64 MiB: %+v %q", r, text)
	}
	r, _ = c.run(map[string]any{"session": "limited", "command": "echo on"})
	if r.OOMKilled || r.Output != "on\n" || r.MemoryPeakBytes == 0 {
		t.Fatalf("the next command: %+v", r)
	}
	c.close()
}
