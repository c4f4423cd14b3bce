package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/server"
)

// soakSample is what the soak looks at between rounds, when every worker is
// between rounds and nothing of the last round is left running.
type soakSample struct {
	at         time.Duration
	rss        int64 // bytes, once the collector has given back what it freed
	held       int64 // rss less the free heap pages the runtime kept all the same (see sample)
	rawRSS     int64 // bytes, before that: with what the collector has not yet freed
	anon       int64 // bytes of rss that no file backs (the binary's pages come in as its code first runs)
	heap       uint64
	ms         runtime.MemStats // after the collection
	goroutines int
	fds        int
	rounds     int64
}

// soakExitTTL is how long the soak's daemon keeps the record of an ended
// process kept on_exit_ttl. By default it keeps each for ten minutes
// (bounded by MaxEnded): through a soak's first ten minutes the records
// grow by design, 0.8 MiB of Go heap in a 10-minute run, which is not the
// growth the soak looks for. Kept 30 s, they are as many from the first
// minute's sample on as at the end.
const soakExitTTL = 30 * time.Second

// soakWorkers is how many rounds run at once.
const soakWorkers = 4

// soakWindow is how many samples each end of the soak's RSS growth is the
// median of. A single sample, even settled, swings: a 10-minute soak's
// samples after its first minute spread over 21.1–22.4 MiB with no trend,
// and the sample that ended one read 22.4 with its Go heap 1.6 MiB against
// 0.9–1.1 in the samples before. A leak moves the median of the last
// three as it moves the last.
const soakWindow = 3

