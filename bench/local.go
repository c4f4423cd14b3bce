package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/shellsession"
)

// forkTrue is the baseline of the round-trip figures: fork and wait
// `bash -c true` from Go.
func forkTrue() error {
	return exec.Command("bash", "-c", "true").Run()
}

// measureP0 is the floor: a bare bash reading `true; printf marker` lines
// from a pipe, each read back from its stdout.
func measureP0(ctx context.Context, cfg config) Row {
	cmd := exec.CommandContext(ctx, "bash")
	in, err := cmd.StdinPipe()
	if err != nil {
		return failed(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return failed(err)
	}
	if err := cmd.Start(); err != nil {
		return failed(err)
	}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	r := bufio.NewReader(out)
	line := []byte("true; printf 'marker\\n'\n")
	roundTrip := func() error {
		if _, err := in.Write(line); err != nil {
			return err
		}
		got, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got != "marker\n" {
			return fmt.Errorf("bash answered %q", got)
		}
		return nil
	}
	v, base, err := alternate(cfg.reps, roundTrip, forkTrue)
	if err != nil {
		return failed(err)
	}
	return latencyRow(v, base, 0, "reference (~0.03×)")
}

// newSession starts a bash session bounded by a generous deadline.
func newSession(ctx context.Context) (*shellsession.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return shellsession.New(ctx, shellsession.Options{})
}

// runIn runs cmd in s and wants it to exit 0.
func runIn(ctx context.Context, s *shellsession.Session, cmd string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, r, err := s.Run(ctx, shellsession.CommandOptions{Cmd: cmd})
	if err != nil {
		return err
	}
	return exitedZero(r)
}

func exitedZero(r process.Result) error {
	if r.Reason != process.Exited || r.ExitCode == nil || *r.ExitCode != 0 {
		return fmt.Errorf("command ended %+v", r)
	}
	return nil
}

// closeSession ends s and waits for it.
func closeSession(s *shellsession.Session) {
	s.Close()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
	}
}

// measureP1 is the round trip of `true` in one session through the Go API.
func measureP1(ctx context.Context, cfg config) Row {
	s, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(s)
	v, base, err := alternate(cfg.reps, func() error { return runIn(ctx, s, "true") }, forkTrue)
	if err != nil {
		return failed(err)
	}
	row := latencyRow(v, base, 0.06, "≤ 0.06×")
	// What the fork before each command does to it: the same command after
	// this process slept as long instead. On a shared host it costs as much
	// (the machine's caches are cold after the idle either way), and far
	// more than a command right after another (below).
	idle := base.median()
	slept, _, err := alternate(cfg.reps/2, func() error { return runIn(ctx, s, "true") },
		func() error { time.Sleep(idle); return nil })
	if err != nil {
		return failed(err)
	}
	row.Note += fmt.Sprintf("; after %s asleep instead of the fork: %s", dur(idle), dur(slept.median()))
	// Where the time goes: the CPU the engine (this process) and the shell
	// spend per command, over a run of commands alone.
	pid := s.Info().PID
	self0, sh0 := cpuTime(), procCPU(pid)
	t := time.Now()
	for range cfg.reps {
		if err := runIn(ctx, s, "true"); err != nil {
			return failed(err)
		}
	}
	wall := time.Since(t) / time.Duration(cfg.reps)
	self := (cpuTime() - self0) / time.Duration(cfg.reps)
	sh := (procCPU(pid) - sh0) / time.Duration(cfg.reps)
	row.Note += fmt.Sprintf("; per command alone: %s wall, engine CPU %s, shell CPU %s", dur(wall), dur(self), dur(sh))
	return row
}

// measureP9 is session creation until the first command can run.
func measureP9(ctx context.Context, cfg config) Row {
	create := func() error {
		s, err := newSession(ctx)
		if err != nil {
			return err
		}
		closeSession(s)
		return nil
	}
	// Only New is timed: the close is outside the sample.
	var v samples
	base := samples{}
	if err := create(); err != nil {
		return failed(err)
	}
	for range cfg.slow {
		t := time.Now()
		s, err := newSession(ctx)
		if err != nil {
			return failed(err)
		}
		v = append(v, time.Since(t))
		closeSession(s)
		t = time.Now()
		if err := forkTrue(); err != nil {
			return failed(err)
		}
		base = append(base, time.Since(t))
	}
	return latencyRow(v, base, 3, "≤ 3×")
}

// measureP4 is the output throughput of `head -c N /dev/zero` in a session,
// captured into the log store, against the same command's stdout read from a
// pipe and discarded: cfg.pairs repetitions of cfg.outputTurns turns of each,
// each turn's command writing cfg.turnBytes (alternateRates).
func measureP4(ctx context.Context, cfg config) Row {
	s, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(s)
	each := cfg.turnBytes
	line := fmt.Sprintf("head -c %d /dev/zero", each)
	timed := func(f func() error) turn {
		return func() (float64, time.Duration, error) {
			t := time.Now()
			err := f()
			return float64(each), time.Since(t), err
		}
	}
	inSession := func() error {
		ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		_, r, err := s.Run(ctx, shellsession.CommandOptions{Cmd: line})
		if err != nil {
			return err
		}
		return exitedZero(r)
	}
	v, base, err := alternateRates(cfg.pairs, cfg.outputTurns, timed(inSession), timed(func() error { return pipeDiscard(ctx, line) }))
	if err != nil {
		return failed(err)
	}
	row := rateRow(v, base, cfg.outputTurns, func(r float64) string { return fmt.Sprintf("%.3g GB/s", r/1e9) }, 0.5, "≥ 0.5×")
	row.Note = fmt.Sprintf("%d MiB a turn, %s", each>>20, row.Note)
	return row
}

// pipeDiscard runs line under bash and reads its stdout from a pipe into
// nothing.
func pipeDiscard(ctx context.Context, line string) error {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	_, cerr := io.CopyBuffer(io.Discard, struct{ io.Reader }{out}, buf)
	return errors.Join(cerr, cmd.Wait())
}
