package localsandbox

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/conchsh/conch/portlease"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runChild runs the helper program mode in a re-executed test binary and
// returns its exit code.
func runChild(mode string) int {
	switch mode {
	case "interrupt":
		return interruptChild()
	case "abandon":
		return abandonChild()
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 2
}

// interruptChild runs a command that interrupts itself in a session and
// prints its exit code.
func interruptChild() int {
	dir, err := os.MkdirTemp("", "interrupt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Run(ctx, RunOptions{Command: "kill -INT $$; echo survived"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(res.ExitCode)
	return 0
}

// abandonChild spawns a command that runs on, with a job of its own, prints
// the command's pid and waits to be killed: a harness that never stops its
// session.
func abandonChild() int {
	dir, err := os.MkdirTemp("", "abandon")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := s.Spawn(context.Background(), RunOptions{Command: "sleep 300 & sleep 300"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p.PID())
	time.Sleep(5 * time.Minute)
	return 0
}

// held reports whether the lease of port is held.
func held(t *testing.T, port int) bool {
	t.Helper()
	h, err := portlease.Held(portlease.Dir(), port)
	require.NoError(t, err)
	return h
}

// assertDistinct fails t if a port appears twice in ports.
func assertDistinct(t *testing.T, ports []int) {
	t.Helper()
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d handed out twice (all: %v)", p, ports)
		seen[p] = true
	}
}
