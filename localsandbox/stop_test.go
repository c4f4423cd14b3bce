package localsandbox

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, s.WriteTextFile("keep.txt", "mine"))

	spawned, err := s.Spawn(ctx, RunOptions{Command: treeCommand})
	require.NoError(t, err)
	require.NoError(t, r.WriteTextFile("view/.keep", ""))
	viaView, err := r.Spawn(ctx, RunOptions{Command: treeCommand, WorkingDirectory: "view"})
	require.NoError(t, err)
	runDone := make(chan RunResult, 1)
	go func() {
		res, err := s.Run(ctx, RunOptions{Command: "echo $$ > runpid; sleep 300"})
		assert.NoError(t, err)
		runDone <- res
	}()
	// An orphan: its parent exits at once, so it is in no tree Stop walks.
	res, err := r.Run(ctx, RunOptions{Command: "(sleep 300 >/dev/null 2>&1 & echo $! > orphan)"})
	require.False(t, err != nil || res.ExitCode != 0, "orphan: %+v, %v", res, err)
	// A command that ignores SIGTERM, so that Stop cannot be waiting for it,
	// and an orphan that ignores it too, in a session of its own.
	stubborn, err := s.Spawn(ctx, RunOptions{Command: "trap '' TERM; sleep 300 & echo $! > stubborn; wait"})
	require.NoError(t, err)
	res, err = r.Run(ctx, RunOptions{Command: "setsid bash -c 'trap \"\" TERM; echo $$ > stubborn-orphan; exec sleep 300' >/dev/null 2>&1 &"})
	require.False(t, err != nil || res.ExitCode != 0, "stubborn orphan: %+v, %v", res, err)
	// A Run in flight that handles SIGTERM and goes on.
	trapDone := make(chan RunResult, 1)
	go func() {
		res, err := s.Run(ctx, RunOptions{Command: "trap 'echo got TERM' TERM; echo $$ > trapper; while :; do sleep 0.05; done"})
		assert.NoError(t, err)
		trapDone <- res
	}()
	waitLines(ctx, file("pids"), 4)
	waitLines(ctx, file("view/pids"), 4)
	waitLines(ctx, file("runpid"), 1)
	waitLines(ctx, file("stubborn"), 1)
	waitLines(ctx, file("stubborn-orphan"), 1)
	waitLines(ctx, file("trapper"), 1)
	port := s.Ports()[0]

	stopped := make(chan error, 1)
	go func() { stopped <- end(s) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Stop waited for a process that ignores SIGTERM")
	}
	stubbornPid := readPids(t, s, "stubborn")[0]
	assert.True(t, proctree.Alive(stubbornPid), "a process ignoring SIGTERM is gone at once: Stop did more than send SIGTERM")
	// What outlives SIGTERM gets SIGKILL after the grace: it ran on for
	// ever, a Run in flight with it.
	code, err := stubborn.Wait(ctx)
	assert.False(t, code != 137 || err != nil, "ignoring SIGTERM: Wait = %d, %v, want 137", code, err)
	select {
	case res := <-trapDone:
		assert.Equal(t, 137, res.ExitCode, "Run in flight handling SIGTERM: exit code %d, want 137", res.ExitCode)
		assert.Contains(t, res.Stdout, "got TERM")
	case <-ctx.Done():
		t.Fatal("a Run in flight that handles SIGTERM outlived Stop")
	}
	assertGone(t, readPids(t, s, "stubborn"))
	assertGone(t, readPids(t, s, "stubborn-orphan"))
	assertGone(t, readPids(t, s, "trapper"))

	res = <-runDone
	assert.Equal(t, 143, res.ExitCode, "Run in flight: exit code %d, want 143", res.ExitCode)
	code, err = spawned.Wait(ctx)
	assert.False(t, code != 143 || err != nil, "spawned: Wait = %d, %v, want 143", code, err)
	code, err = viaView.Wait(ctx)
	assert.False(t, code != 143 || err != nil, "spawned through the restricted view: Wait = %d, %v, want 143", code, err)
	assertGone(t, readPids(t, s, "pids"))
	assertGone(t, readPids(t, s, "view/pids"))
	assertGone(t, readPids(t, s, "runpid"))
	assertGone(t, readPids(t, s, "orphan"))

	got := s.Ports()
	assert.Empty(t, got, "Ports() after stop = %v", got)
	_, err = s.PortEndpoint(port, "http")
	assert.ErrorIs(t, err, ErrPortNotLeased, "PortEndpoint after stop")
	assert.False(t, held(t, port), "port %d still locked after stop", port)
	text, ok, err := s.ReadTextFile("keep.txt")
	assert.False(t, text != "mine" || !ok || err != nil, "directory not left alone: %q, %v, %v", text, ok, err)
	_, err = os.Stat(s.Dir())
	assert.NoError(t, err, "directory gone")

	assert.NoError(t, s.Stop(), "second Stop")
	assert.NoError(t, s.Destroy(), "Destroy after Stop")
	for name, sb := range map[string]Sandbox{"session": s, "restricted view": r} {
		_, err := sb.Run(ctx, RunOptions{Command: "touch late"})
		assert.ErrorIs(t, err, ErrStopped, "%s: Run after stop, want ErrStopped", name)
		_, err = sb.Spawn(ctx, RunOptions{Command: "touch late"})
		assert.ErrorIs(t, err, ErrStopped, "%s: Spawn after stop, want ErrStopped", name)
	}
	_, ok, _ = s.ReadFile("late")
	assert.False(t, ok, "a command ran after stop")
}

// termCounter is a program that appends a line to the file named by its
// argument for each SIGTERM it gets, and exits a second after the first:
// long enough to count a second one sent with it. It writes NAME.ready once
// its handler is set.
const termCounter = `python3 -c '
import signal, sys, time
name = sys.argv[1]
first = []
def h(n, f):
    open(name, "a").write("TERM\n")
    if not first:
        first.append(time.time())
signal.signal(signal.SIGTERM, h)
open(name + ".ready", "w").write("ready\n")
while not first or time.time() - first[0] < 1:
    time.sleep(0.01)
'`

// Stop sends each process SIGTERM once: a tracked command, the children of
// its shell and an orphan it left. Many servers take a second SIGTERM for
// "quit now", which cut short the graceful shutdown the grace is for: each
// got one from its tree and another from the search for orphans.
func TestStopSendsTermOnce(t *testing.T) {
	t.Parallel()
	if _, err := osexec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the programs that count signals")
	}
	ctx := hangGuard(t)
	s := newSession(t)
	names := []string{"alone", "bg", "fg", "orphan"}
	alone, err := s.Spawn(ctx, RunOptions{Command: termCounter + " alone"})
	require.NoError(t, err)
	shell, err := s.Spawn(ctx, RunOptions{Command: "(" + termCounter + " orphan &); " +
		termCounter + " bg & " + termCounter + " fg; wait"})
	require.NoError(t, err)
	for _, name := range names {
		waitLines(ctx, filepath.Join(s.Dir(), name+".ready"), 1)
	}

	require.NoError(t, s.Stop())
	_, err = alone.Wait(ctx)
	require.NoError(t, err)
	_, err = shell.Wait(ctx)
	require.NoError(t, err)
	// The orphan is no process's child here: it is gone once no process
	// carries the session's id.
	for ctx.Err() == nil && len(proctree.Holding(SandboxEnv+"="+s.id)) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for _, name := range names {
		text, _, err := s.ReadTextFile(name)
		require.NoError(t, err)
		assert.Equal(t, "TERM\n", text, "%s: the SIGTERMs it got", name)
	}
}
