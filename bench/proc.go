package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
)

// statusKiB reads a field in kB (VmRSS, VmHWM) of /proc/PID/status.
func statusKiB(pid, field string) (int64, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%s/status has no %s", pid, field)
}

// settledRSS returns this process's RSS in KiB after returning what it can
// to the system.
func settledRSS() (int64, error) {
	runtime.GC()
	debug.FreeOSMemory()
	return statusKiB("self", "VmRSS")
}

// goMemory is the bytes of live Go heap objects and goroutine stacks,
// after a GC.
func goMemory() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// procCPU is the user and system CPU process pid has used (in clock
// ticks of 10 ms), zero when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// descendants lists the processes under this one (pid and command name),
// read from /proc.
func descendants() []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type proc struct {
		ppid int
		comm string
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, close := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		procs[pid] = proc{ppid: ppid, comm: string(b[open+1 : close])}
	}
	self, guardian := os.Getpid(), proctree.GuardianPID()
	var out []string
	for pid, p := range procs {
		if pid == guardian {
			continue // in no tree (see proctree.GuardianPID)
		}
		for a, hops := p.ppid, 0; a > 1 && hops < 64; a, hops = procs[a].ppid, hops+1 {
			if a == self {
				out = append(out, fmt.Sprintf("%d %s", pid, p.comm))
				break
			}
		}
	}
	return out
}

// loadAverage is the first figure of /proc/loadavg: how many threads
// wanted a CPU over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// state says what this process holds before a figure: what an earlier
// figure left behind shows here.
func state() string {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	d := descendants()
	s := fmt.Sprintf("load %s, %d goroutines, heap %d MiB in use, %d GCs, %d processes under this one",
		loadAverage(), runtime.NumGoroutine(), m.HeapInuse>>20, m.NumGC, len(d))
	if len(d) > 0 {
		s += " (" + strings.Join(d[:min(len(d), 5)], ", ") + ")"
	}
	return s
}

// settle returns this process's free memory to the system and waits, up
// to ten seconds, for the processes it started to be gone, so that a
// figure measured next in a fresh process shares the machine with nothing
// an earlier figure left. It returns those still running after that.
func settle(ctx context.Context) []string {
	runtime.GC()
	debug.FreeOSMemory()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := descendants()
		if len(d) == 0 || time.Now().After(deadline) {
			return d
		}
		select {
		case <-ctx.Done():
			return d
		case <-time.After(50 * time.Millisecond):
		}
	}
}
