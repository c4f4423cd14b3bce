package containment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/rawcall"
)

// killTimeout bounds how long Kill waits for a cgroup to empty.
const killTimeout = 5 * time.Second

// cgroup is a Manager on cgroup v2: membership, kill, events and CPU time,
// and the limits of the controllers the v2 hierarchy delegates.
type cgroup struct {
	dir      string
	killFile bool
	// The files Stats reads, kept open: a session reads them around each
	// command. Not open (the zero File) where the host has none.
	cpu  rawcall.File // cpu.stat
	peak rawcall.File // v2 memory.peak (a reset holds for this open file), or v1 memory.max_usage_in_bytes
	oom  rawcall.File // v2 memory.events, or v1 memory.oom_control
	// cgroup.events and cgroup.kill, opened as the cgroup is made: Kill and
	// Destroy need no new descriptor, and so work when the daemon is out of
	// them (EMFILE), as it is when the start that made the cgroup failed.
	events rawcall.File
	kill   rawcall.File
	// reset is what a write to peak resets it with.
	reset string
	once  sync.Once
	err   error

	mu     sync.Mutex // guards the files above against their close, and final
	closed bool       // the files are closed: the stats are final's
	final  Stats      // the stats when the cgroup was destroyed
}

// mkdir makes the cgroup dir in parent, one of the root's own cgroups,
// and parent first when it is gone: an empty cgroup can be removed by
// anyone who may (a host's clean-up, an agent's rmdir of conch-*), and
// every later process of the daemon failed to start. The v2 parent gets
// its controllers for its children again.
func (r *Root) mkdir(parent, dir string) error {
	err := os.Mkdir(dir, 0o755)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if parent == r.dir {
		for c := range r.v2 {
			_ = write(filepath.Join(parent, "cgroup.subtree_control"), "+"+c)
		}
	}
	return os.Mkdir(dir, 0o755)
}

