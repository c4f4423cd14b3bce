package proctree

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/rawcall"
	"golang.org/x/sys/unix"
)

// pfKthread is the flag of a kernel thread (PF_KTHREAD), which no process
// can give itself.
const pfKthread = 0x00200000

// stat is what proctree reads of /proc/PID/stat.
type stat = procfs.Stat

// readStat reads /proc/PID/stat, through procfs's one parser of it.
func readStat(pid int) (procfs.Stat, bool) { return procfs.ReadStat(pid) }

// procBufs holds buffers that files of /proc are read into before what
// they held is copied out at its size.
var procBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// readProcCopy returns what the file of /proc at path holds, read through
// a pooled buffer.
func readProcCopy(path string) ([]byte, error) {
	bp := procBufs.Get().(*[]byte)
	b, err := procfs.ReadFile(path, (*bp)[:0])
	out := bytes.Clone(b)
	*bp = b[:0]
	procBufs.Put(bp)
	return out, err
}

// Alive reports whether pid is a live process: it exists and is not a
// zombie waiting to be reaped.
func Alive(pid int) bool {
	s, ok := readStat(pid)
	return ok && s.State != 'Z'
}

// GroupMembers returns the live processes of process group pgid (zombies
// left out), from a scan of every process that began after the call.
func GroupMembers(pgid int) []int {
	var out []int
	for _, s := range stats.get().all {
		if s.PGID == pgid && s.State != 'Z' {
			out = append(out, s.PID)
		}
	}
	return out
}

// Sleeping reports whether pid is a live process asleep in a system call
// (state S or D): not running, not runnable, not stopped.
func Sleeping(pid int) bool {
	s, ok := readStat(pid)
	return ok && (s.State == 'S' || s.State == 'D')
}

// Stopped reports whether pid is stopped by a signal (state T: SIGSTOP,
// SIGTSTP), which SIGCONT resumes; a process stopped by a tracer is not.
func Stopped(pid int) bool {
	s, ok := readStat(pid)
	return ok && s.State == 'T'
}

// Parentage returns pid's parent and process group; false when pid is
// gone.
func Parentage(pid int) (ppid, pgid int, ok bool) {
	s, ok := readStat(pid)
	return s.PPID, s.PGID, ok
}

// DefaultAction reports whether pid is a process that neither catches nor
// ignores sig (its SigCgt and SigIgn in /proc/PID/status), so that sig,
// delivered, takes its default action; a zombie keeps the masks it had.
func DefaultAction(pid int, sig syscall.Signal) bool {
	b, err := readProcCopy("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	bit := uint64(1) << (sig - 1)
	seen := 0
	for line := range bytes.Lines(b) {
		name, mask, ok := bytes.Cut(line, []byte(":"))
		if !ok || !bytes.Equal(name, []byte("SigIgn")) && !bytes.Equal(name, []byte("SigCgt")) {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(mask)), 16, 64)
		if err != nil || v&bit != 0 {
			return false
		}
		if seen++; seen == 2 {
			return true
		}
	}
	return false
}

// CPUTime returns the CPU time pid has used, read from its CPU-time clock
// (nanoseconds; /proc's counts are in ticks of 10 ms). False when pid is
// gone.
func CPUTime(pid int) (time.Duration, bool) {
	var ts unix.Timespec
	// clock_getcpuclockid(3): CPUCLOCK_SCHED of process pid.
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// HasChildren reports whether pid has a child, a zombie included. Without
// the kernel's children lists (CONFIG_PROC_CHILDREN) it reports none.
func HasChildren(pid int) bool { return len(childrenOf(pid)) > 0 }

// scans counts the listings of /proc, for Scans.
var scans atomic.Uint64

// Scans returns how many times this process has listed /proc: every
// function of the package that looks for processes lists it once. Tests
// count what an operation costs with it.
func Scans() uint64 { return scans.Load() }

// pids lists the pids in /proc but the kernel's threads (see
// kernelThreads), which no tree, tag or group of a user's holds: on a host
// or a virtual machine they are most of what /proc lists, and each cost a
// scan of environments two reads, the empty one and the check that it is
// not a process caught in an exec.
func pids() []int {
	scans.Add(1)
	kernel := kernelThreads()
	names, _ := procfs.ReadDir("/proc")
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil && !kernel[pid] {
			out = append(out, pid)
		}
	}
	return out
}

