package shellsession

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/stretchr/testify/require"
)

// BenchmarkFrameSyscalls counts the system calls a session's shell makes per
// command: strace -f -c attached to the shell while it runs b.N commands of
// `true` (a builtin: every call is the frame's). It reports calls per command
// and logs the busiest calls. It needs strace and the right to trace the
// shell, and is no benchmark of time: run it alone, with a fixed count:
//
//	go test -run '^$' -bench FrameSyscalls -benchtime 1000x ./shellsession
func BenchmarkFrameSyscalls(b *testing.B) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		b.Skip("strace is not installed")
	}
	for _, shell := range testShells {
		b.Run(shell, func(b *testing.B) {
			ctx := context.Background()
			s := benchSession(b, shell)
			// The first commands fill the stream pool and warm the shell.
			for range 10 {
				if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
					b.Fatal(err, r)
				}
			}
			out := filepath.Join(b.TempDir(), "strace")
			args := []string{"-f", "-c", "-o", out}
			full := os.Getenv("CONCH_STRACE_FULL")
			if full != "" {
				// Every call, to read: CONCH_STRACE_FULL=/tmp/trace writes
				// /tmp/trace.bash and so on.
				args = []string{"-f", "-s", "200", "-o", full + "." + shell}
			}
			detach := processtest.AttachStrace(b, strace, s.cmd.Process.Pid, args...)
			b.ResetTimer()
			for range b.N {
				if _, r, err := s.Run(ctx, CommandOptions{Cmd: "true"}); err != nil || code(r) != 0 {
					b.Fatal(err, r)
				}
			}
			b.StopTimer()
			detach()
			if full != "" {
				return
			}
			total, top, err := straceSummary(out)
			require.NoError(b, err)
			b.ReportMetric(float64(total)/float64(b.N), "syscalls/cmd")
			b.Logf("%s: %.1f system calls per command; busiest: %s", shell, float64(total)/float64(b.N), topCalls(top, b.N, 6))
		})
	}
}

// straceSummary reads the table of strace -c: the total number of calls and
// the calls of each system call.
func straceSummary(path string) (total int, calls map[string]int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	calls = map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// % time, seconds, usecs/call, calls, [errors,] syscall
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || strings.HasPrefix(fs[0], "-") || fs[0] == "%" {
			continue
		}
		n, err := strconv.Atoi(fs[3])
		if err != nil {
			continue
		}
		name := fs[len(fs)-1]
		if name == "total" {
			total = n
			continue
		}
		calls[name] = n
	}
	if total == 0 {
		return 0, nil, fmt.Errorf("no total in %s", path)
	}
	return total, calls, sc.Err()
}

// topCalls renders the n busiest calls, per command.
func topCalls(calls map[string]int, cmds, n int) string {
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return calls[names[i]] > calls[names[j]] })
	var parts []string
	for i, k := range names {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(calls[k])/float64(cmds)))
	}
	return strings.Join(parts, ", ")
}
