package containment

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/rawcall"
)

// uncontained is the Manager of ModeNone: it starts processes as they are
// and ends nothing. Its CPU time is its process's and that of the children
// the process has reaped, from /proc until the process is reaped (then the
// last value read: the caller that waited for it has its rusage); its
// memory peak is unknown.
//
// A session reads the CPU time around every command, so the stat file is
// opened once, at the first read, and read again in place; a one-shot
// process, whose CPU time its rusage gives once it is reaped, never opens
// it (the open of a /proc stat file cost a one-shot start 16 µs of CPU).
// The open file stays the process's own: it is kept only when the process
// had not been reaped by the time it was open, as a pid is given again only
// once reaped; once it is reaped, reads fail, and a later process given the
// same pid is never read.
type uncontained struct {
	mu   sync.Mutex
	proc *os.Process   // the process, until its stat file is open or it is gone
	stat rawcall.File  // the process's /proc stat file
	cpu  time.Duration // the last CPU time read
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

// openStat opens the process's stat file, the first time it is read while
// the process is not yet reaped. Without /proc the file is not open, and
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
	f, err := rawcall.OpenFile("/proc/"+strconv.Itoa(p.Pid)+"/stat", syscall.O_RDONLY, 0)
	if err != nil {
		return
	}
	if p.Signal(syscall.Signal(0)) != nil {
		f.Close() // reaped before the open: the pid may be another's
		return
	}
	u.stat = f
}

func (u *uncontained) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.openStat()
	var buf [1024]byte
	n, err := u.stat.ReadAt(buf[:], 0)
	if err != nil || n <= 0 {
		return Stats{CPU: u.cpu}
	}
	if cpu, ok := parseStatCPU(buf[:n]); ok {
		u.cpu = cpu
	}
	return Stats{CPU: u.cpu}
}

// parseStatCPU returns the user and system time of a /proc/PID/stat line
// plus that of the reaped children: fields 14 to 17, in clock ticks.
func parseStatCPU(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	// Field 3, the state, follows ") ": skip the 11 fields up to the 14th.
	var ticks int64
	field := 3
	for p := b[i+1:]; len(p) > 0 && field <= 17; field++ {
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
					return 0, false
				}
				n = 10*n + int64(c-'0')
			}
			ticks += n
		}
		p = p[j:]
	}
	if field <= 17 {
		return 0, false
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

func (u *uncontained) CPU() time.Duration { return u.Stats().CPU }
func (u *uncontained) MemoryPeak() int64  { return 0 }
func (u *uncontained) OOMKills() int64    { return 0 }
func (u *uncontained) ResetPeak()         {}
func (u *uncontained) Populated() bool    { return false }
func (u *uncontained) Kill() error        { return nil }

// Destroy closes the stat file; the CPU time stays what was read last.
func (u *uncontained) Destroy() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.proc = nil
	u.stat.Close()
	return nil
}
