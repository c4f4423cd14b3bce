package containment

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Mode says how a [Root] contains what it starts.
type Mode string

const (
	// ModeCgroup2 puts every session, process and context in a cgroup v2
	// cgroup of its own, entered at creation.
	ModeCgroup2 Mode = "cgroup2"
	// ModeNone contains nothing: no writable cgroup v2 hierarchy, or none
	// was asked for.
	ModeNone Mode = "none"
)

// Limits bound a cgroup's processes together. A zero field means no limit.
type Limits struct {
	// MemoryBytes bounds the memory of all the cgroup's processes, without
	// swap; past it the kernel's OOM killer ends one of them.
	MemoryBytes int64
	// Pids bounds how many processes and threads the cgroup holds at once;
	// a fork past it fails with EAGAIN.
	Pids int64
	// CPUMillis is CPU time per second of wall time: 1000 is one core.
	CPUMillis int64
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Or returns l with its zero fields taken from d.
func (l Limits) Or(d Limits) Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.CPUMillis == 0 {
		l.CPUMillis = d.CPUMillis
	}
	return l
}

// Validate checks that no limit is negative, that a limit is large
// enough for a process to start under it, and that it is no larger than
// the kernel's files take (MaxPids, MaxCPUMillis): a limit past them was
// refused by the kernel when the cgroup was made, or, for the CPU, wrapped
// around to another limit.
func (l Limits) Validate() error {
	switch {
	case l.MemoryBytes < 0:
		return errors.New("memoryBytes must not be negative")
	case l.Pids < 0:
		return errors.New("pids must not be negative")
	case l.CPUMillis < 0:
		return errors.New("cpuMillis must not be negative")
	case l.MemoryBytes > 0 && l.MemoryBytes < minMemory:
		return fmt.Errorf("memoryBytes must be at least %d", minMemory)
	case l.Pids == 1:
		return errors.New("pids must be at least 2")
	case l.Pids > MaxPids:
		return fmt.Errorf("pids must be at most %d (the kernel's PID_MAX_LIMIT)", MaxPids)
	case l.CPUMillis > 0 && l.CPUMillis < 10:
		return errors.New("cpuMillis must be at least 10")
	case l.CPUMillis > MaxCPUMillis:
		return fmt.Errorf("cpuMillis must be at most %d (a million cores)", MaxCPUMillis)
	}
	return nil
}

// minMemory is the least memory limit taken: below it not even a shell
// starts. Memory has no maximum: the kernel takes any byte count up to
// 2^63-1 (v1's memory.limit_in_bytes and v2's memory.max round it down to
// pages and cap it at what a page counter holds: no limit).
const minMemory = 1 << 20

const (
	// MaxPids is the largest pids limit: PID_MAX_LIMIT, the most
	// processes a 64-bit kernel has; pids.max refuses more (EINVAL).
	MaxPids = 4 << 20
	// MaxCPUMillis is the largest CPU limit: a million cores. Its quota
	// (1e11 µs per 100 ms period) is below the kernel's largest
	// (2^44-1 µs; cpu.max and cpu.cfs_quota_us refuse more) and
	// CPUMillis*cpuPeriod does not overflow.
	MaxCPUMillis = 1_000_000_000
)

// ErrUnsupported is wrapped by the error of a limit the host cannot apply
// (its controller is neither delegated on cgroup v2 nor mounted on v1);
// use errors.Is.
var ErrUnsupported = errors.New("unsupported")

// Stats is what a cgroup's processes have cost so far.
type Stats struct {
	// CPU is user plus system time, from the cgroup's creation on.
	CPU time.Duration
	// MemoryPeak is the most memory the cgroup held at once since it was
	// made or since the last ResetPeak, in bytes; zero when unknown.
	MemoryPeak int64
	// OOMKills counts the cgroup's processes the OOM killer ended.
	OOMKills int64
}

// Manager is one cgroup: a session's, a process's or a context's.
type Manager interface {
	// Start starts cmd in the cgroup by calling start (which must call
	// cmd.Start, from the goroutine it is called on): cmd is in the cgroup
	// from its first instruction, and so is everything it starts.
	Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error
	// Stats reads what the cgroup's processes have cost.
	Stats() Stats
	// CPU, MemoryPeak and OOMKills read one field of Stats each, for
	// callers that read around every command.
	CPU() time.Duration
	MemoryPeak() int64
	OOMKills() int64
	// ResetPeak starts a new window for Stats' MemoryPeak, where the kernel
	// allows it; elsewhere the peak stays the cgroup's whole life's.
	ResetPeak()
	// Populated reports whether a live process is in the cgroup.
	Populated() bool
	// Kill ends every process in the cgroup and returns once it is empty,
	// or with an error when processes outlive KILL.
	Kill() error
	// Destroy kills what is left and removes the cgroup. A second call
	// returns the first's error.
	Destroy() error
}

