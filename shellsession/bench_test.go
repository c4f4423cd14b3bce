package shellsession

import (
	"bufio"
	"context"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/stretchr/testify/require"
)

// BenchmarkRoundTrip measures P1 and P0 of docs/performance.md against forking
// `bash -c true`, alternating the three in one run, and reports the ratios
// of the medians: session/fork (P1, target 0.06) and floor/fork (P0).
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	s, err := New(ctx, Options{})
	require.NoError(b, err)
	defer s.Close()

	floor := exec.Command("bash", "--norc", "--noprofile")
	in, err := floor.StdinPipe()
	require.NoError(b, err)
	outPipe, err := floor.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, proctree.Start(floor))
	defer func() { in.Close(); proctree.Wait(floor) }()
	out := bufio.NewReader(outPipe)

	var session, bare, forks []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
			b.Fatal(err, r)
		}
		t1 := time.Now()
		if _, err := in.Write([]byte("true; printf 'm\\n'\n")); err != nil {
			b.Fatal(err)
		}
		if _, err := out.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		fork := exec.Command("bash", "-c", "true")
		if err := proctree.Start(fork); err != nil {
			b.Fatal(err)
		}
		if err := proctree.Wait(fork); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		session, bare, forks = append(session, t1.Sub(t0)), append(bare, t2.Sub(t1)), append(forks, t3.Sub(t2))
	}
	m := median(forks)
	b.ReportMetric(float64(median(session).Microseconds()), "session-µs")
	b.ReportMetric(float64(median(bare).Microseconds()), "floor-µs")
	b.ReportMetric(float64(m.Microseconds()), "fork-µs")
	b.ReportMetric(float64(median(session))/float64(m), "P1-ratio")
	b.ReportMetric(float64(median(bare))/float64(m), "P0-ratio")
}

// BenchmarkRoundTripEngine runs `true` in a session back to back and
// reports the engine's own CPU time per command: the CPU this process spent
// (every thread, the runtime's included; not the shell's, a child) over the
// loop, divided by the commands. Nothing else runs in the loop, so its
// allocations per op are the engine's too.
func BenchmarkRoundTripEngine(b *testing.B) {
	ctx := context.Background()
	s, err := New(ctx, Options{})
	require.NoError(b, err)
	defer s.Close()
	for range 20 { // the stream pool and the buffers warm up
		if _, _, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	ru0, n := selfUsage(), 0
	for b.Loop() {
		if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
			b.Fatal(err, r)
		}
		n++
	}
	ru := selfUsage()
	cpu := ru.Utime.Nano() + ru.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(n), "engine-µs/op")
	// A thread that blocks switches out voluntarily: about one per wake-up
	// of the engine's goroutines, and steadier than time on a busy machine.
	b.ReportMetric(float64(ru.Nvcsw-ru0.Nvcsw)/float64(n), "switches/op")
}

// selfUsage returns the resources this process has used (every thread),
// its waited-for children not included.
func selfUsage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkOutputOrder measures how often a command's frames give its
// writes to stdout and stderr in the order they were made: out1 then err1,
// and out1, err1, out2. Two pipes give no total order; this is how close the
// reading comes (the README says what output promises).
func BenchmarkOutputOrder(b *testing.B) {
	for _, cmd := range []string{"echo out1; echo err1 >&2", "echo out1; echo err1 >&2; echo out2"} {
		b.Run(strconv.Itoa(strings.Count(cmd, "echo"))+"-writes", func(b *testing.B) {
			ctx := context.Background()
			s, err := New(ctx, Options{})
			require.NoError(b, err)
			defer s.Close()
			want := strings.Join(strings.Fields(strings.NewReplacer("echo", "", ">&2", "", ";", "").Replace(cmd)), "\n") + "\n"
			kept, runs := 0, 0
			for b.Loop() {
				c, _, err := s.Run(ctx, CommandOptions{Cmd: cmd})
				if err != nil {
					b.Fatal(err)
				}
				var seq strings.Builder
				for _, f := range c.Log().Page(0, 0).Frames {
					seq.Write(f.Data)
				}
				if seq.String() == want {
					kept++
				}
				runs++
			}
			b.ReportMetric(100*float64(kept)/float64(runs), "%-in-order")
		})
	}
}

// BenchmarkRoundTripShells is P1 on each shell: the round trip of `true` in
// a session of that shell, alternating with forking `bash -c true`, as the
// ratio of the medians. The shells frame commands differently (a sourced
// file, an eval of the file's text read in-process, an eval of the text
// sent on the frame's line), so each has its own figure.
func BenchmarkRoundTripShells(b *testing.B) {
	for _, shell := range []string{"bash", "dash", "zsh", "mksh", "ksh", "busybox"} {
		b.Run(shell, func(b *testing.B) {
			ctx := context.Background()
			s := benchSession(b, shell)
			var session, forks []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
					b.Fatal(err, r)
				}
				t1 := time.Now()
				fork := exec.Command("bash", "-c", "true")
				if err := proctree.Start(fork); err != nil {
					b.Fatal(err)
				}
				if err := proctree.Wait(fork); err != nil {
					b.Fatal(err)
				}
				session, forks = append(session, t1.Sub(t0)), append(forks, time.Since(t1))
			}
			b.ReportMetric(float64(median(session).Microseconds()), "session-µs")
			b.ReportMetric(float64(median(forks).Microseconds()), "fork-µs")
			b.ReportMetric(float64(median(session))/float64(median(forks)), "P1-ratio")
		})
	}
}

// benchSession starts a session of shell for a benchmark, which skips when
// the shell is not installed; the session is closed when it ends.
func benchSession(b *testing.B, shell string) *Session {
	b.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		b.Skip(shell, " is not installed")
	}
	s, err := New(context.Background(), Options{Shell: shell})
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	return s
}
