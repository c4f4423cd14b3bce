package shellsession

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShellLostItsOwnStreams: a shell that lost its own stdout and stderr
// still reports its commands and takes their interrupts. ksh93 closes both
// when an interrupt lands as it restores the redirections of the command it
// ran (an interrupt of `sleep 100 | cat` about once in a thousand, under
// load: it restores them twice); its next command's start marker then went
// nowhere, and an interrupt of that command waited for the marker for
// ever. Here the shell's descriptors are closed from outside, through
// ptrace, while it waits for its next command.
//
// By path: when a marker cannot be written to the shell's own stream, the
// frame puts the stream back, by the path of the engine's end of it (bash
// and zsh write the marker by that path): later commands are seen to start
// (before, ksh93, dash and busybox sh reported each command a second late,
// never seen to start). Without that path (an engine whose /proc the shell
// may not open), start markers are lost, and the interrupt goes once the
// command's end line is sent again (before, it never went).
func TestShellLostItsOwnStreams(t *testing.T) {
	for _, byPath := range []bool{true, false} {
		for _, shell := range testShells {
			if !byPath && (shell == "bash" || shell == "zsh" || shell == "mksh") {
				continue // they announce nothing: the start marker is what is lost
			}
			t.Run(fmt.Sprintf("%s/by path %v", shell, byPath), func(t *testing.T) {
				if !byPath {
					framing = func(p *sentinel.Paths) { p.OwnElse = "" }
					defer func() { framing = nil }()
				}
				s := newSession(t, Options{Shell: shell})
				pid := s.cmd.Process.Pid
				run(t, s, CommandOptions{Cmd: "true"})
				require.Eventually(t, func() bool { return proctree.Sleeping(pid) }, deadline, time.Millisecond)
				var fds []int
				for _, fd := range []int{1, 2} {
					if _, err := os.Lstat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err == nil {
						fds = append(fds, fd)
					}
				}
				if len(fds) > 0 {
					processtest.CloseDescriptors(t, pid, fds...)
				}

				if os.Getenv("ZZTRACE") != "" {
					detach := processtest.AttachStrace(t, "strace", pid, "-f", "-s", "200", "-o", "/tmp/zzown.trace")
					defer detach()
				}
				// The first command after the loss may lose its start
				// marker (the stream is put back then): seen or not, its
				// output is its own.
				for i, word := range []string{"hi", "again"} {
					c, err := s.Submit(CommandOptions{Cmd: "echo " + word})
					require.NoError(t, err)
					r := wait(t, c)
					out, errOut := output(c)
					require.Equal(t, 0, code(r), "%+v %q", r, errOut)
					if byPath || shell != "ksh" {
						// ksh93 with no stream and no path holds the markers
						// it could not write, and writes them with the next
						// output it can.
						require.Equal(t, word+"\n", out)
					}
					if byPath && i == 1 {
						c.mu.Lock()
						seen := !c.runningAt.IsZero()
						c.mu.Unlock()
						require.True(t, seen, "the command was not seen to start")
					}
				}

				c, err := s.Submit(CommandOptions{Cmd: "env sleep 100; echo not-reached"})
				require.NoError(t, err)
				if !assert.Eventually(t, func() bool { return programs(c) > 0 }, 3*time.Second, time.Millisecond) {
					c.Kill(syscall.SIGKILL, 0, 0)
					r := wait(t, c)
					o, e := output(c)
					t.Fatalf("%+v %q %q diag %q", r, o, e, s.diag.Tail())
				}
				require.NoError(t, c.Kill(syscall.SIGINT, 0, 0))
				r := wait(t, c)
				require.Equal(t, process.Signaled, r.Reason, "%+v", r)
				out, _ := output(c)
				require.NotContains(t, out, "not-reached")

				_, out, _ = run(t, s, CommandOptions{Cmd: "echo after"})
				require.Equal(t, "after\n", out)
			})
		}
	}
}
