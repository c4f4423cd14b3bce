package main

import (
	"testing"

	"github.com/conchsh/conch/containment"
)

// --default-limits: 0 is no limit for memory as for pids and cpu, and a
// name given twice is refused rather than the last one taken.
func TestParseLimits(t *testing.T) {
	for in, want := range map[string]containment.Limits{
		"memory=512M,pids=256,cpu=500": {MemoryBytes: 512 << 20, Pids: 256, CPUMillis: 500},
		"memory=0,pids=0,cpu=0":        {},
		"memory=0,pids=64":             {Pids: 64},
	} {
		if l, err := parseLimits(in); err != nil || l != want {
			t.Errorf("parseLimits(%q) = %+v, %v; want %+v", in, l, err, want)
		}
	}
	for _, in := range []string{"memory=512M,memory=1G", "pids=1,pids=64", "memory=-1", "memory=x", "disk=1", "memory"} {
		if l, err := parseLimits(in); err == nil {
			t.Errorf("parseLimits(%q) = %+v, no error", in, l)
		}
	}
}
