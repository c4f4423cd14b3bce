package main

import (
	"flag"
	"io"
	"strings"
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

// --memory, --pids and --cpu take 0 alike, as the daemon's default (which
// the API gives an absent or zero limit), and say so: --memory 0 was
// refused while --pids 0 was taken, and both said "no limit".
func TestLimitFlagsTakeZeroAsTheDefault(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := addLimitFlags(fs, "process")
	if err := fs.Parse([]string{"--memory", "0", "--pids", "0", "--cpu", "0"}); err != nil {
		t.Fatalf("0 refused: %v", err)
	}
	if got := l.limits(); got != nil {
		t.Fatalf("0 asked for %+v; want the daemon's defaults (none asked)", *got)
	}
	if err := fs.Parse([]string{"--memory", "64M", "--pids", "16"}); err != nil {
		t.Fatal(err)
	}
	if got := l.limits(); got == nil || got.MemoryBytes != 64<<20 || got.Pids != 16 || got.CPUMillis != 0 {
		t.Fatalf("limits %+v", got)
	}
	for _, args := range [][]string{{"--memory", "-1"}, {"--pids", "-1"}, {"--cpu", "x"}} {
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v taken", args)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Usage, "no limit") || !strings.Contains(f.Usage, "0: the daemon's default") {
			t.Errorf("--%s says %q", f.Name, f.Usage)
		}
	})
	fs = flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addLimitFlags(fs, "process")
	if err := fs.Parse([]string{"--pids", "-1"}); err == nil || strings.Contains(err.Error(), "no limit") {
		t.Errorf("--pids -1: %v", err)
	}
}
