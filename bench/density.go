package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/conchsh/conch/shellsession"
)

// measureP6 runs cfg.many sessions at once, each running cfg.each `true`
// commands in turn, against the rate of one session running cfg.alone
// commands in turn: cfg.pairs repetitions over the same sessions, each of
// cfg.commandTurns turns of each side that share those commands out
// (alternateRates).
func measureP6(ctx context.Context, cfg config) Row {
	one, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(one)
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

	alone, each := cfg.alone, cfg.each
	single := func() (float64, time.Duration, error) {
		t := time.Now()
		for range alone {
			if err := runIn(ctx, one, "true"); err != nil {
				return 0, 0, err
			}
		}
		return float64(alone), time.Since(t), nil
	}
	var lat samples // every concurrent round trip
	concurrent := func() (float64, time.Duration, error) {
		var (
			mu   sync.Mutex
			all  samples
			errs []error
			wg   sync.WaitGroup
		)
		t := time.Now()
		for _, s := range sessions {
			wg.Go(func() {
				mine := make(samples, 0, each)
				for range each {
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
				all = append(all, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(t)
		if len(errs) > 0 {
			return 0, 0, fmt.Errorf("%d sessions failed, first: %w", len(errs), errs[0])
		}
		lat = append(lat, all...)
		return float64(len(all)), elapsed, nil
	}
	v, base, err := alternateRates(cfg.pairs, cfg.commandTurns, concurrent, single)
	if err != nil {
		return failed(err)
	}
	lat = lat[cfg.many*each:] // the warm-up's
	row := rateRow(v, base, cfg.commandTurns, func(r float64) string { return fmt.Sprintf("%.0f cmd/s", r) }, 1.5, "≥ 1.5×, no error")
	row.Value += fmt.Sprintf(" (p99 %s)", dur(lat.p99()))
	row.Note = fmt.Sprintf("%d sessions × %d commands a turn against one session × %d, median round trip %s; %s",
		cfg.many, each, alone, dur(lat.median()), row.Note)
	return row
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
