package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/conchsh/conch/client"
	cexec "github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/httpfloor"
	"github.com/conchsh/conch/server"
)

// daemon is an in-process conch server on a loopback listener, built the
// way `conch serve` builds it, and a client of it. It runs without the
// reaper of orphans `conch serve` runs: in this process it would slow the
// baseline's fork-and-wait as well, more than the daemon (README).
type daemon struct {
	srv    *server.Server
	served chan error
	c      *client.Client
	url    string // http://127.0.0.1:PORT
	token  string
}

func startDaemon(with ...func(*server.Options)) (*daemon, error) {
	const token = "bench-token"
	opts := server.Options{
		Token:  token,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, f := range with {
		f(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &daemon{srv: srv, served: make(chan error, 1), url: "http://" + ln.Addr().String(), token: token}
	go func() { d.served <- srv.Serve(ln) }()
	d.c, err = client.New(d.url, token)
	if err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

func (d *daemon) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.srv.Shutdown(ctx)
	<-d.served
}

func runResultOK(r *client.RunResult, p *client.Process, err error) error {
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("process %s still running after the wait", p.ID)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		return fmt.Errorf("process %s ended %+v", r.ProcessID, r.WaitResult)
	}
	return nil
}

// measureP3 is a one-shot `true` over HTTP (POST /v1/processes/run).
func measureP3(ctx context.Context, cfg config) Row {
	d, err := startDaemon()
	if err != nil {
		return failed(err)
	}
	defer d.stop()
	oneShot := func() error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return runResultOK(d.c.Run(ctx, client.RunOptions{
			StartOptions: client.StartOptions{Cmd: "true", KeepLogs: "none"},
			Timeout:      client.Millis(20 * time.Second),
		}))
	}
	v, base, err := alternate(cfg.reps, oneShot, forkTrue)
	if err != nil {
		return failed(err)
	}
	row := latencyRow(v, base, 1.2, "≤ 1.2×")
	// Then what is under it, in turns of their own (in the one-shot's, it
	// read higher): the same one-shot embedded (package exec, no HTTP),
	// and net/http alone around the baseline's fork-and-wait (package
	// httpfloor), each after a fork as the one-shot is.
	embedded := func() error {
		p, err := cexec.Start(cexec.Options{Cmd: "true", KeepLogs: "none"})
		if err != nil {
			return err
		}
		select {
		case <-p.Done():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	bare, err := httpfloor.Serve(forkTrue)
	if err != nil {
		return failed(err)
	}
	defer bare.Close()
	s, err := alternateAll(cfg.reps/2, embedded, forkTrue, bare.RoundTrip, forkTrue)
	if err != nil {
		return failed(err)
	}
	forks := slices.Concat(s[1], s[3])
	ratio := func(x samples) float64 { return float64(x.median()) / float64(forks.median()) }
	row.Note += fmt.Sprintf("; under it, in turns of their own against fork-and-wait: the one-shot embedded (package exec, no HTTP) %.3f×, net/http alone around the fork (its floor) %.3f×",
		ratio(s[0]), ratio(s[2]))
	return row
}

// measureP2 is a session round trip of `true` over HTTP
// (POST /v1/sessions/{id}/commands/run). In turn with it and the baseline
// runs the same command in an embedded session of this process (P1), so
// that the note gives what the HTTP path adds, P2 − P1, from the same run:
// the median of the differences of runs measured one after the other. In
// the same turns, the HTTP path's floor: net/http alone around `true` in
// another embedded session (package httpfloor), less the embedded run.
func measureP2(ctx context.Context, cfg config) Row {
	d, err := startDaemon()
	if err != nil {
		return failed(err)
	}
	defer d.stop()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sess, err := d.c.CreateSession(sctx, client.SessionOptions{})
	cancel()
	if err != nil {
		return failed(err)
	}
	emb, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(emb)
	bareSession, err := newSession(ctx)
	if err != nil {
		return failed(err)
	}
	defer closeSession(bareSession)
	bare, err := httpfloor.Serve(func() error { return runIn(ctx, bareSession, "true") })
	if err != nil {
		return failed(err)
	}
	defer bare.Close()
	inSession := func() error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return runResultOK(d.c.RunCommand(ctx, sess.ID, client.CommandRunOptions{
			CommandOptions: client.CommandOptions{Cmd: "true", KeepLogs: "none"},
			Timeout:        client.Millis(20 * time.Second),
		}))
	}
	// Each run follows a fork, as in P1: one that follows another run
	// finds the engine's threads awake and its caches warm, and is faster.
	s, err := alternateAll(cfg.reps, inSession, forkTrue, func() error { return runIn(ctx, emb, "true") }, forkTrue,
		bare.RoundTrip, forkTrue)
	if err != nil {
		return failed(err)
	}
	v, embedded, base := s[0], s[2], append(s[1], s[3]...)
	row := latencyRow(v, base, 0.10, "≤ 0.10×")
	diff, floor := make(samples, len(v)), make(samples, len(v))
	for i := range v {
		diff[i] = v[i] - embedded[i]
		floor[i] = s[4][i] - embedded[i]
	}
	row.Note += fmt.Sprintf("; the HTTP path (P2 − P1, each against an embedded session's run beside it): median %s (target ≤ 80µs: %s), embedded %s; net/http alone around the same command (its floor) %s",
		dur(diff.median()), yesNo(diff.median() <= 80*time.Microsecond), dur(embedded.median()), dur(floor.median()))
	return row
}
