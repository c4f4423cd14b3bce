// Package reapertest runs a package's tests the way the daemon runs: as the
// subreaper of everything they start, with a reaper for the orphans, and a
// goroutine leak check once they pass.
package reapertest

import (
	"fmt"
	"os"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
	"go.uber.org/goleak"
)

// Main is a TestMain: it runs m and exits with its status, or with 1 when
// the subreaper or reaper cannot be set up or a goroutine leaks.
func Main(m *testing.M) {
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
