package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/server"
)

// /healthz says how the daemon contains what it starts; a run under a
// memory limit that the OOM killer ends says so, with what it cost.
func TestContainmentOverHTTP(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{Containment: containmenttest.Limited(t, containment.Limits{MemoryBytes: 64 << 20})})
	h, err := d.c.Health(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "cgroup2", h.Containment)
	require.NotEmpty(t, h.LimitControllers["memory"])

	res, _, err := d.c.Run(ctx(t), client.RunOptions{StartOptions: client.StartOptions{
		Cmd: containmenttest.Allocate(256), Limits: &client.Limits{MemoryBytes: 64 << 20}}})
	require.NoError(t, err)
	require.True(t, res.Reason == "signaled" && res.Signal == "KILL" && res.OOMKilled, "%+v", res.WaitResult)
	require.NotNil(t, res.Usage)
	require.NotZero(t, res.Usage.MemoryPeakBytes)

	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Limits: &client.Limits{MemoryBytes: 64 << 20}})
	require.NoError(t, err)
	res, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: containmenttest.Allocate(256)}})
	require.NoError(t, err)
	require.True(t, res.Reason == "signaled" && res.Signal == "KILL" && res.OOMKilled, "%+v", res.WaitResult)
	res, _, err = d.c.RunCommand(ctx(t), s.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo on"}})
	require.NoError(t, err)
	require.Equal(t, "on\n", res.Stdout)
	require.NotNil(t, res.Usage)
}

// A fork bomb under a pids limit leaves the daemon answering /healthz and
// another session's commands within a second, and ends with its session.
func TestForkBombUnderPids(t *testing.T) {
	t.Parallel()
	l := containment.Limits{Pids: 64}
	d := start(t, server.Options{Containment: containmenttest.Limited(t, l)})
	bomb, err := d.c.CreateSession(ctx(t), client.SessionOptions{Limits: &client.Limits{Pids: 64}})
	require.NoError(t, err)
	other, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	_, err = d.c.Submit(ctx(t), bomb.ID, client.CommandOptions{Cmd: ":(){ :|:& };:"})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		c, cancel := context.WithTimeout(t.Context(), time.Second) // a generous guard
		_, err := d.c.Health(c)
		require.NoError(t, err, "healthz during the fork bomb")
		res, _, err := d.c.RunCommand(c, other.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "echo up"}})
		cancel()
		require.NoError(t, err, "another session's command during the fork bomb")
		require.Equal(t, "up\n", res.Stdout)
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, d.c.DeleteSession(ctx(t), bomb.ID))
}

// Limits where the host cannot apply them are refused with 400
// unsupported_operation, for processes, sessions and code contexts alike.
func TestLimitsUnsupported(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{Containment: containment.Open(containment.Config{Disabled: true})})
	h, err := d.c.Health(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "none", h.Containment)
	require.NotEmpty(t, h.ContainmentReason)
	l := &client.Limits{Pids: 10}
	_, err = d.c.Start(ctx(t), client.StartOptions{Cmd: "true", Limits: l})
	requireStatusCode(t, err, http.StatusBadRequest, "unsupported_operation")
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Limits: l})
	requireStatusCode(t, err, http.StatusBadRequest, "unsupported_operation")
	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{Language: "python", Limits: l})
	requireStatusCode(t, err, http.StatusBadRequest, "unsupported_operation")
	_, err = d.c.Start(ctx(t), client.StartOptions{Cmd: "true", Limits: &client.Limits{MemoryBytes: -1}})
	requireStatusCode(t, err, http.StatusBadRequest, "invalid_argument")
}

func requireStatusCode(t *testing.T, err error, status int, code client.Code) {
	t.Helper()
	requireCode(t, err, code)
	require.Equal(t, status, err.(*client.Error).Status)
}

// Records show the limits that bound them: those given, with the daemon's
// defaults for the fields left unset; an exec or PTY process's too. A
// session's showed only what it was given, and a process's none.
func TestRecordsShowTheLimitsThatApply(t *testing.T) {
	t.Parallel()
	defaults := containment.Limits{Pids: 32, CPUMillis: 500}
	root := containmenttest.Root(t, defaults)
	if err := root.Check(containment.Limits{MemoryBytes: 200 << 20, Pids: 32, CPUMillis: 500}); err != nil {
		t.Skipf("needs limits: %v", err)
	}
	d := start(t, server.Options{Containment: root})

	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Limits: &client.Limits{MemoryBytes: 200 << 20}})
	require.NoError(t, err)
	want := client.Limits{MemoryBytes: 200 << 20, Pids: 32, CPUMillis: 500}
	require.NotNil(t, s.Limits)
	require.Equal(t, want, *s.Limits)
	got, err := d.c.Session(ctx(t), s.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Limits)
	require.Equal(t, want, *got.Limits)

	plain, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	require.NotNil(t, plain.Limits)
	require.Equal(t, client.Limits{Pids: 32, CPUMillis: 500}, *plain.Limits)

	for _, kind := range []api.Kind{"exec", "pty"} {
		p, err := d.c.Start(ctx(t), client.StartOptions{Kind: kind, Cmd: "true", Limits: &client.Limits{Pids: 16}})
		require.NoError(t, err, kind)
		require.NotNil(t, p.Limits, kind)
		require.Equal(t, client.Limits{Pids: 16, CPUMillis: 500}, *p.Limits, kind)
		got, err := d.c.Get(ctx(t), p.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Limits, kind)
		require.Equal(t, client.Limits{Pids: 16, CPUMillis: 500}, *got.Limits, kind)
	}
}