// kthreadd is the pid of the kernel's thread that starts every other one.
const kthreadd = 2

// kernelThreads returns kthreadd and its children, when pid 2 is kthreadd
// (a kernel thread: its stat flags say so, which no process can fake); none
// in a container's pid namespace, which lists no kernel thread. A pid that
// was a kernel thread's is handed to a process only once the pids have
// wrapped around, long after the scan that read it.
func kernelThreads() map[int]bool {
	if s, ok := readStat(kthreadd); !ok || s.Flags&pfKthread == 0 {
		return nil
	}
	kids := childrenOf(kthreadd)
	out := make(map[int]bool, len(kids)+1)
	out[kthreadd] = true
	for _, k := range kids {
		out[k] = true
	}
	return out
}

// Descendants returns the pids of every live descendant of pid — children,
// their children and so on, including those that called setsid — found
// through the kernel's lists of each thread's children
// (/proc/PID/task/TID/children), which read a few files of the tree, or on a
// kernel without them the PPid links of every /proc/*/stat. pid itself is
// not included. Zombies not reaped yet are included. A descendant whose
// parent has died has been reparented out of the tree and is not found; see
// [Tagged].
func Descendants(pid int) []int {
	return withoutGuardian(descendants(links(), map[int]bool{pid: true}))
}

// withoutGuardian returns pids without the guardian's (see guardianScript),
// which is in no tree: it is listed in none.
func withoutGuardian(pids []int) []int {
	if g := GuardianPID(); g != 0 {
		pids = slices.DeleteFunc(pids, func(p int) bool { return p == g })
	}
	return pids
}

// A lister gives the children of a process.
type lister func(pid int) []int

// links returns a lister of the tree as it is from now: the kernel's
// children lists when it keeps them, else [scanLinks].
func links() lister {
	if childLists() {
		return childrenOf
	}
	return scanLinks()
}

// scanLinks returns the links of a scan of every process's stat that began
// after the call, shared with the callers that want one at once.
func scanLinks() lister {
	m := stats.get().children
	return func(pid int) []int { return m[pid] }
}

// childLists reports whether the kernel keeps a children list for each
// thread (CONFIG_PROC_CHILDREN).
var childLists = sync.OnceValue(func() bool {
	s := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + s + "/task/" + s + "/children")
	return err == nil
})

