package server_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/server"
)

// TestSessionUniqueName creates one name with uniqueName from several
// clients at once: one session is made, and every other creation is
// refused with 409 already_exists naming it, as is one made later while it
// runs. Once it is gone the name is free again; without uniqueName a name
// may be given twice, as before.
func TestSessionUniqueName(t *testing.T) {
	t.Parallel()
	d := start(t, server.Options{})
	const clients = 4
	var wg sync.WaitGroup
	made := make([]*client.Process, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			made[i], errs[i] = d.c.CreateSession(ctx(t), client.SessionOptions{Name: "one", UniqueName: true})
		})
	}
	wg.Wait()
	var winner string
	for i, err := range errs {
		if err == nil {
			require.Empty(t, winner, "two sessions made for one unique name")
			winner = made[i].ID
		}
	}
	require.NotEmpty(t, winner, "no session made: %v", errs)
	refused := func(err error) {
		t.Helper()
		var ce *client.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Equal(t, client.CodeAlreadyExists, ce.Code)
		require.Equal(t, 409, ce.Status)
		require.Equal(t, winner, ce.SessionID)
		require.Contains(t, ce.Message, `"one"`)
	}
	for _, err := range errs {
		if err != nil {
			refused(err)
		}
	}
	_, err := d.c.CreateSession(ctx(t), client.SessionOptions{Name: "one", UniqueName: true})
	refused(err)
	all, err := d.c.Sessions(ctx(t))
	require.NoError(t, err)
	require.Len(t, all, 1, "%+v", all)

	// Without uniqueName, as before.
	again, err := d.c.CreateSession(ctx(t), client.SessionOptions{Name: "one"})
	require.NoError(t, err)
	require.NoError(t, d.c.DeleteSession(ctx(t), again.ID))

	require.NoError(t, d.c.DeleteSession(ctx(t), winner))
	next, err := d.c.CreateSession(ctx(t), client.SessionOptions{Name: "one", UniqueName: true})
	require.NoError(t, err)
	require.NotEqual(t, winner, next.ID)

	_, err = d.c.CreateSession(ctx(t), client.SessionOptions{UniqueName: true})
	var ce *client.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, client.CodeInvalidArgument, ce.Code)
}

// A session's limits are part of it, as created, in each of its answers.
func TestSessionShowsLimits(t *testing.T) {
	t.Parallel()
	l := client.Limits{Pids: 64, MemoryBytes: 128 << 20}
	d := start(t, server.Options{Containment: containmenttest.Limited(t, containment.Limits{Pids: l.Pids, MemoryBytes: l.MemoryBytes})})
	s, err := d.c.CreateSession(ctx(t), client.SessionOptions{Limits: &l})
	require.NoError(t, err)
	require.Equal(t, &l, s.Limits)
	got, err := d.c.Session(ctx(t), s.ID)
	require.NoError(t, err)
	require.Equal(t, &l, got.Limits)
	all, err := d.c.Sessions(ctx(t))
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, &l, all[0].Limits)
	// The processes' routes show it too.
	asProcess, err := d.c.Get(ctx(t), s.ID)
	require.NoError(t, err)
	require.Equal(t, &l, asProcess.Limits, "GET /v1/processes/ID")
	plain, err := d.c.CreateSession(ctx(t), client.SessionOptions{})
	require.NoError(t, err)
	require.Nil(t, plain.Limits, "none asked")
}
