package processtest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestWriteExecutableNotBusy writes and runs a script over and over while
// other goroutines fork and exec without pause, as a parallel test's do:
// a fork that lands while the file is open for writing keeps a write
// descriptor until its exec, and the script's exec fails with ETXTBSY
// (seen in CI: a server test's fake shell, "text file busy"). Written by
// WriteExecutable, it never does.
func TestWriteExecutableNotBusy(t *testing.T) {
	dir := t.TempDir()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				exec.Command("true").Run()
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 100 {
		path := filepath.Join(dir, "script"+strconv.Itoa(i))
		WriteExecutable(t, path, "#!/bin/sh\nexit 0\n")
		if err := exec.Command(path).Run(); err != nil {
			if errors.Is(err, syscall.ETXTBSY) {
				t.Fatalf("run %d: %v", i, err)
			}
			t.Fatal(err)
		}
	}
}