// newCgroup makes the v2 cgroup name and, on a hybrid host, its v1 cgroups.
func (r *Root) newCgroup(name string, l Limits) (Manager, error) {
	cg := &cgroup{dir: filepath.Join(r.dir, name), killFile: r.killFile}
	if err := r.mkdir(r.dir, cg.dir); err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	if err := cg.open(); err != nil {
		_ = rmdir(cg.dir) // empty: nothing can have entered it yet
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	if err := cg.set(r.v2, l); err != nil {
		_ = cg.Destroy()
		return nil, err
	}
	cg.cpu, _ = rawcall.OpenFile(filepath.Join(cg.dir, "cpu.stat"), unix.O_RDONLY, 0)
	if r.v2["memory"] {
		cg.peak, _ = rawcall.OpenFile(filepath.Join(cg.dir, "memory.peak"), unix.O_RDWR, 0)
		cg.oom, _ = rawcall.OpenFile(filepath.Join(cg.dir, "memory.events"), unix.O_RDONLY, 0)
		cg.reset = "reset\n"
	}
	// Memory is always placed where v1 has it, for the peak and OOM kills.
	h := &hybrid{cgroup: cg}
	if f := r.forker(l); f != nil {
		d := v1dir{dir: filepath.Join(r.v1["memory"].dir, name), home: r.v1["memory"].home}
		if left, ok := f.take(d.dir); ok {
			h.v1, h.forker, h.left = []v1dir{d}, f, left
			h.openV1Memory(d.dir)
			return h, nil
		}
	}
	for _, c := range controllers {
		v, ok := r.v1[c]
		if !ok || r.v2[c] || (c != "memory" && !l.needs(c)) {
			continue
		}
		d := v1dir{dir: filepath.Join(v.dir, name), home: v.home}
		if err := r.mkdir(v.dir, d.dir); err != nil {
			_ = h.Destroy()
			return nil, fmt.Errorf("make %s cgroup: %w", c, err)
		}
		h.v1 = append(h.v1, d)
		if c == "memory" {
			h.openV1Memory(d.dir)
		}
		if c == "pids" && l.Pids > 0 {
			h.pidsMax, h.pids = filepath.Join(d.dir, "pids.max"), l.Pids
		}
		if err := setV1(c, d.dir, l); err != nil {
			_ = h.Destroy()
			return nil, err
		}
	}
	if len(h.v1) == 0 {
		return cg, nil
	}
	return h, nil
}

// forker returns the root's forker, started on the first call, when a
// cgroup with limits l can take its spare: the host is hybrid with v1
// memory, and l puts nothing on v1 (see forker). Else nil.
func (r *Root) forker(l Limits) *forker {
	mem, ok := r.v1["memory"]
	if !ok || r.v2["memory"] || r.spares == nil {
		return nil
	}
	for _, c := range l.controllers() {
		if _, inV1 := r.v1[c]; inV1 && !r.v2[c] {
			return nil
		}
	}
	r.spares.once.Do(func() { r.spares.f = newForker(mem) })
	return r.spares.f
}

// open opens the files Kill and Destroy use: cgroup.events, and
// cgroup.kill where the kernel has it.
func (cg *cgroup) open() error {
	var err error
	if cg.events, err = rawcall.OpenFile(filepath.Join(cg.dir, "cgroup.events"), unix.O_RDONLY, 0); err != nil {
		return err
	}
	if cg.killFile {
		if cg.kill, err = rawcall.OpenFile(filepath.Join(cg.dir, "cgroup.kill"), unix.O_WRONLY, 0); err != nil {
			cg.events.Close()
			return err
		}
	}
	return nil
}

// needs reports whether l limits controller c.
func (l Limits) needs(c string) bool {
	for _, n := range l.controllers() {
		if n == c {
			return true
		}
	}
	return false
}

// cpuPeriod is the period of a CPU quota, in µs: the kernel's default.
const cpuPeriod = 100000

// set writes the limits l puts on the v2 controllers enabled.
func (cg *cgroup) set(enabled map[string]bool, l Limits) error {
	var files [][2]string
	if enabled["memory"] && l.MemoryBytes > 0 {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(l.MemoryBytes, 10)})
		if _, err := os.Stat(filepath.Join(cg.dir, "memory.swap.max")); err == nil {
			files = append(files, [2]string{"memory.swap.max", "0"})
		}
	}
	if enabled["pids"] && l.Pids > 0 {
		files = append(files, [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	if enabled["cpu"] && l.CPUMillis > 0 {
		files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", l.CPUMillis*cpuPeriod/1000, cpuPeriod)})
	}
	for _, f := range files {
		if err := write(filepath.Join(cg.dir, f[0]), f[1]); err != nil {
			return fmt.Errorf("set %s: %w", f[0], err)
		}
	}
	return nil
}

// Start starts cmd with clone3 CLONE_INTO_CGROUP into the cgroup.
func (cg *cgroup) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	fd, err := unix.Open(cg.dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup: %w", err)
	}
	defer unix.Close(fd)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	if err := start(cmd); err != nil {
		return err
	}
	exposeChild(cmd.Process.Pid)
	return nil
}

// Stats reads cpu.stat, which cgroup v2 keeps without the cpu controller,
// and the memory peak and OOM kills where a memory controller has them.
func (cg *cgroup) Stats() Stats {
	return Stats{CPU: cg.CPU(), MemoryPeak: cg.MemoryPeak(), OOMKills: cg.OOMKills()}
}

// CPU, MemoryPeak and OOMKills read the cgroup's files, or, once it is
// destroyed, what they said then: a command whose shell died learns what
// it cost after the session's end removed the cgroup.
func (cg *cgroup) CPU() time.Duration {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.cpuLocked()
}

func (cg *cgroup) cpuLocked() time.Duration {
	if cg.closed {
		return cg.final.CPU
	}
	v, _ := fileKey(cg.cpu, "usage_usec")
	return time.Duration(v) * time.Microsecond
}

func (cg *cgroup) MemoryPeak() int64 {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.peakLocked()
}

func (cg *cgroup) peakLocked() int64 {
	if cg.closed {
		return cg.final.MemoryPeak
	}
	v, _ := fileKey(cg.peak, "")
	return v
}

func (cg *cgroup) OOMKills() int64 {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.oomLocked()
}

func (cg *cgroup) oomLocked() int64 {
	if cg.closed {
		return cg.final.OOMKills
	}
	v, _ := fileKey(cg.oom, "oom_kill")
	return v
}

// ResetPeak resets the memory peak to the usage now: v1 for the cgroup,
// v2 (Linux 6.12) for the open file Stats reads. Older v2 kernels refuse,
// and the peak stays the cgroup's.
func (cg *cgroup) ResetPeak() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if !cg.closed {
		_ = cg.peak.WriteAt([]byte(cg.reset), 0)
	}
}

