package localsandbox

import (
	"context"
	"errors"
	"io"
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
