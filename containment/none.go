package containment

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
)

// uncontained is the Manager of ModeNone: it starts processes as they are
// and ends nothing. Its CPU time is its process's and that of the children
// the process has reaped, from /proc until the process is reaped (then the
// last value read: the caller that waited for it has its rusage); its
// memory peak is unknown.
//
// A session reads the CPU time around every command, so its /proc files
// are opened once, at the first read, and read again in place; a one-shot
// process, whose CPU time its rusage gives once it is reaped, never opens
// them (the open of a /proc stat file cost a one-shot start 16 µs of CPU).
// The open files stay the process's own: they are kept only when the
// process had not been reaped by the time they were open, as a pid is given
// again only once reaped; once it is reaped, reads fail, and a later
// process given the same pid is never read.
//
// The process's own CPU time comes from its schedstat file, in
// nanoseconds; that of its reaped children from its stat file, in clock
// ticks. The schedstat file counts the main thread alone: the time of the
// process's other threads, running or ended (a Python or Node interpreter
// runs a cell's threads and its garbage collector there), is what the stat
// file's own time, every thread's, has past the main thread's, in clock
// ticks too. The stat file costs several times the schedstat's read (the
// kernel formats some fifty fields), so it is read again only when the
// children's time may have changed since it was last read: not when, at
// that read, the process had one thread and no child (its children file
// empty) and no pid was handed out in the pid namespace since, for then it
// has had no child to reap. A second after that read it is read again
// whatever the pids say, so that pids handed out all the way round to the
// same last one cannot hide a child.
type uncontained struct {
	mu   sync.Mutex
	proc *os.Process  // the process, until its files are open or it is gone
	stat rawcall.File // the process's /proc stat file
	// sched is its schedstat file (absent where the kernel keeps no
	// schedstats: then the stat file gives its own time too), children its
	// main thread's children file (absent without it, the stat file is
	// then read every time).
	sched, children rawcall.File
	cpu             time.Duration // the last CPU time read
	reaped          time.Duration // the children's part of it, from the stat file
	others          time.Duration // the part of threads other than the main one
	// childless says that, at the stat file's last read (at statAt, when
	// the namespace's last pid was lastPID), the process had one thread
	// and no child.
	childless bool
	lastPID   int
	statAt    time.Time
}

func (u *uncontained) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if err := start(cmd); err != nil {
		return err
	}
	u.mu.Lock()
	u.proc = cmd.Process
	u.mu.Unlock()
	exposeChild(cmd.Process.Pid)
	return nil
}

// openStat opens the process's /proc files, the first time they are read
// while the process is not yet reaped. Without /proc no file is open, and
// the CPU time stays zero.
func (u *uncontained) openStat() {
	p := u.proc
	if p == nil {
		return
	}
	u.proc = nil
	// Signal 0 fails once the process was waited for.
	if p.Signal(syscall.Signal(0)) != nil {
		return
	}
	dir := "/proc/" + strconv.Itoa(p.Pid) + "/"
	f, err := rawcall.OpenFile(dir+"stat", syscall.O_RDONLY, 0)
	if err != nil {
		return
	}
	sched, _ := rawcall.OpenFile(dir+"schedstat", syscall.O_RDONLY, 0)
	children, _ := rawcall.OpenFile(dir+"task/"+strconv.Itoa(p.Pid)+"/children", syscall.O_RDONLY, 0)
	if p.Signal(syscall.Signal(0)) != nil {
		// Reaped before the opens: the pid may be another's.
		f.Close()
		sched.Close()
		children.Close()
		return
	}
	u.stat, u.sched, u.children = f, sched, children
}

