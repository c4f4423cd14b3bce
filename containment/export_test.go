package containment

import (
	"path/filepath"

	"github.com/conchsh/conch/internal/proctree"
)

// WithoutKillFile makes m end its processes by freezing the cgroup, as on
// kernels without cgroup.kill.
func WithoutKillFile(m Manager) {
	switch m := m.(type) {
	case *cgroup:
		m.killFile = false
	case *hybrid:
		m.killFile = false
	}
}

// WithoutController returns a copy of r that has no controller c.
func WithoutController(r *Root, c string) *Root {
	cp := *r
	cp.v2, cp.v1 = map[string]bool{}, map[string]v1dir{}
	for k, v := range r.v2 {
		cp.v2[k] = v && k != c
	}
	for k, v := range r.v1 {
		if k != c {
			cp.v1[k] = v
		}
	}
	return &cp
}

// Throttled reads how often the CPU limit of m held its processes back.
func Throttled(m Manager) int64 {
	switch m := m.(type) {
	case *hybrid:
		for _, d := range m.v1 {
			if n, ok := readKey(filepath.Join(d.dir, "cpu.stat"), "nr_throttled"); ok {
				return n
			}
		}
	case *cgroup:
		n, _ := readKey(filepath.Join(m.dir, "cpu.stat"), "nr_throttled")
		return n
	}
	return 0
}

// ReadFor reads one of the files m keeps open.
func ReadFor(m Manager, f string) {
	var cg *cgroup
	switch m := m.(type) {
	case *cgroup:
		cg = m
	case *hybrid:
		cg = m.cgroup
	}
	switch f {
	case "cpu.stat":
		fileKey(cg.cpu, "usage_usec")
	case "peak":
		fileKey(cg.peak, "")
	case "oom":
		fileKey(cg.oom, "oom_kill")
	}
}

// IsHybrid reports whether m places its processes in v1 cgroups too.
func IsHybrid(m Manager) bool {
	_, ok := m.(*hybrid)
	return ok
}

// SetV2 writes l into dir as the v2 controllers memory, pids and cpu take it.
func SetV2(dir string, l Limits) error {
	return (&cgroup{dir: dir}).set(map[string]bool{"memory": true, "pids": true, "cpu": true}, l)
}

// StopForker ends r's forker, as the death of its daemon does: a test that
// clears the cgroups of a live root calls it first.
func StopForker(r *Root) error { return r.stopForker() }

// SpareReady reports whether r's forker has a spare ready to take.
func SpareReady(r *Root) bool {
	if r.spares == nil || r.spares.f == nil {
		return false
	}
	f := r.spares.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spare != ""
}

// V1Dir returns m's cgroup in v1 controller c's hierarchy (r's), or "".
func V1Dir(r *Root, m Manager, c string) string {
	h, ok := m.(*hybrid)
	if !ok || r.v1[c].dir == "" {
		return ""
	}
	for _, d := range h.v1 {
		if filepath.Dir(d.dir) == r.v1[c].dir {
			return d.dir
		}
	}
	return ""
}

// AfterMembersRead makes Clear call f each time it has read the members of
// a v1 cgroup, before it KILLs them, until the test ends.
func AfterMembersRead(t interface{ Cleanup(func()) }, f func(dir string)) {
	membersRead = f
	t.Cleanup(func() { membersRead = nil })
}

// HoldLastPID makes the namespace's last pid read the same until restore,
// as if nothing were forked on the machine: not safe beside parallel tests.
func HoldLastPID() (restore func()) {
	held := lastPID()
	lastPID = func() int { return held }
	return func() { lastPID = proctree.LastPID }
}

// CountLastPIDReads makes each read of the namespace's last pid give a pid
// after the one before, as if something forked between any two reads,
// until restore; reads says how many were made. Not safe beside parallel
// tests.
func CountLastPIDReads() (reads func() int, restore func()) {
	held, n := lastPID(), 0
	lastPID = func() int { n++; return held + n }
	return func() int { return n }, func() { lastPID = proctree.LastPID }
}
