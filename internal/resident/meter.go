package resident

import (
	"syscall"
	"time"

	"github.com/conchsh/conch/process"
)

// Meter measures what one command or cell costs: the session's cgroup
// from its start to its end. The zero Meter measures nothing. It reads as
// little as it can, since a session reads it around every command: the CPU
// time and a peak reset at the start, the CPU time and the peak at the end,
// and the OOM kill count.
type Meter struct {
	h   *Host
	cpu time.Duration // at the start
}

// Meter starts measuring a command or cell that starts now, resetting the
// memory peak where the kernel allows it.
func (h *Host) Meter() Meter {
	if h.cg == nil {
		return Meter{}
	}
	m := Meter{h: h, cpu: h.startCPU()}
	h.cg.ResetPeak()
	return m
}

// cpuFresh is how recent the CPU time a command's end read must be for the
// next command to start from it. A command sent right after another ended
// finds the interpreter where that one left it, waiting for its input: a
// read of /proc or of the cgroup at its start would find what the end found
// (in ticks of 10 ms, from /proc), or what background processes used in the
// moment between, which goes to the command now rather than to none.
const cpuFresh = time.Millisecond

// startCPU returns the session's CPU time now: as the last command's end
// read it, when that was less than cpuFresh ago.
func (h *Host) startCPU() time.Duration {
	h.mu.Lock()
	cpu, at := h.cpu, h.cpuAt
	h.mu.Unlock()
	if !at.IsZero() && time.Since(at) < cpuFresh {
		return cpu
	}
	return h.cg.CPU()
}

// endCPU reads the session's CPU time at a command's end, and keeps it for
// startCPU.
func (h *Host) endCPU() time.Duration {
	cpu := h.cg.CPU()
	select {
	case <-h.exited:
		// Reaped, the interpreter has no /proc to read any more (the
		// read gives what was read last, at the command's start): its
		// rusage has the same time, its own and its reaped children's.
		cpu = max(cpu, h.reapedCPU())
	default:
	}
	h.mu.Lock()
	h.cpu, h.cpuAt = cpu, time.Now()
	h.mu.Unlock()
	return cpu
}

// Account adds to r, the result of the command or cell measured, its
// usage, and whether the OOM killer ended it: it died of KILL (or its
// shell reports 128+9) that the engine did not send (sentKill says
// whether the command's own kill sent one; an End of the interpreter is
// the engine's too), and the cgroup's count of OOM kills rose since the
// previous command's end. The count is read at every end, so that a kill
// during a command that ended well (a child of it the killer ended) is
// that command's and not the next one's that dies of KILL. The usage is
// written to u, which r then points to: the command's own room for it, so
// that accounting allocates nothing.
func (m Meter) Account(r process.Result, u *process.Usage, sentKill bool) process.Result {
	if m.h == nil {
		return r
	}
	cg := m.h.cg
	*u = process.Usage{CPU: max(m.h.endCPU()-m.cpu, 0), MemoryPeak: cg.MemoryPeak()}
	if u.MemoryPeak > 0 { // known: a cgroup's, for the session's end (see Host.usage)
		m.h.mu.Lock()
		m.h.peak = max(m.h.peak, u.MemoryPeak)
		m.h.mu.Unlock()
	}
	r.Usage = u
	if m.h.oomKilledSince() && killedHard(r) && !sentKill && !m.h.EndedIt() {
		r.OOMKilled = true
		if r.Reason == process.Exited {
			r.Reason, r.Signal = process.Signaled, "KILL"
		}
	}
	return r
}

// oomKilledSince reports whether the cgroup's OOM kill count rose since it
// was last asked.
func (h *Host) oomKilledSince() bool {
	n := h.cg.OOMKills()
	h.mu.Lock()
	defer h.mu.Unlock()
	rose := n > h.oomSeen
	h.oomSeen = max(n, h.oomSeen)
	return rose
}

// noteReaped notes, as the interpreter is reaped and before the command
// it ran is ended (whose Account looks at the count again), whether the
// OOM killer is what ended it: it died of KILL, the engine had not ended
// it (End, whose KILL it may be: a kill of the session, its deletion), and
// the cgroup's count of OOM kills rose since the last command's end. A
// kill counted during an earlier command that ended well is not this
// death's, nor is one of a child of the command the engine then ended.
func (h *Host) noteReaped() {
	st, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		return
	}
	n := h.cg.OOMKills()
	h.mu.Lock()
	h.oomKilledIt = n > h.oomSeen && !h.endedIt
	h.mu.Unlock()
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
