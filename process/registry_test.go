package process

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/stretchr/testify/require"
)

// fake is a Process with a fixed description: the registry only reads Info.
type fake struct{ info Info }

func (f *fake) ID() string                                               { return f.info.ID }
func (f *fake) Info() Info                                               { return f.info }
func (f *fake) Log() *logstore.Log                                       { return nil }
func (f *fake) Done() <-chan struct{}                                    { return nil }
func (f *fake) Kill(syscall.Signal, time.Duration, syscall.Signal) error { return nil }
func (f *fake) WriteStdin([]byte) error                                  { return ErrStdinNotOpen }
func (f *fake) CloseStdin() error                                        { return ErrStdinNotOpen }
func (f *fake) Resize(TerminalSize) error                                { return ErrNotPTY }
func (f *fake) Stop(context.Context) error                               { return nil }

func TestRegistryListFiltersAndPages(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	kinds := []Kind{KindExec, KindPTY, KindSession}
	states := []State{Running, Terminal, Starting}
	for i := range 30 {
		require.NoError(t, r.Add(&fake{Info{
			ID: fmt.Sprint("p", i), Name: fmt.Sprint("n", i%2), PID: 100 + i,
			Kind: kinds[i%3], State: states[i%3], SessionID: fmt.Sprint("s", i%5),
		}}))
	}
	require.Error(t, r.Add(&fake{Info{ID: "p0"}}), "an id twice")

	count := func(f Filter) int {
		n, cursor := 0, ""
		for {
			page, next, err := r.List(f, cursor, 4)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 4)
			for _, i := range page {
				require.True(t, f.match(i))
			}
			n += len(page)
			if next == "" {
				return n
			}
			cursor = next
		}
	}
	require.Equal(t, 30, count(Filter{}))
	require.Equal(t, 10, count(Filter{Kind: KindPTY}))
	require.Equal(t, 10, count(Filter{State: Terminal}))
	require.Equal(t, 20, count(Filter{State: Running}), "running lists starting ones too")
	require.Equal(t, 6, count(Filter{SessionID: "s3"}))
	require.Equal(t, 15, count(Filter{Name: "n1"}))
	require.Equal(t, 1, count(Filter{PID: 107}))
	require.Equal(t, r.Count(Filter{Kind: KindExec}), count(Filter{Kind: KindExec}))

	// Pages are in creation order and do not repeat.
	seen := map[string]bool{}
	var order []string
	for cursor := ""; ; {
		page, next, err := r.List(Filter{}, cursor, 7)
		require.NoError(t, err)
		for _, i := range page {
			require.False(t, seen[i.ID])
			seen[i.ID] = true
			order = append(order, i.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, "p0", order[0])
	require.Equal(t, "p29", order[29])

	_, _, err := r.List(Filter{}, "not a cursor!", 5)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestRegistryGetRemoveDelete(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for i := range 100 {
		require.NoError(t, r.Add(&fake{Info{ID: fmt.Sprint(i)}}))
	}
	for i := range 90 {
		require.True(t, r.Remove(fmt.Sprint(i)))
	}
	require.False(t, r.Remove("0"), "removed twice")
	_, err := r.Get("0")
	require.ErrorIs(t, err, ErrNotFound)
	p, err := r.Get("95")
	require.NoError(t, err)
	require.Equal(t, "95", p.ID())
	require.Len(t, r.All(), 10)
	require.NoError(t, r.Delete(t.Context(), "95"))
	require.ErrorIs(t, r.Delete(t.Context(), "95"), ErrNotFound)
}

func TestParseSignal(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigint": syscall.SIGINT, " KILL ": syscall.SIGKILL, "SIGUSR1": syscall.SIGUSR1} {
		got, err := ParseSignal(name)
		require.NoError(t, err, name)
		require.Equal(t, want, got)
		require.Equal(t, want, must(ParseSignal(SignalName(got))))
	}
	// Every named signal, reported by name and parsed back: a death by
	// SIGSYS was reported "31", and kill refused SYS, TRAP, BUS, XCPU.
	for sig := syscall.Signal(1); sig <= 31; sig++ {
		name := SignalName(sig)
		require.NotRegexp(t, `^[0-9]+$`, name, "signal %d", int(sig))
		require.Equal(t, sig, must(ParseSignal(name)), name)
	}
	require.Equal(t, "SYS", SignalName(syscall.SIGSYS))
	require.Equal(t, "34", SignalName(34), "a real-time signal has its number")
	for _, bad := range []string{"", "NOPE", "9", "SIG", "SIGSIG"} {
		_, err := ParseSignal(bad)
		require.ErrorIs(t, err, ErrInvalidArgument, bad)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