// Config chooses a daemon's [Root].
type Config struct {
	// Instance names the daemon's cgroup, conch-<Instance>. Required.
	Instance string
	// Path is the cgroup v2 directory under which the daemon's cgroup is
	// made. Empty: the parent of the daemon's own v2 cgroup where it is
	// writable, else the root of the v2 mount (a hybrid host's
	// /sys/fs/cgroup/unified).
	Path string
	// Disabled chooses ModeNone.
	Disabled bool
	// Defaults are the limits of every cgroup for those its caller leaves
	// zero.
	Defaults Limits
}

// Root is where a daemon's cgroups are made, chosen once at start. A nil
// *Root is a Root in ModeNone.
type Root struct {
	mode     Mode
	reason   string
	dir      string          // the daemon's v2 cgroup, conch-<instance>
	v2       map[string]bool // controllers enabled for the v2 children
	v1       map[string]v1dir
	killFile bool // cgroup.kill exists (Linux 5.14)
	defaults Limits

	spares *spares // on a hybrid host (see forker)
}

// spares is a root's forker, started for the first cgroup that can use
// it; shared by the root's copies.
type spares struct {
	once sync.Once
	f    *forker
}

// v1dir is a daemon's cgroup in one v1 hierarchy, and the cgroup its
// threads live in there.
type v1dir struct{ dir, home string }

// controllers are the controllers limits use, in the order they are named.
var controllers = []string{"memory", "pids", "cpu"}

// Mode says how the root contains what it starts.
func (r *Root) Mode() Mode {
	if r == nil {
		return ModeNone
	}
	return r.mode
}

// Reason says why the root is in ModeNone; empty otherwise.
func (r *Root) Reason() string {
	if r == nil {
		return "no containment configured"
	}
	return r.reason
}

// Path is the daemon's v2 cgroup; empty in ModeNone.
func (r *Root) Path() string {
	if r == nil {
		return ""
	}
	return r.dir
}

// Controllers says, for each limit's controller the host can apply, where:
// "v2" or "v1".
func (r *Root) Controllers() map[string]string {
	out := map[string]string{}
	if r.Mode() == ModeNone {
		return out
	}
	for _, c := range controllers {
		switch {
		case r.v2[c]:
			out[c] = "v2"
		case r.v1[c].dir != "":
			out[c] = "v1"
		}
	}
	return out
}

// Dirs are the directories the root made, the v2 one first: what a later
// daemon removes with [Clear] if this one dies.
func (r *Root) Dirs() []string {
	if r.Mode() == ModeNone {
		return nil
	}
	out := []string{r.dir}
	for _, c := range controllers {
		if d := r.v1[c].dir; d != "" {
			out = append(out, d)
		}
	}
	return out
}

// Defaults are the limits given to cgroups that ask for none.
func (r *Root) Defaults() Limits {
	if r == nil {
		return Limits{}
	}
	return r.defaults
}

// Check returns an error wrapping ErrUnsupported, naming the controllers
// missing, when the host cannot apply l.
func (r *Root) Check(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.IsZero() {
		return nil
	}
	if r.Mode() == ModeNone {
		return fmt.Errorf("limits: %w: no cgroups here (%s)", ErrUnsupported, r.Reason())
	}
	var missing []string
	for _, c := range l.controllers() {
		if !r.v2[c] && r.v1[c].dir == "" {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("limits: %w: the %s controller is neither delegated on cgroup v2 nor mounted on v1",
			ErrUnsupported, strings.Join(missing, " and "))
	}
	return nil
}

// controllers names the controllers l needs.
func (l Limits) controllers() []string {
	var out []string
	if l.MemoryBytes > 0 {
		out = append(out, "memory")
	}
	if l.Pids > 0 {
		out = append(out, "pids")
	}
	if l.CPUMillis > 0 {
		out = append(out, "cpu")
	}
	return out
}

// New makes the cgroup name (a session's or process's id) under the root,
// with l (its zero fields from the root's defaults) applied, and returns
// its Manager. In ModeNone the Manager starts processes as they are, and l
// (with the defaults) must be zero.
func (r *Root) New(name string, l Limits) (Manager, error) {
	l = l.Or(r.Defaults())
	if err := r.Check(l); err != nil {
		return nil, err
	}
	if r.Mode() == ModeNone {
		return &uncontained{}, nil
	}
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup name %q", name)
	}
	return r.newCgroup(name, l)
}
