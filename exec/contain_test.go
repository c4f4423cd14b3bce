package exec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
)

// Stop ends what left the process's tree and tag — setsid env -i, double
// forks — through its cgroup, whether the process still runs or has ended.
func TestStopEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	for _, tc := range []struct {
		name, tail string
		kind       process.Kind
	}{
		{"exec-ended", "", process.KindExec},
		{"exec-running", "sleep 60", process.KindExec},
		{"pty-running", "sleep 60", process.KindPTY},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := containmenttest.Marker()
			p := start(t, Options{Kind: tc.kind, Cmd: containmenttest.Escapes(marker) + tc.tail, Containment: root})
			containmenttest.WaitRunning(t, marker, 2)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			require.NoError(t, p.Stop(ctx))
			containmenttest.Gone(t, marker)
		})
	}
}

// A process the OOM killer ends is signaled KILL with OOMKilled; a fork
// past the pids limit fails inside it; every ended process says what it
// cost.
func TestLimitsAndUsage(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20, Pids: 16}
	root := containmenttest.Limited(t, l)
	for _, tc := range []struct {
		name, cmd string
		check     func(r process.Result, out string) bool
	}{
		{"oom", containmenttest.Allocate(256), func(r process.Result, _ string) bool {
			return r.Reason == process.Signaled && r.Signal == "KILL" && r.OOMKilled
		}},
		{"oom-under-a-shell", containmenttest.Allocate(256) + "; echo $?", func(r process.Result, out string) bool {
			return r.Reason == process.Exited && !r.OOMKilled && strings.Contains(out, "137")
		}},
		{"pids", containmenttest.Forks(32), func(r process.Result, out string) bool {
			return r.Reason == process.Exited && strings.Contains(out, "fork: Resource temporarily unavailable")
		}},
		{"cpu", containmenttest.Busy, func(r process.Result, _ string) bool {
			return r.Usage != nil && r.Usage.CPU >= 250*time.Millisecond && r.Usage.CPU <= 450*time.Millisecond
		}},
		{"memory", containmenttest.Allocate(24), func(r process.Result, _ string) bool {
			return r.Usage != nil && r.Usage.MemoryPeak >= 24<<20 && r.Usage.MemoryPeak < 64<<20
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, Options{Cmd: tc.cmd, Containment: root, Limits: l})
			r := wait(t, p)
			if out := logText(p.Log(), 0); !tc.check(r, out) {
				t.Fatalf("result %+v usage %+v, output %q", r, r.Usage, out)
			}
		})
	}
}

// Limits the host cannot apply are refused before anything runs.
func TestLimitsRefused(t *testing.T) {
	t.Parallel()
	none := containment.Open(containment.Config{Disabled: true})
	_, err := Start(Options{Cmd: "true", Containment: none, Limits: containment.Limits{Pids: 10}})
	require.ErrorIs(t, err, containment.ErrUnsupported)
	_, err = Start(Options{Cmd: "true", Limits: containment.Limits{Pids: -1}})
	require.ErrorIs(t, err, process.ErrInvalidArgument)
}

// Without cgroups the CPU time is the process's and its reaped children's.
func TestUsageWithoutCgroups(t *testing.T) {
	t.Parallel()
	r := wait(t, start(t, Options{Cmd: containmenttest.Busy + "; true"}))
	require.NotNil(t, r.Usage)
	require.True(t, r.Usage.CPU >= 250*time.Millisecond && r.Usage.CPU <= 450*time.Millisecond && r.Usage.MemoryPeak == 0, "usage %+v", r.Usage)
}

// A kill's escalation to KILL ends the whole cgroup: what left the tree and
// cleared its tag goes with the process.
func TestEscalationEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	marker := containmenttest.Marker()
	p := start(t, Options{Cmd: "trap '' TERM; " + containmenttest.Escapes(marker) + "sleep 60", Containment: root})
	containmenttest.WaitRunning(t, marker, 2)
	require.NoError(t, p.Kill(syscall.SIGTERM, 100*time.Millisecond, 0))
	r := wait(t, p)
	require.Equal(t, "KILL", r.Signal, "%+v", r)
	containmenttest.WaitRunning(t, marker, 0)
}

// A process is done before its cgroup is removed: whoever waits for it
// does not wait for an rmdir in each hierarchy too.
func TestDoneBeforeTheCgroupGoes(t *testing.T) {
	root := containmenttest.Root(t, containment.Limits{})
	seen, removing := make(chan struct{}), make(chan struct{})
	removingCgroup = func() {
		close(removing)
		<-seen
	}
	defer func() { removingCgroup = nil }()
	p := start(t, Options{Cmd: "true", Containment: root})
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		close(seen)
		t.Fatal("the process was not done before its cgroup's removal")
	}
	close(seen)
	select {
	case <-removing:
	case <-time.After(10 * time.Second):
		t.Fatal("the empty cgroup of an ended process was not removed")
	}
}

