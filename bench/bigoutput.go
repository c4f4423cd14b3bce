package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

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

// measureP8 is the throughput of a session command writing 256 MiB (64
// MiB in -quick) while 50 followers stream its log, against the same
// command with none. The time runs until the command has ended and every
// follower has reached the log's end; every follower must see each frame or
// a warning before a gap. The followers are done with each frame when it is
// delivered, as the daemon's streams are, and follow as they do
// (logstore.FollowLent).
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
					err := c.Log().FollowLent(ctx, 0, func(e logstore.Event) bool {
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
