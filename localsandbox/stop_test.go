package localsandbox

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
)

// Stop and Destroy end every process started through the session or its
// restricted view, with their descendants and orphans, return without
// waiting, release the port and leave the directory alone.
func TestStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(*Session) error
	}{
		{"stop", (*Session).Stop},
		{"destroy", (*Session).Destroy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testStop(t, tt.end)
		})
	}
}

func testStop(t *testing.T, end func(*Session) error) {
	ctx := hangGuard(t)
	s := newSession(t)
	r := s.Restricted()
	file := func(name string) string { return filepath.Join(s.Dir(), name) }
	if err := s.WriteTextFile("keep.txt", "mine"); err != nil {
		t.Fatal(err)
	}

	spawned, err := s.Spawn(ctx, RunOptions{Command: treeCommand})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteTextFile("view/.keep", ""); err != nil {
		t.Fatal(err)
	}
	viaView, err := r.Spawn(ctx, RunOptions{Command: treeCommand, WorkingDirectory: "view"})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan RunResult, 1)
	go func() {
		res, err := s.Run(ctx, RunOptions{Command: "echo $$ > runpid; sleep 300"})
		if err != nil {
			t.Error(err)
		}
		runDone <- res
	}()
	// An orphan: its parent exits at once, so it is in no tree Stop walks.
	if res, err := r.Run(ctx, RunOptions{Command: "(sleep 300 >/dev/null 2>&1 & echo $! > orphan)"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("orphan: %+v, %v", res, err)
	}
	// A command that ignores SIGTERM, so that Stop cannot be waiting for it.
	stubborn, err := s.Spawn(ctx, RunOptions{Command: "trap '' TERM; sleep 300 & echo $! > stubborn; wait"})
	if err != nil {
		t.Fatal(err)
	}
	waitLines(ctx, file("pids"), 4)
	waitLines(ctx, file("view/pids"), 4)
	waitLines(ctx, file("runpid"), 1)
	waitLines(ctx, file("stubborn"), 1)
	port := s.Ports()[0]

	stopped := make(chan error, 1)
	go func() { stopped <- end(s) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Stop waited for a process that ignores SIGTERM")
	}
	stubbornPid := readPids(t, s, "stubborn")[0]
	if !proctree.Alive(stubbornPid) {
		t.Error("a process ignoring SIGTERM is gone: Stop did more than send SIGTERM")
	}
	syscall.Kill(stubbornPid, syscall.SIGKILL)
	stubborn.Kill()
	syscall.Kill(stubborn.PID(), syscall.SIGKILL)

	if res := <-runDone; res.ExitCode != 143 {
		t.Errorf("Run in flight: exit code %d, want 143", res.ExitCode)
	}
	if code, err := spawned.Wait(ctx); code != 143 || err != nil {
		t.Errorf("spawned: Wait = %d, %v, want 143", code, err)
	}
	if code, err := viaView.Wait(ctx); code != 143 || err != nil {
		t.Errorf("spawned through the restricted view: Wait = %d, %v, want 143", code, err)
	}
	if _, err := stubborn.Wait(ctx); err != nil {
		t.Error(err)
	}
	assertGone(t, readPids(t, s, "pids"))
	assertGone(t, readPids(t, s, "view/pids"))
	assertGone(t, readPids(t, s, "runpid"))
	assertGone(t, readPids(t, s, "orphan"))

	if got := s.Ports(); len(got) != 0 {
		t.Errorf("Ports() after stop = %v", got)
	}
	if _, err := s.PortEndpoint(port, "http"); !errors.Is(err, ErrPortNotLeased) {
		t.Errorf("PortEndpoint after stop: %v", err)
	}
	if held(t, port) {
		t.Errorf("port %d still locked after stop", port)
	}
	if text, ok, err := s.ReadTextFile("keep.txt"); text != "mine" || !ok || err != nil {
		t.Errorf("directory not left alone: %q, %v, %v", text, ok, err)
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Errorf("directory gone: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Destroy(); err != nil {
		t.Errorf("Destroy after Stop: %v", err)
	}
	for name, sb := range map[string]Sandbox{"session": s, "restricted view": r} {
		if _, err := sb.Run(ctx, RunOptions{Command: "touch late"}); !errors.Is(err, ErrStopped) {
			t.Errorf("%s: Run after stop: %v, want ErrStopped", name, err)
		}
		if _, err := sb.Spawn(ctx, RunOptions{Command: "touch late"}); !errors.Is(err, ErrStopped) {
			t.Errorf("%s: Spawn after stop: %v, want ErrStopped", name, err)
		}
	}
	if _, ok, _ := s.ReadFile("late"); ok {
		t.Error("a command ran after stop")
	}
}
