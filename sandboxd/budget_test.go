package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
	"github.com/conchsh/conch/server"
)

// WriteStdin writes within the daemon's budget for the stdin of all its
// processes (--stdin-budget), wired as conch sandboxd wires it to conch's
// API: it was bounded by each process's own queue alone, so that five
// processes held five times a budget of 1 MiB, counted in it, and conch's
// API then refused its own processes' stdin. A write over the budget is
// RESOURCE_EXHAUSTED, saying how much of it was written.
func TestWriteStdinWithinBudget(t *testing.T) {
	t.Parallel()
	api, err := server.New(server.Options{Token: "t", StdinBudget: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, api.Shutdown(c))
	})
	d := serve(t, Options{
		Start: api.StartExec,
		WriteStdin: func(p *exec.Process, b []byte) error {
			err := api.QueueStdin(p, b)
			if errors.Is(err, server.ErrStdinBudget) {
				err = fmt.Errorf("%w: %w", ErrStdinBudget, err)
			}
			return err
		},
	})
	c, cancel := context.WithCancel(ctx(t))
	defer cancel() // ends the streams: their processes are killed
	var ids []int32
	for range 2 {
		stream, err := d.grpc.Start(c, &sandboxdpb.StartRequest{Config: cfg("sleep", "60")})
		require.NoError(t, err)
		ids = append(ids, initOf(t, stream))
	}
	write := func(id int32, n int) error {
		_, err := d.grpc.WriteStdin(c, &sandboxdpb.WriteStdinRequest{ProcessId: id,
			Payload: &sandboxdpb.WriteStdinRequest_Input{Input: make([]byte, n)}})
		return err
	}
	require.NoError(t, write(ids[0], 768<<10))
	err = write(ids[1], 768<<10)
	s, _ := status.FromError(err)
	require.Equal(t, codes.ResourceExhausted, s.Code(), "over the budget: %v", err)
	require.Contains(t, s.Message(), "wrote 262144 of its 786432 bytes", "%v", err)
	require.Contains(t, s.Message(), "--stdin-budget")
	for _, b := range api.Budgets() {
		if b.Name == "stdin" {
			require.Equal(t, int64(1<<20), b.Used, "the budget holds what was written")
		}
	}
}
