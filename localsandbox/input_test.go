package localsandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpawnWaitsForInput(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := s.Spawn(ctx, RunOptions{Command: `printf 'name? '; read n; echo "hi $n"`, OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForInput(ctx); err != nil {
		t.Fatalf("WaitForInput: %v", err)
	}
	if !p.WaitingForInput() {
		t.Fatal("WaitingForInput is false after WaitForInput")
	}
	if err := p.WriteStdin([]byte("ada\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForInput(ctx); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitForInput after the answer: %v, want ErrExited", err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "name? hi ada\n" {
		t.Fatalf("stdout %q", out)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("Wait: %d, %v", code, err)
	}
}

func TestSpawnClosedStdinNeverWaits(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := s.Spawn(ctx, RunOptions{Command: `read n; sleep 0.3`})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForInput(ctx); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitForInput: %v, want ErrExited", err)
	}
	if p.WriteStdin([]byte("x")) == nil {
		t.Fatal("WriteStdin to a closed stdin succeeded")
	}
}

// TestWriteStdinLarge: WriteStdin of more than the input queue holds writes
// every byte, waiting for the command to read them as a pipe's writer
// does, rather than queueing the first MiB and dropping the rest; writes
// from several goroutines keep each one's bytes together.
func TestWriteStdinLarge(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The command reads nothing for a while: the writes must wait.
	p, err := s.Spawn(ctx, RunOptions{Command: `sleep 0.5; od -An -v -tx1 -w1 | uniq -c | wc -l; `, OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	const each = 3 << 20
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = p.WriteStdin(bytes.Repeat([]byte{byte('a' + i)}, each)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("WriteStdin %d: %v", i, err)
		}
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	// Four runs of one byte each: every byte came, no write split another.
	if got := strings.TrimSpace(string(out)); got != "4" {
		t.Fatalf("runs of equal bytes read: %s, want 4", got)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("Wait: %d, %v", code, err)
	}
}

// waitingWrite spawns, under ctx, a command with open stdin that never
// reads it, and a WriteStdin of 4 MiB to it, which it requires to be
// waiting after 300 ms; done gives the write's result.
func waitingWrite(t *testing.T, ctx context.Context) (*Process, <-chan error) {
	t.Helper()
	s := newSession(t)
	p, err := s.Spawn(ctx, RunOptions{Command: `exec sleep 600`, OpenStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.WriteStdin(make([]byte, 4<<20)) }()
	select {
	case err := <-done:
		t.Fatalf("WriteStdin returned before the command read or ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	return p, done
}

// TestWriteStdinEndsWithCommand: a WriteStdin that waits for a command that
// does not read returns once the command ends, with an error.
func TestWriteStdinEndsWithCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, done := waitingWrite(t, ctx)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("WriteStdin to a command that ended before it read said nil")
		}
	case <-ctx.Done():
		t.Fatal("WriteStdin still waits after the command ended")
	}
}

// TestCloseStdinEndsAWaitingWrite: CloseStdin while a WriteStdin waits for
// a command that does not read makes the write fail at once, saying how
// much the command took, while the command runs on. It waited until the
// command ended, for ever for one that never does.
func TestCloseStdinEndsAWaitingWrite(t *testing.T) {
	t.Parallel()
	p, done := waitingWrite(t, hangGuard(t))
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), " of 4194304 bytes") || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("WriteStdin cut by CloseStdin: %v; want how much was taken, and that stdin was closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteStdin still waits 10 s after CloseStdin")
	}
	if p.exited() {
		t.Fatal("the command ended: the write did not fail because of the close")
	}
	if err := p.WriteStdin([]byte("x")); err == nil {
		t.Fatal("WriteStdin after CloseStdin succeeded")
	}
}