// medianHeld returns the median of the samples' held RSS (see soakSample).
func medianHeld(ss []soakSample) int64 {
	v := make([]int64, len(ss))
	for i, s := range ss {
		v[i] = s.held
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// measureSoak is P15: sessions, one-shot processes and code contexts
// created, used and deleted in a loop, with floods, interrupts, failed
// commands, input answered through interact and abandoned streams, for
// cfg.soak. Every soakEvery the workers finish their round and the daemon's
// RSS, goroutines and open descriptors are sampled; RSS is judged on the
// median of the last soakWindow samples against that of the first
// soakWindow from the first minute on (see soakWindow), the goroutines and
// descriptors on the last sample. RSS is taken once
// a collection has given the memory it freed back to the system
// (debug.FreeOSMemory): taken as it comes, it holds whatever garbage the
// collector's pacing leaves at that moment, and swung by a sixth from one
// sample to the next with no growth of what the daemon keeps.
func measureSoak(ctx context.Context, cfg config) Row {
	if cfg.soak <= 0 {
		return Row{Value: "-", Baseline: "-", Target: "-", Met: "-", Note: "run with -soak DURATION"}
	}
	d, err := startDaemon(func(o *server.Options) { o.ExitTTL = soakExitTTL })
	if err != nil {
		return failed(err)
	}
	// One round first, so what the daemon makes once (listeners, the
	// reaper, pools) is there before the start is sampled.
	if err := soakRound(ctx, d.c, rand.New(rand.NewPCG(1, 2))); err != nil {
		d.stop()
		return failed(fmt.Errorf("warm-up round: %w", err))
	}
	start := settled(d, 0, 0, nil)
	// What the daemon keeps between rounds: the fewest descriptors and
	// goroutines seen settled so far. The start's sample may still hold
	// some of the warm-up round's, and a sample that waited for those
	// alone would read the next round's late ones as growth.
	floor := start
	every := min(15*time.Second, max(cfg.soak/8, time.Second))
	baseAt := min(time.Minute, cfg.soak/4)

	var rounds atomic.Int64
	var errs []error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, err)
		}
	}
	var samples []soakSample
	began := time.Now()
	for time.Since(began) < cfg.soak {
		phaseEnd := time.Now().Add(every)
		var wg sync.WaitGroup
		for w := range soakWorkers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for time.Now().Before(phaseEnd) {
					if err := soakRound(ctx, d.c, rng); err != nil {
						fail(err)
					}
					rounds.Add(1)
				}
			})
		}
		wg.Wait()
		s := settled(d, time.Since(began), rounds.Load(), &floor)
		samples = append(samples, s)
		floor.fds, floor.goroutines = min(floor.fds, s.fds), min(floor.goroutines, s.goroutines)
		fmt.Fprintf(os.Stderr, "bench: P15 %6s rounds %5d  RSS %6.1f MiB less %4.1f kept free (anonymous %5.1f; %6.1f before a collection)  heap %5.1f MiB  goroutines %4d  fds %3d\n",
			s.at.Round(time.Second), s.rounds, float64(s.rss)/(1<<20), float64(s.rss-s.held)/(1<<20), float64(s.anon)/(1<<20),
			float64(s.rawRSS)/(1<<20), float64(s.heap)/(1<<20), s.goroutines, s.fds)
		if os.Getenv("CONCH_SOAK_MEMSTATS") != "" {
			m := &s.ms
			fmt.Fprintf(os.Stderr, "bench: P15 memstats: sys %d heapInuse %d heapIdleKept %d stackInuse %d stackSys %d mspan %d mcache %d gcSys %d otherSys %d buckHash %d\n",
				m.Sys>>10, m.HeapInuse>>10, (m.HeapIdle-m.HeapReleased)>>10, m.StackInuse>>10, m.StackSys>>10, m.MSpanInuse>>10, m.MCacheInuse>>10, m.GCSys>>10, m.OtherSys>>10, m.BuckHashSys>>10)
		}
	}
	if cfg.heapProfile != "" {
		if err := writeHeapProfile(cfg.heapProfile); err != nil {
			fail(fmt.Errorf("heap profile: %w", err))
		}
	}
	d.stop()
	left := proctree.Descendants(os.Getpid())

	from := len(samples) - 1
	for i, s := range samples {
		if s.at >= baseAt {
			from = i
			break
		}
	}
	base, last := samples[from], samples[len(samples)-1]
	first, end := samples[from:min(from+soakWindow, len(samples))], samples[max(len(samples)-soakWindow, from):]
	baseHeld, endHeld := medianHeld(first), medianHeld(end)
	rssGrowth := float64(endHeld)/float64(baseHeld) - 1
	gGrowth := float64(last.goroutines)/float64(base.goroutines) - 1
	ok := rssGrowth <= 0.05 && gGrowth <= 0.05 && last.fds <= start.fds && len(left) == 0 && len(errs) == 0
	lo, hi := base.rawRSS, base.rawRSS
	for _, s := range samples {
		lo, hi = min(lo, s.rawRSS), max(hi, s.rawRSS)
	}
	note := fmt.Sprintf("%s, %d rounds by %d workers; after the first %s: RSS %.1f→%.1f MiB (%+.1f%%) after a collection "+
		"less the free heap the runtime kept, the median of %d samples at each end (the first and the last sample alone %.1f→%.1f MiB, %+.1f%%; "+
		"with the kept free heap %.1f→%.1f MiB, %+.1f%%), "+
		"of it anonymous %.1f→%.1f MiB (%+.1f%%), Go heap %.1f→%.1f MiB, RSS before a collection %.1f–%.1f MiB; "+
		"goroutines %d→%d (%+.1f%%); open fds %d at the start, %d at the end; %d processes left; %d errors",
		cfg.soak, last.rounds, soakWorkers, base.at.Round(time.Second), float64(baseHeld)/(1<<20),
		float64(endHeld)/(1<<20), 100*rssGrowth, soakWindow, float64(base.held)/(1<<20), float64(last.held)/(1<<20),
		100*(float64(last.held)/float64(base.held)-1), float64(base.rss)/(1<<20), float64(last.rss)/(1<<20),
		100*(float64(last.rss)/float64(base.rss)-1), float64(base.anon)/(1<<20), float64(last.anon)/(1<<20),
		100*(float64(last.anon)/float64(base.anon)-1), float64(base.heap)/(1<<20), float64(last.heap)/(1<<20),
		float64(lo)/(1<<20), float64(hi)/(1<<20), base.goroutines, last.goroutines, 100*gGrowth,
		start.fds, last.fds, len(left), len(errs))
	for _, err := range errs {
		note += "; " + err.Error()
	}
	return Row{
		Value:    fmt.Sprintf("RSS %+.1f%%, goroutines %+.1f%%, fds %d→%d", 100*rssGrowth, 100*gGrowth, start.fds, last.fds),
		Baseline: fmt.Sprintf("after %s", base.at.Round(time.Second)),
		Target:   "≤ +5%, fds back, nothing left, no error",
		Met:      yesNo(ok),
		Note:     note,
	}
}

