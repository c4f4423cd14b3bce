package inputwatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
)

func TestMain(m *testing.M) { reapertest.Main(m) }

func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestWatcher: a process reading its open stdin is seen waiting; the answer
// clears it and its end leaves it false.
func TestWatcher(t *testing.T) {
	t.Parallel()
	ctx := guard(t)
	p, err := exec.Start(exec.Options{Cmd: `read x; echo "got $x"`, Stdin: process.StdinOpen})
	if err != nil {
		t.Fatal(err)
	}
	w := inputwatch.Start(p)
	for !w.Waiting() {
		select {
		case <-w.Changed():
		case <-p.Done():
			t.Fatal("ended before it was seen waiting")
		case <-ctx.Done():
			t.Fatal("never seen waiting")
		}
	}
	if err := p.WriteStdin([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	w.Written()
	if w.Waiting() {
		t.Fatal("still waiting right after the answer")
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("did not end")
	}
	// The watcher's goroutine ends with the process (goleak checks it).
	for w.Waiting() {
		<-w.Changed()
	}
}
