package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/server"
)

// TestStartExec starts processes through StartExec, as conch sandboxd does:
// each is served by the API, counts against MaxProcesses, and ends at
// Shutdown, after which StartExec refuses.
func TestStartExec(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{MaxProcesses: 1})
	p, err := d.srv.StartExec(exec.Options{Argv: []string{"sleep", "60"}, Name: "adopted"})
	require.NoError(t, err)
	got, err := d.c.Get(ctx(t), p.ID())
	require.NoError(t, err)
	require.Equal(t, "adopted", got.Name)
	require.Equal(t, "running", string(got.State))

	_, err = d.srv.StartExec(exec.Options{Argv: []string{"true"}})
	require.ErrorIs(t, err, process.ErrLimit)

	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.srv.Shutdown(sctx))
	select {
	case <-p.Done():
	case <-sctx.Done():
		t.Fatal("Shutdown left the process running")
	}
	_, err = d.srv.StartExec(exec.Options{Argv: []string{"true"}})
	require.True(t, errors.Is(err, process.ErrUnsupported), "after Shutdown: %v", err)
}

// A process started through StartExec is contained as the API's own are:
// in a cgroup of its own, under the daemon's default limits, with what it
// started ended with it, however it left the tree.
func TestStartExecContained(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20}
	containmenttest.Limited(t, l) // skips where the host cannot apply it
	d := start(t, server.Options{Containment: containmenttest.Root(t, l)})

	p, err := d.srv.StartExec(exec.Options{Cmd: containmenttest.Allocate(256)})
	require.NoError(t, err)
	r, err := process.Wait(ctx(t), p)
	require.NoError(t, err)
	require.True(t, r.Reason == process.Signaled && r.Signal == "KILL" && r.OOMKilled,
		"under the default memory limit: %+v", r)

	marker := containmenttest.Marker()
	p, err = d.srv.StartExec(exec.Options{Cmd: containmenttest.Escapes(marker) + "sleep 60"})
	require.NoError(t, err)
	containmenttest.WaitRunning(t, marker, 2)
	require.NoError(t, p.Stop(ctx(t)))
	containmenttest.Gone(t, marker)
}
