package resident

import (
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/process"
)

// Meter measures what one command or cell costs: the session's cgroup
// from its start to its end. The zero Meter measures nothing.
type Meter struct {
	cg   containment.Manager
	base containment.Stats
}

// Meter starts measuring a command or cell that starts now, resetting the
// memory peak where the kernel allows it.
func (h *Host) Meter() Meter {
	if h.cg == nil {
		return Meter{}
	}
	m := Meter{cg: h.cg, base: h.cg.Stats()}
	h.cg.ResetPeak()
	return m
}

// Account adds to r, the result of the command or cell measured, its usage,
// and whether the OOM killer ended it: it died of KILL (or its shell
// reports 128+9) and the cgroup's count of OOM kills rose meanwhile.
func (m Meter) Account(r process.Result) process.Result {
	if m.cg == nil {
		return r
	}
	s := m.cg.Stats()
	r.Usage = &process.Usage{CPU: max(s.CPU-m.base.CPU, 0), MemoryPeak: s.MemoryPeak}
	if s.OOMKills > m.base.OOMKills && killedHard(r) {
		r.OOMKilled = true
		if r.Reason == process.Exited {
			r.Reason, r.Signal = process.Signaled, "KILL"
		}
	}
	return r
}

// killedHard reports whether r is how a command killed by SIGKILL ends.
func killedHard(r process.Result) bool {
	switch r.Reason {
	case process.Lost:
		return true
	case process.Signaled:
		return r.Signal == "KILL"
	case process.Exited:
		return r.ExitCode != nil && (*r.ExitCode == 128+9 || *r.ExitCode == 256+9)
	}
	return false
}
