package containment

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// uncontained is the Manager of ModeNone: it starts processes as they are
// and ends nothing. Its CPU time is its process's and that of the children
// the process has reaped, from /proc until the process is reaped (then the
// last value read: the caller that waited for it has its rusage); its
// memory peak is unknown.
type uncontained struct {
	mu  sync.Mutex
	pid int
	cpu time.Duration // the last CPU time read
}

func (u *uncontained) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if err := start(cmd); err != nil {
		return err
	}
	u.mu.Lock()
	u.pid = cmd.Process.Pid
	u.mu.Unlock()
	exposeChild(cmd.Process.Pid)
	return nil
}

func (u *uncontained) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pid == 0 {
		return Stats{}
	}
	if cpu, ok := procCPU(u.pid); ok {
		u.cpu = cpu
	}
	return Stats{CPU: u.cpu}
}

// procCPU is pid's user and system time plus that of its reaped children,
// from /proc/PID/stat (fields 14 to 17, in clock ticks).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	var ticks int64
	for k := 11; k <= 14 && k < len(f); k++ {
		n, _ := strconv.ParseInt(string(f[k]), 10, 64)
		ticks += n
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
func (u *uncontained) Destroy() error     { return nil }
