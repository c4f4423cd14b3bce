package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/conchsh/conch/shellsession"
)

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