// childrenOf returns the children of every thread of pid, zombies included:
// a child is listed under the thread that forked it, or under any thread of
// the process it was reparented to. None when pid is gone.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids := []string{strconv.Itoa(pid)}
	if names, err := procfs.ReadDir(dir); err == nil && len(names) > 1 {
		tids = names
	}
	var buf [512]byte
	var out []int
	for _, tid := range tids {
		b, err := procfs.ReadFile(dir+"/"+tid+"/children", buf[:0])
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// A statScan is the stat of every process in /proc, read in one scan, and
// the children of each pid.
type statScan struct {
	all      []stat
	children map[int][]int
}

var stats = shared[statScan]{scan: scanStats}

func scanStats() statScan {
	sc := statScan{children: make(map[int][]int)}
	for _, p := range pids() {
		if s, ok := readStat(p); ok {
			sc.all = append(sc.all, s)
			sc.children[s.PPID] = append(sc.children[s.PPID], p)
		}
	}
	return sc
}

// descendants returns the descendants of the roots in seen that are not in
// seen themselves, found through children, and adds them to seen.
func descendants(children lister, seen map[int]bool) []int {
	roots := make([]int, 0, len(seen))
	for p := range seen {
		roots = append(roots, p)
	}
	return descendantsOf(children, seen, roots)
}

// descendantsOf returns the descendants of roots that are not in seen,
// found through children, and adds them to seen.
func descendantsOf(children lister, seen map[int]bool, roots []int) []int {
	var out []int
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children(p) {
			if !seen[c] { // also stops a loop that a pid reused mid-scan could close
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// TagEnv is the environment variable that tags a tree; see [Tag].
const TagEnv = "CONCH_TREE"

// Tag returns the environment entry "CONCH_TREE=id". Put it in the
// environment of a process so that [Tagged] finds it and every descendant
// that inherits its environment, also after they leave its tree.
func Tag(id string) string { return TagEnv + "=" + id }

// Tagged returns the pids of live processes whose environment holds
// [Tag](id). It reads /proc/PID/environ, which is the environment a process
// started with: a process that cleared its environment before exec (env -i)
// is not found. Only processes this process may read are seen (those of the
// same user, or all when root). Zombies have no environment and are not
// found. A process this process started through [Start] with an
// environment that holds no such tag (another tree's root: a session's
// shell, say) is not read: it belongs to the tree it was started for, and
// is found as its root, whatever it later exec'd with.
func Tagged(id string) []int { return holdingIn(&tagEnvs, Tag(id)) }

// InstanceEnv is the environment variable that names the daemon instance a
// process was started by; see [Marked].
const InstanceEnv = "CONCH_DAEMON"

// Marked returns the pids of live processes whose environment holds
// InstanceEnv=instance (see [Holding]): a daemon that puts it in its own
// environment marks every process it starts and their descendants, and can
// find them after it was killed.
func Marked(instance string) []int { return Holding(InstanceEnv + "=" + instance) }

// TagsAlive returns the ids that [Tag] entries in the environments of live
// processes hold, in one scan of /proc: a caller that looks for the
// leftovers of many trees looks once for all of them, rather than once
// for each with [Tagged]. Like Tagged, it misses a process that cleared
// its environment, and a scan can miss processes that fork and exit as it
// reads.
func TagsAlive() map[string]bool {
	prefix := []byte(TagEnv + "=")
	out := make(map[string]bool)
	environs(func(_ int, env []byte) {
		for e := range bytes.SplitSeq(env, []byte{0}) {
			if id, ok := bytes.CutPrefix(e, prefix); ok {
				out[string(id)] = true
				break
			}
		}
	})
	return out
}

// Holding returns the pids of live processes whose environment holds entry
// ("NAME=value"), from a scan of every process's environment shared with
// the callers that want one at once.
func Holding(entry string) []int { return holdingIn(&envs, entry) }

// holdingIn returns the pids of live processes whose environment holds
// entry, from a scan of sc. A process the scan did not read, whose
// environment at its start is known, is read now if that environment holds
// entry, and skipped if it does not.
func holdingIn(sc *shared[[]procEnv], entry string) []int {
	want := []byte(entry)
	var out []int
	for _, pe := range sc.get() {
		env := pe.env
		if pe.known != nil {
			if !slices.Contains(pe.known, entry) {
				continue
			}
			read := readSettled([]int{pe.pid})
			if len(read) == 0 {
				continue
			}
			env = read[0].env
		}
		for e := range bytes.SplitSeq(env, []byte{0}) {
			if bytes.Equal(e, want) {
				out = append(out, pe.pid)
				break
			}
		}
	}
	return out
}

// environs calls fn with the environment of each process in /proc that has
// one, from a scan that began after the call, shared with the callers that
// want one at once (see scanEnvirons).
func environs(fn func(pid int, env []byte)) {
	for _, pe := range envs.get() {
		fn(pe.pid, pe.env)
	}
}

// envs is the scan of every process's environment; tagEnvs the scan that
// leaves out the processes started through Start with an environment known
// (see [Tagged]), which at a session's end are mostly the other sessions'
// shells.
var (
	envs    = shared[[]procEnv]{scan: scanEnvirons}
	tagEnvs = shared[[]procEnv]{scan: scanTagEnvirons}
)

// procEnv is a process's environment, as /proc/PID/environ holds it, or,
// not read, the environment it was started with.
type procEnv struct {
	pid   int
	env   []byte
	known []string
}

func scanEnvirons() []procEnv { return readSettled(pids()) }

func scanTagEnvirons() []procEnv {
	known := knownEnvs()
	var read []int
	var out []procEnv
	for _, p := range pids() {
		if env, ok := known[p]; ok {
			out = append(out, procEnv{pid: p, known: env})
		} else {
			read = append(read, p)
		}
	}
	return append(out, readSettled(read)...)
}

// readSettled returns the environment of each of pids that has one. A
// process in the middle of an exec reads as having none until its new
// image is set up, which can take milliseconds on a busy machine: a
// leftover of a tree caught there would be missed. So one that reads empty
// while it runs is read again, a few milliseconds apart, for up to
// execSettle.
func readSettled(pids []int) []procEnv {
	var out []procEnv
	var later []int
	for _, p := range pids {
		env, err := readEnviron(p)
		switch {
		case err != nil: // gone, a kernel thread, or not ours to read
		case len(env) == 0 && execing(p):
			later = append(later, p)
		default:
			out = append(out, procEnv{pid: p, env: env})
		}
	}
	for wait := time.Millisecond; len(later) > 0 && wait <= execSettle; wait *= 2 {
		time.Sleep(wait)
		next := later[:0]
		for _, p := range later {
			env, err := readEnviron(p)
			switch {
			case err != nil:
			case len(env) == 0 && execing(p):
				next = append(next, p)
			default:
				out = append(out, procEnv{pid: p, env: env})
			}
		}
		later = next
	}
	return out
}

// readEnviron reads the environment pid started with; a variable, so
// that a test can play a process caught in an exec.
var readEnviron = func(pid int) ([]byte, error) {
	return readProcCopy("/proc/" + strconv.Itoa(pid) + "/environ")
}

// execSettle bounds the wait of environs for one process: the longest of
// its waits, which add up to about twice as much.
const execSettle = 32 * time.Millisecond

// execing reports whether pid runs (or waits for the disk), as a process in
// the middle of an exec does: a process with an empty environment that
// sleeps is not waited for.
var execing = func(pid int) bool {
	s, ok := readStat(pid)
	return ok && (s.State == 'R' || s.State == 'D')
}

// StartTime returns when pid started, in clock ticks after boot; false for
// a zombie (see [procfs.StartTime]).
func StartTime(pid int) (uint64, bool) {
	return procfs.StartTime(pid)
}

// Ident is one process: its pid and when it started, so that a later
// process given the same pid (pids wrap at pid_max, 32768 on many hosts)
// is not taken for it. The zero Start is a process that had ended already.
type Ident struct {
	PID   int
	Start uint64
}

// IdentOf returns the identity of the process pid now.
func IdentOf(pid int) Ident {
	start, _ := StartTime(pid)
	return Ident{pid, start}
}

// IdentsOf returns the identities of pids now.
func IdentsOf(pids ...int) []Ident {
	ids := make([]Ident, len(pids))
	for i, pid := range pids {
		ids[i] = IdentOf(pid)
	}
	return ids
}

// Alive reports whether the process is still running, neither ended (nor
// a zombie) nor replaced by another of the same pid.
func (id Ident) Alive() bool {
	start, ok := StartTime(id.PID)
	return id.Start != 0 && ok && start == id.Start
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

// LastPID returns the pid most recently handed out in this pid namespace,
// or -1 when it cannot be read. Callers read it often (once per session
// command), so the file stays open and each read is one pread.
func LastPID() int {
	fd := lastPIDFile()
	if fd < 0 {
		return -1
	}
	// One pread: os.File.ReadAt would read again to see end-of-file.
	var buf [24]byte
	n, err := rawcall.Pread(fd, buf[:], 0)
	if n <= 0 || err != nil {
		return -1
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		return -1
	}
	return pid
}

var lastPIDFile = sync.OnceValue(func() int {
	fd, err := syscall.Open("/proc/sys/kernel/ns_last_pid", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

// PIDAfter reports whether pid was handed out after last (see [LastPID]), in
// the cyclic order of pids, which wrap at pid_max; true when last is unknown
// (negative).
func PIDAfter(pid, last int) bool {
	if last < 0 {
		return true
	}
	n := pidMax()
	return pid != last && (pid-last+n)%n < n/2
}

var pidMax = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if n, e := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && e == nil && n > 0 {
		return n
	}
	return 1 << 22
})

// Children returns the pids of this process's children, zombies included.
func Children() []int {
	kids := children()
	out := make([]int, 0, len(kids))
	for pid := range kids {
		out = append(out, pid)
	}
	return withoutGuardian(out)
}
