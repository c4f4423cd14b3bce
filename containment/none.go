package containment

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// uncontained is the Manager of ModeNone: it starts processes as they are
// and ends nothing. Its CPU time is its process's and that of the children
// the process has reaped, from /proc while it runs and from its rusage once
// it has been waited for; its memory peak is unknown.
type uncontained struct {
	mu  sync.Mutex
	cmd *exec.Cmd
}

func (u *uncontained) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	u.mu.Lock()
	u.cmd = cmd
	u.mu.Unlock()
	if err := start(cmd); err != nil {
		return err
	}
	exposeChild(cmd.Process.Pid)
	return nil
}

func (u *uncontained) Stats() Stats {
	u.mu.Lock()
	cmd := u.cmd
	u.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return Stats{}
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			return Stats{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
		}
		return Stats{}
	}
	return Stats{CPU: procCPU(cmd.Process.Pid)}
}

// procCPU is pid's user and system time plus that of its reaped children,
// from /proc/PID/stat (fields 14 to 17, in clock ticks).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	var ticks int64
	for k := 11; k <= 14 && k < len(f); k++ {
		n, _ := strconv.ParseInt(string(f[k]), 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
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