func (u *uncontained) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.openStat()
	if !u.sched.IsOpen() {
		if cpu, ok := u.readStat(); ok {
			u.cpu = cpu.own + cpu.reaped
		}
		return Stats{CPU: u.cpu}
	}
	statOwn := time.Duration(-1) // the stat file's own time, when read now
	// One read of the last pid serves both to see whether one was handed
	// out since the stat file's last read and, when the file is read
	// again, as the last pid of that read: the children file and the stat
	// file are read after it either way.
	last := lastPID()
	if !u.childless || last != u.lastPID || time.Since(u.statAt) >= time.Second {
		// In this order: a child forked after the last pid's read moves
		// it; one the children file does not show was reaped before the
		// stat file's read. A thread started since moves the last pid
		// too.
		none := u.noChildren()
		cpu, ok := u.readStat()
		if !ok {
			return Stats{CPU: u.cpu}
		}
		u.reaped, u.childless, u.lastPID, u.statAt = cpu.reaped, none && cpu.threads == 1 && last >= 0, last, time.Now()
		statOwn = cpu.own
	}
	var buf [64]byte
	n, err := u.sched.ReadAt(buf[:], 0)
	if err != nil || n <= 0 {
		return Stats{CPU: u.cpu}
	}
	own, ok := parseSchedstat(buf[:n])
	if !ok {
		return Stats{CPU: u.cpu}
	}
	if statOwn >= 0 {
		// The main thread's time, read after the stat file's, is at least
		// what it was then, and the stat file's is truncated to ticks:
		// the difference is at most the other threads' time, never more.
		u.others = max(u.others, statOwn-own)
	}
	u.cpu = max(u.cpu, own+u.others+u.reaped)
	return Stats{CPU: u.cpu}
}

// lastPID is proctree.LastPID, which a test may hold still.
var lastPID = proctree.LastPID

// noChildren reports whether the process's main thread has no child now,
// by its children file; false when it cannot tell.
func (u *uncontained) noChildren() bool {
	var buf [1]byte
	n, err := u.children.ReadAt(buf[:], 0)
	return err == nil && n == 0
}

// statCPU is what the stat file says of CPU time, and of threads.
type statCPU struct {
	own, reaped time.Duration
	threads     int64
}

// readStat reads the stat file.
func (u *uncontained) readStat() (statCPU, bool) {
	var buf [1024]byte
	n, err := u.stat.ReadAt(buf[:], 0)
	if err != nil || n <= 0 {
		return statCPU{}, false
	}
	return parseStatCPU(buf[:n])
}

// parseStatCPU reads a /proc/PID/stat line: the process's user and system
// time (fields 14 and 15, in clock ticks), that of its reaped children (16
// and 17), and its threads (20).
func parseStatCPU(b []byte) (statCPU, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statCPU{}, false
	}
	// Field 3, the state, follows ") ": skip the 11 fields up to the 14th.
	var ticks [21]int64
	field := 3
	for p := b[i+1:]; len(p) > 0 && field <= 20; field++ {
		for len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		j := bytes.IndexByte(p, ' ')
		if j < 0 {
			j = len(p)
		}
		if field >= 14 {
			var n int64
			for _, c := range p[:j] {
				if c < '0' || c > '9' {
					if field > 17 && c == '-' { // priority and nice may be negative
						continue
					}
					return statCPU{}, false
				}
				n = 10*n + int64(c-'0')
			}
			ticks[field] = n
		}
		p = p[j:]
	}
	if field <= 20 {
		return statCPU{}, false
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return statCPU{own: tick(ticks[14] + ticks[15]), reaped: tick(ticks[16] + ticks[17]), threads: ticks[20]}, true
}

// parseSchedstat returns the time on a processor of a /proc/PID/schedstat
// line: its first field, in nanoseconds.
func parseSchedstat(b []byte) (time.Duration, bool) {
	var n int64
	for i, c := range b {
		if c < '0' || c > '9' {
			return time.Duration(n), i > 0 && c == ' '
		}
		n = 10*n + int64(c-'0')
	}
	return 0, false
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

func (u *uncontained) CPU() time.Duration { return u.Stats().CPU }
func (u *uncontained) MemoryPeak() int64  { return 0 }
func (u *uncontained) OOMKills() int64    { return 0 }
func (u *uncontained) ResetPeak()         {}
func (u *uncontained) Populated() bool    { return false }
func (u *uncontained) Kill() error        { return nil }

// Destroy closes the /proc files; the CPU time stays what was read last.
func (u *uncontained) Destroy() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.proc = nil
	u.stat.Close()
	u.sched.Close()
	u.children.Close()
	return nil
}
