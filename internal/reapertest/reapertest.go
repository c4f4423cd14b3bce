// Package reapertest runs a package's tests the way the daemon runs: as the
// subreaper of everything they start, with a reaper for the orphans, and a
// goroutine leak check once they pass.
package reapertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"go.uber.org/goleak"
)

// Main is a TestMain: it runs m and exits with its status, or with 1 when
// the subreaper or reaper cannot be set up or a goroutine leaks. In the
// copy of the binary that processtest.CloseDescriptors starts, it does
// that work instead.
func Main(m *testing.M) {
	processtest.ServeCloseDescriptors()
	if err := proctree.EnableSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	stop, err := proctree.StartReaper()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reaper:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// RunChild runs the test name of this test binary in a process of its own,
// with the environment variable env (NAME=VALUE) added, which the test
// looks for to run rather than skip, and returns what it printed (-test.v)
// once it passed; t fails if it did not, or ran past 2 minutes. For a test
// that changes what is the whole process's, such as its limit of open
// files. The child is started and waited for as the engine does its
// children: Main's reaper would otherwise reap it first, and the wait fail
// with "no child processes".
func RunChild(t *testing.T, name, env string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := proctree.Start(cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	if err := proctree.Wait(cmd); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
	return out.String()
}

// CombinedOutput runs cmd to its end like cmd.CombinedOutput, and returns
// what it wrote to its standard output and error. For a program a test runs
// of its own, beside the engine: it is started and waited for through
// proctree, as the engine does its children. Under Main the reaper reaps
// every zombie child it was not told of, often before os/exec's own wait,
// which then fails with "waitid: no child processes" and loses the exit
// status; cmd.CombinedOutput, Output, Run and Start with Wait all do so.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("reapertest: Stdout or Stderr already set")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := proctree.Start(cmd); err != nil {
		return nil, err
	}
	err := proctree.Wait(cmd)
	return out.Bytes(), err
}
