package exec

import (
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

func TestExpireAfterExit(t *testing.T) {
	t.Parallel()
	r := process.NewRegistry()
	add := func(keep logstore.KeepLogs, cmd string) *Process {
		p := start(t, Options{Cmd: cmd, KeepLogs: keep})
		if err := r.Add(p); err != nil {
			t.Fatal(err)
		}
		ExpireAfterExit(r, p, 100*time.Millisecond)
		return p
	}
	ttl := add(logstore.KeepOnExitTTL, "echo gone soon")
	kept := add(logstore.KeepUntilCleanup, "echo kept")
	running := add(logstore.KeepOnExitTTL, "echo ready; sleep 60")
	waitOutput(t, running, "ready")
	wait(t, ttl)
	wait(t, kept)
	eventually(t, "the on_exit_ttl process removed", func() bool {
		_, err := r.Get(ttl.ID())
		return err != nil
	})
	for _, p := range []*Process{kept, running} {
		if _, err := r.Get(p.ID()); err != nil {
			t.Errorf("%s removed: %v", p.Info().KeepLogs, err)
		}
	}
	// A process that ended before ExpireAfterExit is still expired.
	late := start(t, Options{Cmd: "true", KeepLogs: logstore.KeepOnExitTTL})
	wait(t, late)
	if err := r.Add(late); err != nil {
		t.Fatal(err)
	}
	ExpireAfterExit(r, late, 0)
	eventually(t, "the ended on_exit_ttl process removed", func() bool {
		_, err := r.Get(late.ID())
		return err != nil
	})
}

func TestKeepNoneKeepsNoFrames(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "echo hidden", KeepLogs: logstore.KeepNone})
	wait(t, p)
	if page := p.Log().Page(0, 0); len(page.Frames) != 0 || page.Last == 0 {
		t.Errorf("keepLogs none: page %+v, want no frames and a last cursor", page)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "head -c 100000 /dev/zero", Retention: 4096})
	wait(t, p)
	if page := p.Log().Page(0, 0); !page.TruncatedHead {
		t.Errorf("100 kB under a 4 kB retention: page not truncated")
	}
}

// TestNoFDLeft runs 1,000 processes of every sort and checks that this
// process holds no more file descriptors afterwards. It is not parallel:
// other tests' descriptors would blur the count.
func TestNoFDLeft(t *testing.T) {
	before := openFDs(t)
	kinds := []Options{
		{Cmd: "echo out; echo err >&2"},
		{Cmd: "cat", Stdin: process.StdinOpen},
		{Argv: []string{"no-such-program-4f2a"}},
		{Kind: process.KindPTY, Cmd: "echo pty"},
		{Cmd: "sleep 60"},
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 1000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := Start(kinds[i%len(kinds)])
			if err != nil {
				t.Error(err)
				return
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			switch i % len(kinds) {
			case 1:
				_ = p.CloseStdin()
			case 3:
				if a, err := p.Attach(ctx); err == nil {
					defer a.Close()
				}
			case 4:
				_ = p.Kill(syscall.SIGTERM, 0, 0)
			}
			if _, err := process.Wait(ctx, p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if after := openFDs(t); after > before {
		t.Errorf("%d file descriptors open after 1,000 processes, %d before", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
