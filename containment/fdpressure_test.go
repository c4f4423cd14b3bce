package containment_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/internal/fdtest"
	"github.com/conchsh/conch/internal/proctree"
)

// fdHelperEnv makes TestKillUnderFdPressure the helper it runs, in a
// process of its own under a low RLIMIT_NOFILE.
const fdHelperEnv = "CONCH_CONTAINMENT_FD_HELPER"

// Kill and Destroy work when the daemon has no descriptor left (EMFILE):
// before, Destroy's read of cgroup.events by its path failed, so it killed
// nothing and removed nothing, and a cgroup (v2 and its v1 memory twin)
// was left for a process the daemon no longer knew, its escaped processes
// running. The helper runs in a process of its own under `ulimit -n`
// (never this one: the other tests share it), makes a cgroup with a
// memory limit (a v1 twin on a hybrid host), starts two escapes in it,
// uses up its descriptors, then destroys the cgroup.
func TestKillUnderFdPressure(t *testing.T) {
	if os.Getenv(fdHelperEnv) != "" {
		fdHelper(t, os.Getenv(fdHelperEnv))
		return
	}
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20}
	containmenttest.Limited(t, l) // skips where the host cannot apply it
	marker := containmenttest.Marker()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", `ulimit -n 64 && exec "$0" -test.run='^TestKillUnderFdPressure$' -test.count=1 -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), fdHelperEnv+"="+marker)
	// Started as the engine starts its children: this process runs a
	// reaper (TestMain), which would reap a child it does not know of, as
	// the other tests' processes end, before its own wait (ECHILD).
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := proctree.Start(cmd)
	if err == nil {
		err = proctree.Wait(cmd)
	}
	out := buf.Bytes()
	// Whatever happened, end what the helper left.
	for _, pid := range containmenttest.Running(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("process %d outlived Destroy under EMFILE", pid)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		dirs, ok := strings.CutPrefix(sc.Text(), "cgroups: ")
		if !ok {
			continue
		}
		ds := strings.Fields(dirs)
		for _, d := range ds {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s is left", d)
			}
		}
		if len(ds) > 0 {
			if _, err := containment.Clear(strings.TrimPrefix(filepath.Base(ds[0]), "conch-"), ds); err != nil {
				t.Errorf("clear the helper's cgroups: %v", err)
			}
		}
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "destroyed under EMFILE") {
		t.Fatalf("the helper did not run:\n%s", out)
	}
}

// fdHelper is the helper's side of TestKillUnderFdPressure.
func fdHelper(t *testing.T, marker string) {
	l := containment.Limits{MemoryBytes: 64 << 20}
	r := containmenttest.Limited(t, l)
	t.Logf("\ncgroups: %s\n", strings.Join(r.Dirs(), " "))
	m, err := r.New("fd", l)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, containmenttest.Escapes(marker))
	containmenttest.WaitRunning(t, marker, 2)
	var dirs []string
	for _, d := range r.Dirs() {
		dirs = append(dirs, filepath.Join(d, "fd"))
	}
	// Use up every descriptor.
	held := fdtest.Fill(t)
	defer func() { fdtest.Close(held) }()
	if _, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.events")); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("reading a file with every descriptor used: %v, want EMFILE", err)
	}
	populated := m.Populated()
	destroyErr := m.Destroy()
	fdtest.Close(held)
	held = nil
	if !populated {
		t.Error("Populated said empty under EMFILE, with two sleeps in the cgroup")
	}
	if destroyErr != nil {
		t.Fatalf("Destroy under EMFILE: %v", destroyErr)
	}
	if left := containmenttest.Running(marker); len(left) > 0 {
		t.Fatalf("processes %v outlived Destroy under EMFILE", left)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s is left: %v", d, err)
		}
	}
	t.Log("destroyed under EMFILE")
}
