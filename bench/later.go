package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
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

// measureP5 is this process's peak RSS growth (it is the daemon: the
// session runs in it) while a session writes cfg.bytes into its log store
// under the default retention.
func measureP5(ctx context.Context, cfg config) Row {
	s, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(s)
	before, err := settledRSS()
	if err != nil {
		return failed(err)
	}
	// Writing 5 resets VmHWM to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return notMeasured("cannot reset the peak RSS: " + err.Error())
	}
	if err := runIn(ctx, s, fmt.Sprintf("head -c %d /dev/zero", cfg.bytes)); err != nil {
		return failed(err)
	}
	peak, err := statusKiB("self", "VmHWM")
	if err != nil {
		return failed(err)
	}
	const retention = 8 << 10 // KiB: logstore.DefaultRetention
	growth := peak - before
	return Row{
		Value:    fmt.Sprintf("%d KiB", growth),
		Baseline: fmt.Sprintf("%d KiB retention", retention),
		Ratio:    float64(growth) / retention,
		Target:   "≤ retention + 32 MiB",
		Met:      yesNo(growth <= retention+32<<10),
		Note:     fmt.Sprintf("%d MiB through one session, RSS %d KiB before, VmHWM %d KiB after", cfg.bytes>>20, before, peak),
	}
}

