package inputwatch

import (
	"context"
	"io"
	"os"
	osexec "os/exec"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
)

// bare is a process started here, watched without an engine reading its
// output: what it prints stays in its pipe until the test reads it.
type bare struct {
	pid    int
	in     inputwait.Input
	log    *logstore.Log
	done   chan struct{}
	queued int // its StdinQueued
}

func (b *bare) InputTree() ([]int, inputwait.Input, bool) {
	return append([]int{b.pid}, proctree.Descendants(b.pid)...), b.in, true
}
func (b *bare) Log() *logstore.Log    { return b.log }
func (b *bare) Done() <-chan struct{} { return b.done }
func (b *bare) StdinQueued() int      { return b.queued }

// blockedInRead returns once b's shell is blocked in its read.
func (b *bare) blockedInRead(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		pids, in, _ := b.InputTree()
		if ok, err := inputwait.Waiting(pids, in); err != nil {
			t.Fatal(err)
		} else if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the shell never blocked in read")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPromptPending: a process that printed a prompt and blocked reading
// is not said to wait while the prompt is still unread in its pipe.
func TestPromptPending(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	cmd := osexec.Command("dash", "-c", `printf 'name? '; read x`)
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := proctree.Start(cmd); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	defer func() {
		inW.Close() // read x gets end-of-file and the shell exits
		_ = proctree.Wait(cmd)
	}()
	in, err := inputwait.InputOf(inW)
	if err != nil {
		t.Fatal(err)
	}
	b := &bare{pid: cmd.Process.Pid, in: in, log: logstore.New(logstore.Options{}), done: make(chan struct{})}
	w := &Watcher{p: b, poke: make(chan struct{}, 1), changed: make(chan struct{})}
	b.blockedInRead(ctx, t)
	if w.look() {
		t.Fatal("said to wait with its prompt unread in the pipe")
	}
	buf := make([]byte, 16)
	n, err := io.ReadAtLeast(outR, buf, len("name? "))
	if err != nil || string(buf[:n]) != "name? " {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if !w.look() {
		t.Fatal("not said to wait once its prompt was read")
	}
}

// TestInputQueuedIsNotWaiting: a process blocked reading while input
// written to it is still in its feeder's queue, not yet in its pipe, does
// not wait for input: the input ends its read. Told of the input as it was
// queued, the watcher looked before the feeder wrote it, under load, and an
// interact that answered a prompt came back at once, 202, saying the
// process waited.
func TestInputQueuedIsNotWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command("dash", "-c", `read x`)
	cmd.Stdin = inR
	if err := proctree.Start(cmd); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	defer func() {
		inW.Close()
		_ = proctree.Wait(cmd)
	}()
	in, err := inputwait.InputOf(inW)
	if err != nil {
		t.Fatal(err)
	}
	b := &bare{pid: cmd.Process.Pid, in: in, log: logstore.New(logstore.Options{}), done: make(chan struct{}), queued: 3}
	w := &Watcher{p: b, poke: make(chan struct{}, 1), changed: make(chan struct{})}
	b.blockedInRead(ctx, t)
	if w.look() {
		t.Fatal("said to wait with input queued for it")
	}
	b.queued = 0
	if !w.look() {
		t.Fatal("not said to wait with nothing queued")
	}
}