// Kill writes cgroup.kill (or, where the kernel lacks it, freezes the
// cgroup and KILLs each member) until cgroup.events says it is empty.
func (cg *cgroup) Kill() error {
	deadline := time.Now().Add(killTimeout)
	delay := 500 * time.Microsecond
	for {
		populated, err := cg.populated()
		if err != nil || !populated {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes outlive KILL", cg.dir)
		}
		if cg.killFile {
			err = cg.writeKill()
		} else {
			err = freezeKill(cg.dir)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("kill cgroup: %w", err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// Populated reads cgroup.events.
func (cg *cgroup) Populated() bool {
	p, err := cg.populated()
	return p || err != nil
}

// populated reads cgroup.events: whether the cgroup or one below it holds
// a live process. Zombies do not count. A cgroup that is gone is empty.
func (cg *cgroup) populated() (bool, error) {
	v, ok := cg.readEvents()
	if !ok {
		if _, err := os.Stat(cg.dir); errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("cgroup %s: no cgroup.events", cg.dir)
	}
	return v != 0, nil
}

// readEvents reads populated from cgroup.events, through the descriptor
// kept open where there is one (a Manager's until Destroy closes it),
// else by its path.
func (cg *cgroup) readEvents() (int64, bool) {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if !cg.closed && cg.events.IsOpen() {
		return fileKey(cg.events, "populated")
	}
	return readKey(filepath.Join(cg.dir, "cgroup.events"), "populated")
}

// writeKill writes 1 to cgroup.kill, through the descriptor kept open
// where there is one, else by its path.
func (cg *cgroup) writeKill() error {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if !cg.closed && cg.kill.IsOpen() {
		return cg.kill.WriteAt([]byte("1"), 0)
	}
	return write(filepath.Join(cg.dir, "cgroup.kill"), "1")
}

// Destroy kills what is left and removes the cgroup.
func (cg *cgroup) Destroy() error {
	cg.once.Do(func() {
		cg.err = cg.Kill()
		cg.mu.Lock()
		cg.final = Stats{CPU: cg.cpuLocked(), MemoryPeak: cg.peakLocked(), OOMKills: cg.oomLocked()}
		cg.closed = true
		cg.cpu.Close()
		cg.peak.Close()
		cg.oom.Close()
		cg.events.Close()
		cg.kill.Close()
		cg.mu.Unlock()
		if cg.err == nil {
			cg.err = removeTree(cg.dir)
		}
	})
	return cg.err
}

// freezeKill is cgroup.kill for kernels before 5.14: with the cgroup (and
// those below it) frozen nothing in it can fork, so KILL reaches every
// member; frozen processes still die of it.
func freezeKill(dir string) error {
	freeze := filepath.Join(dir, "cgroup.freeze")
	if err := write(freeze, "1"); err != nil {
		return err
	}
	defer func() { _ = write(freeze, "0") }()
	for i := 0; i < 100; i++ {
		if v, ok := readKey(filepath.Join(dir, "cgroup.events"), "frozen"); !ok || v == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for f := range bytes.FieldsSeq(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		return nil
	})
}

// killMembers KILLs every process in dir and the cgroups below it, which
// cannot be frozen (a v1 cgroup), and returns how many it signalled. A
// member may fork between the read of its cgroup's members and the KILL:
// so it reads and KILLs in rounds until a round finds no member alive,
// for at most killRounds rounds (each member KILLed is soon gone: a round
// finds only what was forked during the one before).
func killMembers(dir string) int {
	signalled, self := map[int]bool{}, os.Getpid()
	for range killRounds {
		found := false
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if membersRead != nil {
				membersRead(p)
			}
			for f := range bytes.FieldsSeq(b) {
				pid, err := strconv.Atoi(string(f))
				if err != nil || pid == self {
					// The daemon itself is listed while a thread of its
					// own is in the cgroup, to fork into it (see forker):
					// never a member to KILL.
					continue
				}
				if unix.Kill(pid, unix.SIGKILL) == nil {
					found, signalled[pid] = true, true
				}
			}
			return nil
		})
		if !found {
			break
		}
		time.Sleep(time.Millisecond) // for the KILLed to leave their cgroups
	}
	return len(signalled)
}

// killRounds bounds the rounds of killMembers: a member that forks in
// every one of them keeps its cgroup busy, and Clear says so.
const killRounds = 100

// membersRead, when a test sets it, is called by killMembers after it has
// read the members of the cgroup dir, before it KILLs them.
var membersRead func(dir string)

// removeTree removes dir and the cgroups below it, deepest first. A cgroup
// whose last process has just been reaped may still be busy for a moment.
// Most have none below them and are free: one rmdir, without the walk,
// whose directory reads list every control file (a one-shot process's two
// cgroups took 184–194 µs to remove, walked, and 103–107 µs without).
func removeTree(dir string) error {
	if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var err error
	for i := len(dirs) - 1; i >= 0; i-- {
		err = errors.Join(err, rmdir(dirs[i]))
	}
	return err
}

func rmdir(dir string) error {
	for i := 0; ; i++ {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || i == 100 {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// write writes s to a cgroup file, as one write.
func write(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readKey reads the value of key in a flat-keyed cgroup file (cpu.stat,
// cgroup.events, memory.events, v1's memory.oom_control).
func readKey(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseKey(b, key)
}

// parseKey returns the value of key in b, a flat-keyed cgroup file, or
// the number b holds when key is empty.
func parseKey(b []byte, key string) (int64, bool) {
	if key == "" {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		return v, err == nil
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// fileKey reads the value of key in f, a flat-keyed cgroup file kept open
// (see parseKey), with one raw call (see rawcall): a session reads the
// cgroup's files around each of its commands.
func fileKey(f rawcall.File, key string) (int64, bool) {
	var buf [1024]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil {
		return 0, false
	}
	return parseKey(buf[:n], key)
}
