package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
)

// measureP10 is the time from a command's blocking read of its open stdin
// until a pending run answers 202 with waitingForInput, over HTTP: for
// bash's read builtin and python3's input(). Each command prints the time
// just before it reads, so the figure includes that output's way to the
// daemon and is, if anything, long. Then the daemon's CPU while commands
// with stdin closed run: nothing watches them.
func measureP10(ctx context.Context, cfg config) Row {
	d, err := startDaemon()
	if err != nil {
		return failed(err)
	}
	defer d.stop()
	n := 20
	if cfg.quick {
		n = 5
	}
	cmds := []string{
		`date +%s%N; read x`,
		`python3 -c 'import time; print(time.time_ns(), flush=True); input()'`,
	}
	var all samples
	for _, cmd := range cmds {
		for range n {
			s, err := waitForInputOnce(ctx, d, cmd)
			if err != nil {
				return failed(err)
			}
			all = append(all, s)
		}
	}
	cpu, err := sleepersCPU(ctx, d, process.StdinClosed)
	if err != nil {
		return failed(err)
	}
	watched, err := sleepersCPU(ctx, d, process.StdinOpen)
	if err != nil {
		return failed(err)
	}
	med, worst := all.median(), all.sorted()[len(all)-1]
	return Row{
		Value:    fmt.Sprintf("median %s, max %s; CPU %s with 20 closed-stdin commands for 2s", dur(med), dur(worst), dur(cpu)),
		Baseline: "-",
		Target:   "≤ 500 ms median, no CPU on closed stdin",
		Met:      yesNo(med <= 500*time.Millisecond && cpu < 10*time.Millisecond),
		Note: fmt.Sprintf("%d runs each of bash read and python3 input(); CPU under 10ms counts as none; "+
			"20 sleeping commands with stdin open, which are watched, cost %s in 2s", n, dur(watched)),
	}
}

// waitForInputOnce runs cmd with stdin open and returns the time from the
// instant it printed until the 202 came back.
func waitForInputOnce(ctx context.Context, d *daemon, cmd string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, p, err := d.c.Run(ctx, client.RunOptions{StartOptions: client.StartOptions{Cmd: cmd, Stdin: process.StdinOpen}})
	now := time.Now()
	if err != nil {
		return 0, err
	}
	if p == nil || !r.WaitingForInput {
		return 0, fmt.Errorf("%s: no wait for input seen: %+v", cmd, r)
	}
	defer d.c.Kill(context.Background(), p.ID, client.KillOptions{Signal: "KILL"})
	ns, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: printed %q", cmd, r.Stdout)
	}
	return now.Sub(time.Unix(0, ns)), nil
}

// sleepersCPU is the daemon's CPU while 20 commands with stdin as given
// sleep for 2 s.
func sleepersCPU(ctx context.Context, d *daemon, stdin process.Stdin) (time.Duration, error) {
	var ids []string
	defer func() {
		for _, id := range ids {
			d.c.Kill(context.Background(), id, client.KillOptions{Signal: "KILL"})
		}
	}()
	for range 20 {
		p, err := d.c.Start(ctx, client.StartOptions{Cmd: "exec sleep 30", Stdin: stdin})
		if err != nil {
			return 0, err
		}
		ids = append(ids, p.ID)
	}
	time.Sleep(200 * time.Millisecond)
	cpu0 := cpuTime()
	time.Sleep(2 * time.Second)
	return cpuTime() - cpu0, nil
}
