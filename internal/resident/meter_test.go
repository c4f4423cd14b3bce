package resident

import (
	"os/exec"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/process"
)

// countingCgroup is a cgroup whose CPU time grows by a second at each read,
// which it counts.
type countingCgroup struct {
	containment.Manager
	reads int
}

func (c *countingCgroup) CPU() time.Duration                           { c.reads++; return time.Duration(c.reads) * time.Second }
func (c *countingCgroup) MemoryPeak() int64                            { return 0 }
func (c *countingCgroup) ResetPeak()                                   {}
func (c *countingCgroup) OOMKills() int64                              { return 0 }
func (c *countingCgroup) Start(*exec.Cmd, func(*exec.Cmd) error) error { return nil }

// A command that begins right after another ended starts from the CPU time
// that one's end read, with no read of its own; one that begins later reads
// it anew.
func TestMeterStartsFromTheLastEnd(t *testing.T) {
	cg := &countingCgroup{}
	h := New(Config{})
	h.cg = cg
	ended := process.Result{Reason: process.Exited}

	r := h.Meter().Account(ended, new(process.Usage), false) // reads 1, then 2
	if cg.reads != 2 || r.Usage.CPU != time.Second {
		t.Fatalf("a first command: %d reads, CPU %v; want 2 reads, 1s", cg.reads, r.Usage.CPU)
	}
	r = h.Meter().Account(ended, new(process.Usage), false) // starts from 2, reads 3
	if cg.reads != 3 || r.Usage.CPU != time.Second {
		t.Fatalf("a command right after: %d reads in all, CPU %v; want 3 reads, 1s", cg.reads, r.Usage.CPU)
	}
	time.Sleep(2 * cpuFresh)
	r = h.Meter().Account(ended, new(process.Usage), false) // reads 4, then 5
	if cg.reads != 5 || r.Usage.CPU != time.Second {
		t.Fatalf("a command after a pause: %d reads in all, CPU %v; want 5 reads, 1s", cg.reads, r.Usage.CPU)
	}
}
