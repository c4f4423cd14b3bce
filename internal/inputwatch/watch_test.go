package inputwatch_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
)

func TestMain(m *testing.M) { reapertest.Main(m) }

func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestDescendants: the children lists find the tree the scan of every
// process finds, grandchildren and a multi-threaded parent's children
// included.
func TestDescendants(t *testing.T) {
	t.Parallel()
	ctx := guard(t)
	marker := filepath.Join(t.TempDir(), "started")
	// The thread, not the main thread, is the parent of its sleep: its
	// children are listed in its own task's children file.
	p, err := exec.Start(exec.Options{Cmd: `sleep 30 & (sleep 30 & sleep 30; :) & python3 -c '
import subprocess, sys, threading, time
def spawn():
    subprocess.Popen(["sleep", "30"])
    open(sys.argv[1], "w").close()
    time.sleep(30)  # a thread that ends hands its children to another
threading.Thread(target=spawn).start()
time.sleep(30)' ` + marker + ` & wait`, Shell: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	pid := p.Info().PID
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the tree never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := proctree.Descendants(pid)
	got := inputwatch.Descendants(pid)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Descendants = %v, the scan of /proc finds %v", got, want)
	}
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