// An ended process whose background child outlived it keeps its cgroup
// while the child runs, and lets go of it once the child has ended: its
// directories and the descriptors the engine held of them. They stayed
// until the record was deleted.
func TestLeftCgroupGoesOnceEmpty(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	p := start(t, Options{Cmd: "(sleep 1 >/dev/null 2>&1 &); true", Containment: root, KeepLogs: "none"})
	wait(t, p)
	var dirs []string
	for _, d := range root.Dirs() {
		dirs = append(dirs, filepath.Join(d, p.ID()))
	}
	// held counts what of the process's cgroup is left: its directories
	// and this process's descriptors of files in them.
	held := func() (n int) {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				n++
			}
		}
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			link, _ := os.Readlink("/proc/self/fd/" + fd.Name())
			for _, d := range dirs {
				if strings.HasPrefix(link, d+"/") {
					n++
				}
			}
		}
		return n
	}
	require.NotZero(t, held(), "kept while the child runs")
	require.Eventually(t, func() bool { return held() == 0 }, 20*time.Second, 20*time.Millisecond,
		"the cgroup of an ended process is held after its child ended: %v", dirs)
}

// A process the engine kills after a child of its was OOM-killed is
// reported killed, not OOM-killed: the cgroup's count of OOM kills is the
// whole life's, and it was read as this end's.
func TestKilledAfterAChildsOOM(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20, Pids: 16}
	root := containmenttest.Limited(t, l)
	p := start(t, Options{Cmd: containmenttest.Allocate(256) + "; echo rc=$?; exec sleep 100", Containment: root, Limits: l})
	require.Eventually(t, func() bool {
		return strings.Contains(logText(p.Log(), 0), "rc=137")
	}, 20*time.Second, 20*time.Millisecond, "the child's end: %s", logText(p.Log(), 0))
	require.NoError(t, p.Kill(syscall.SIGKILL, 0, 0))
	r := wait(t, p)
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	require.Equal(t, "KILL", r.Signal)
	require.False(t, r.OOMKilled, "a kill through the engine reported as the OOM killer's: %+v", r)
}

// The usage of an ended process's record counts what it left running in
// its cgroup, once the cgroup is removed, while the result answered at its
// exit keeps what was counted then: it stopped at the exit.
func TestUsageCountsWhatOutlivedTheProcess(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	p := start(t, Options{Cmd: "(" + containmenttest.Busy + " >/dev/null 2>&1 &); exit 0", Containment: root})
	r := wait(t, p)
	require.NotNil(t, r.Usage)
	require.Less(t, r.Usage.CPU, 250*time.Millisecond, "the exit counted the child's spin: %+v", r.Usage)
	require.Eventually(t, func() bool {
		u := p.Info().Result.Usage
		return u != nil && u.CPU >= 250*time.Millisecond
	}, 20*time.Second, 20*time.Millisecond, "the record's usage: %+v", p.Info().Result.Usage)
	require.Less(t, r.Usage.CPU, 250*time.Millisecond, "the exit's result changed: %+v", r.Usage)
}

// oomKilled says how the process itself ended: a child it left running
// that the OOM killer ends after the exit raises the record's usage when
// the cgroup is removed, but does not make the process OOM-killed.
func TestLeftChildsOOMIsNotTheProcesss(t *testing.T) {
	t.Parallel()
	l := containment.Limits{MemoryBytes: 64 << 20, Pids: 16}
	root := containmenttest.Limited(t, l)
	p := start(t, Options{Cmd: "(sleep 0.3; " + containmenttest.Allocate(256) + ") >/dev/null 2>&1 & exit 0", Containment: root, Limits: l})
	r := wait(t, p)
	require.Equal(t, process.Exited, r.Reason, "%+v", r)
	require.False(t, r.OOMKilled, "%+v", r)
	require.Eventually(t, func() bool {
		u := p.Info().Result.Usage
		return u != nil && u.MemoryPeak >= 32<<20
	}, 20*time.Second, 20*time.Millisecond, "the record's usage: %+v", p.Info().Result.Usage)
	rec := p.Info().Result
	require.Equal(t, process.Exited, rec.Reason, "%+v", rec)
	require.Equal(t, 0, *rec.ExitCode, "%+v", rec)
	require.False(t, rec.OOMKilled, "the left child's OOM kill reported as the process's: %+v", rec)
}