// measureP6 runs cfg.many sessions at once, each running cfg.each `true`
// commands in turn, against the rate of one session running commands in
// turn, measured before and after.
func measureP6(ctx context.Context, cfg config) Row {
	one, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(one)
	single := func() (float64, error) {
		n := 4 * cfg.each
		t := time.Now()
		for range n {
			if err := runIn(ctx, one, "true"); err != nil {
				return 0, err
			}
		}
		return float64(n) / time.Since(t).Seconds(), nil
	}
	r1, err := single()
	if err != nil {
		return failed(err)
	}

	sessions := make([]*shellsession.Session, 0, cfg.many)
	defer func() {
		for _, s := range sessions {
			closeSession(s)
		}
	}()
	for range cfg.many {
		s, err := newSession(ctx)
		if err != nil {
			return failed(fmt.Errorf("session %d of %d: %w", len(sessions)+1, cfg.many, err))
		}
		sessions = append(sessions, s)
	}
	var (
		mu   sync.Mutex
		lat  samples
		errs []error
		wg   sync.WaitGroup
	)
	t := time.Now()
	for _, s := range sessions {
		wg.Go(func() {
			var mine samples
			for range cfg.each {
				c := time.Now()
				if err := runIn(ctx, s, "true"); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(c))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(t)
	r2, err := single()
	if err != nil {
		return failed(err)
	}
	if len(errs) > 0 {
		return failed(fmt.Errorf("%d sessions failed, first: %w", len(errs), errors.Join(errs[0])))
	}
	rate := float64(len(lat)) / elapsed.Seconds()
	base := (r1 + r2) / 2
	return Row{
		Value:    fmt.Sprintf("%.0f cmd/s (p99 %s)", rate, dur(lat.p99())),
		Baseline: fmt.Sprintf("%.0f cmd/s", base),
		Ratio:    rate / base,
		Target:   "≥ 1.5×, no error",
		Met:      yesNo(rate/base >= 1.5),
		Note: fmt.Sprintf("%d sessions × %d commands, median round trip %s; one session %.0f then %.0f cmd/s",
			cfg.many, cfg.each, dur(lat.median()), r1, r2),
	}
}

// measureP7 runs measureIdle in a fresh copy of this program, so that
// what the figures before it left behind (goroutine stacks, heap spans)
// neither hides nor inflates what the sessions cost.
func measureP7(ctx context.Context, cfg config) Row {
	self, err := os.Executable()
	if err != nil {
		return failed(err)
	}
	args := []string{"-idle-child"}
	if cfg.quick {
		args = append(args, "-quick")
	}
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return failed(fmt.Errorf("idle child: %w", err))
	}
	var row Row
	if err := json.Unmarshal(out, &row); err != nil {
		return failed(fmt.Errorf("idle child: %w", err))
	}
	return row
}

// measureIdle is the daemon memory each idle session costs beyond its
// shell, and the CPU the daemon spends while they idle.
func measureIdle(ctx context.Context, cfg config) Row {
	const n = 50
	before, err := settledRSS()
	if err != nil {
		return failed(err)
	}
	goBefore := goMemory()
	sessions := make([]*shellsession.Session, 0, n)
	defer func() {
		for _, s := range sessions {
			closeSession(s)
		}
	}()
	for range n {
		s, err := newSession(ctx)
		if err != nil {
			return failed(err)
		}
		sessions = append(sessions, s)
	}
	after, err := settledRSS()
	if err != nil {
		return failed(err)
	}
	goAfter := goMemory()
	shell, err := statusKiB(strconv.Itoa(sessions[0].Info().PID), "VmRSS")
	if err != nil {
		return failed(err)
	}
	idle := time.Second
	if !cfg.quick {
		idle = 5 * time.Second
	}
	cpu0 := cpuTime()
	time.Sleep(idle)
	cpu := cpuTime() - cpu0
	// RSS moves in pages and spans the runtime keeps; the Go heap and
	// stacks in use count each session's structures exactly. The larger
	// of the two is the figure.
	per := max(float64(after-before), float64(goAfter-goBefore)/1024) / n
	return Row{
		Value:    fmt.Sprintf("%.0f KiB/session, CPU %s in %s idle", per, dur(cpu), idle),
		Baseline: fmt.Sprintf("%d KiB (bash RSS)", shell),
		Ratio:    per / float64(shell),
		Target:   "≤ 256 KiB, 0 CPU",
		Met:      yesNo(per <= 256 && cpu < 10*time.Millisecond),
		Note: fmt.Sprintf("%d sessions, daemon RSS %d → %d KiB, Go live heap+stacks %d → %d KiB; CPU under 10ms counts as none",
			n, before, after, goBefore>>10, goAfter>>10),
	}
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

// measureP8 is the throughput of a session command writing 256 MiB (64
// MiB in -quick) while 50 followers stream its log, against the same
// command with none. The time runs until the command has ended and every
// follower has reached the log's end; every follower must see each frame or
// a warning before a gap.
func measureP8(ctx context.Context, cfg config) Row {
	const followers = 50
	size := int64(256 << 20)
	if cfg.quick {
		size = 64 << 20
	}
	s, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(s)
	line := fmt.Sprintf("head -c %d /dev/zero", size)
	var gaps, warnings, short int
	run := func(nf int) func() error {
		return func() error {
			ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
			defer cancel()
			c, err := s.Submit(shellsession.CommandOptions{Cmd: line})
			if err != nil {
				return err
			}
			var (
				wg sync.WaitGroup
				mu sync.Mutex
			)
			for range nf {
				wg.Go(func() {
					var next logstore.Cursor = 1
					var got int64
					var w, g int
					err := c.Log().Follow(ctx, 0, func(e logstore.Event) bool {
						switch {
						case e.Warning != nil:
							w++
							next = e.Warning.FirstAvailable
						case e.Frame != nil:
							if e.Frame.Cursor != next {
								g++
							}
							next = e.Frame.Cursor + 1
							got += int64(len(e.Frame.Data))
						}
						return true
					})
					mu.Lock()
					defer mu.Unlock()
					warnings += w
					gaps += g
					if err != nil || (w == 0 && got != size) {
						short++
					}
				})
			}
			r, err := process.Wait(ctx, c)
			wg.Wait()
			if err != nil {
				return err
			}
			return exitedZero(r)
		}
	}
	reps := 3
	v, base, err := alternate(reps, run(followers), run(0))
	if err != nil {
		return failed(err)
	}
	vr := float64(size) / v.median().Seconds()
	br := float64(size) / base.median().Seconds()
	ok := gaps == 0 && short == 0
	return Row{
		Value:    rate(size, v.median()),
		Baseline: rate(size, base.median()),
		Ratio:    vr / br,
		Target:   "≥ 0.5×, no silent gap",
		Met:      yesNo(vr/br >= 0.5 && ok),
		Note: fmt.Sprintf("%d MiB, %d followers, n=%d each; %d warnings, %d silent gaps, %d followers short of the output",
			size>>20, followers, reps, warnings, gaps, short),
	}
}