// settled samples once the client's idle connections are closed and the
// daemon has closed its ends and ended the goroutines of the round's last
// requests and processes (at most three seconds): the descriptors and
// goroutines left then are what the daemon keeps. want is the sample to
// wait for (its fds and goroutines), nil for none.
func settled(d *daemon, at time.Duration, rounds int64, want *soakSample) soakSample {
	d.c.CloseIdleConnections()
	s := sample(at, rounds)
	for deadline := time.Now().Add(3 * time.Second); want != nil && time.Now().Before(deadline) &&
		(s.fds > want.fds || s.goroutines > want.goroutines); {
		time.Sleep(50 * time.Millisecond)
		s = sample(at, rounds)
	}
	return s
}

func sample(at time.Duration, rounds int64) soakSample {
	s := soakSample{at: at, goroutines: runtime.NumGoroutine(), rounds: rounds}
	s.rawRSS, _ = vmRSS()
	debug.FreeOSMemory()
	s.rss, s.anon = vmRSS()
	runtime.ReadMemStats(&s.ms)
	// The collection returns the heap's free pages, yet the sample still
	// found 0–2.3 MiB of them kept (HeapIdle − HeapReleased), as the
	// daemon's own goroutines had already taken pages up and put them
	// back: RSS swung with them by a tenth from one sample to the next,
	// where the rest rose smoothly. The growth is judged on the rest.
	s.held = s.rss - int64(s.ms.HeapIdle-s.ms.HeapReleased)
	s.heap = s.ms.HeapAlloc
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	return s
}

// writeHeapProfile writes what is live now (after a collection) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// vmRSS returns this process's resident set and the part of it that no
// file backs, in bytes.
func vmRSS() (rss, anon int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = kb(v)
		} else if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kb(v)
		}
	}
	return rss, anon
}

// soakRound is one round of mixed work: a session with state, a failing
// command, a flood, an interrupt and input; one-shot processes with a kill
// and an abandoned stream; now and then a code context. Everything it
// creates it deletes.
func soakRound(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	shells := []string{"bash", "dash", "zsh", "mksh", "busybox"}
	shell := shells[rng.IntN(len(shells))]
	s, err := c.CreateSession(ctx, client.SessionOptions{Shell: shell, Cwd: os.TempDir()})
	if err != nil {
		return fmt.Errorf("create %s session: %w", shell, err)
	}
	defer c.DeleteSession(context.WithoutCancel(ctx), s.ID)
	run := func(cmd string, opts client.CommandRunOptions) (*client.RunResult, *client.Process, error) {
		opts.Cmd = cmd
		if opts.Timeout == 0 {
			opts.Timeout = client.Millis(time.Minute)
		}
		return c.RunCommand(ctx, s.ID, opts)
	}
	want := func(what string, r *client.RunResult, p *client.Process, err error, code int) error {
		if err != nil {
			return fmt.Errorf("%s %s: %w", shell, what, err)
		}
		if r == nil || r.ExitCode == nil || *r.ExitCode != code {
			return fmt.Errorf("%s %s: want exit %d, got %+v (process %+v)", shell, what, code, r, p)
		}
		return nil
	}
	r, p, err := run("cd / && X=soak", client.CommandRunOptions{})
	if err := want("state", r, p, err, 0); err != nil {
		return err
	}
	r, p, err = run(`echo "$X"; nosuchcommand-soak 2>/dev/null; (exit 7)`, client.CommandRunOptions{})
	if err := want("failing command", r, p, err, 7); err != nil {
		return err
	}
	if r.Stdout != "soak\n" {
		return fmt.Errorf("%s: state lost: %q", shell, r.Stdout)
	}
	r, p, err = run("head -c 3000000 /dev/zero | tr '\\0' x", client.CommandRunOptions{OutputLimit: 4096})
	if err := want("flood", r, p, err, 0); err != nil {
		return err
	}
	// An interrupt of a running command; the session lives on.
	cmd, err := c.Submit(ctx, s.ID, client.CommandOptions{Cmd: "sleep 30"})
	if err != nil {
		return fmt.Errorf("%s submit: %w", shell, err)
	}
	if err := c.Kill(ctx, cmd.ID, client.KillOptions{Signal: "INT"}); err != nil {
		return fmt.Errorf("%s interrupt: %w", shell, err)
	}
	interrupted := time.Now()
	wr, _, err := c.Wait(ctx, cmd.ID, time.Minute)
	if err != nil {
		return fmt.Errorf("%s wait after interrupt: %w", shell, err)
	}
	// A lost interrupt lets `sleep 30` run to its end (the result says INT
	// all the same: the command was interrupted, as far as its caller knows).
	if took := time.Since(interrupted); wr == nil || wr.Reason != api.Signaled || wr.Signal != "INT" || took > 10*time.Second {
		return fmt.Errorf("%s: an interrupt right after submit did not stop the command: %+v after %v", shell, wr, took.Round(time.Millisecond))
	}
	// Input answered through interact.
	r, p, err = run("read line; echo got:$line", client.CommandRunOptions{
		CommandOptions: client.CommandOptions{Stdin: "open"}})
	if err != nil || p == nil || !r.WaitingForInput {
		return fmt.Errorf("%s read: want it back waiting for input, got %+v, %v", shell, p, err)
	}
	r, p, err = c.Interact(ctx, p.ID, client.InteractOptions{Input: "x\n", Timeout: client.Millis(time.Minute)})
	if err := want("interact", r, p, err, 0); err != nil {
		return err
	}
	if !strings.Contains(r.Stdout, "got:x") {
		return fmt.Errorf("%s interact: the answer lacks the reply: %q", shell, r.Stdout)
	}

	// One-shot processes: a run, a killed one, an abandoned stream.
	rr, rp, err := c.Run(ctx, client.RunOptions{
		StartOptions: client.StartOptions{Cmd: "seq 1 20000 >/dev/null; seq 1 2000"},
		Timeout:      client.Millis(time.Minute)})
	if err := runResultOK(rr, rp, err); err != nil {
		return fmt.Errorf("exec run: %w", err)
	}
	if err := c.Delete(ctx, rr.ProcessID); err != nil {
		return fmt.Errorf("exec delete: %w", err)
	}
	long, err := c.Start(ctx, client.StartOptions{Cmd: "while :; do echo tick; sleep 0.01; done"})
	if err != nil {
		return fmt.Errorf("exec start: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	n := 0
	for _, err := range c.Stream(sctx, long.ID, client.StreamOptions{}) {
		n++
		if err != nil || n >= 3 {
			break
		}
	}
	stop() // the stream is abandoned mid-way
	if err := c.Kill(ctx, long.ID, client.KillOptions{Signal: "TERM"}); err != nil {
		return fmt.Errorf("exec kill: %w", err)
	}
	if _, _, err := c.Wait(ctx, long.ID, time.Minute); err != nil {
		return fmt.Errorf("exec wait: %w", err)
	}
	if err := c.Delete(ctx, long.ID); err != nil {
		return fmt.Errorf("exec delete: %w", err)
	}

	// A code context now and then (an interpreter costs tens of ms to start).
	if rng.IntN(4) == 0 {
		lang := []string{"python", "javascript"}[rng.IntN(2)]
		cc, err := c.CreateSession(ctx, client.SessionOptions{Language: lang})
		if err != nil {
			return fmt.Errorf("create %s context: %w", lang, err)
		}
		defer c.DeleteSession(context.WithoutCancel(ctx), cc.ID)
		code := map[string]string{"python": "x = 6 * 7\nprint(x)", "javascript": "let x = 6 * 7; console.log(x)"}[lang]
		r, p, err := c.RunCommand(ctx, cc.ID, client.CommandRunOptions{
			CommandOptions: client.CommandOptions{Code: code}, Timeout: client.Millis(time.Minute)})
		if err := want(lang+" cell", r, p, err, 0); err != nil {
			return err
		}
		busy := map[string]string{"python": "while True: pass", "javascript": "while (true) {}"}[lang]
		cell, err := c.Submit(ctx, cc.ID, client.CommandOptions{Code: busy})
		if err != nil {
			return fmt.Errorf("%s busy cell: %w", lang, err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Kill(ctx, cell.ID, client.KillOptions{Signal: "INT"}); err != nil {
			return fmt.Errorf("%s interrupt: %w", lang, err)
		}
		if _, _, err := c.Wait(ctx, cell.ID, time.Minute); err != nil {
			return fmt.Errorf("%s wait: %w", lang, err)
		}
	}
	return nil
}
