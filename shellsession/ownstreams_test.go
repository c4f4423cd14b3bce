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
// When a marker cannot be written to the shell's own stream, the frame puts
// the stream back, by the path of the engine's end of it (bash and zsh
// write the marker by that path): later commands are seen to start. Before,
// ksh93, dash and busybox sh reported each command a second late, never
// seen to start, and ksh93 wrote the markers it could not write into the
// next command's output.
func TestShellLostItsOwnStreams(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := lostOwnStreams(t, shell)
			// The first command after the loss may lose its start marker
			// (the stream is put back then): seen or not, its output is
			// its own.
			for i, word := range []string{"hi", "again"} {
				c, err := s.Submit(CommandOptions{Cmd: "echo " + word})
				require.NoError(t, err)
				r := wait(t, c)
				out, errOut := output(c)
				require.Equal(t, 0, code(r), "%+v %q", r, errOut)
				require.Equal(t, word+"\n", out)
				if i == 1 {
					c.mu.Lock()
					seen := !c.runningAt.IsZero()
					c.mu.Unlock()
					require.True(t, seen, "the command was not seen to start")
				}
			}
			interruptOfSleep(t, s)
		})
	}
}

// TestInterruptWithoutStartMarker: a shell that announces its commands and
// lost its own streams where the engine's end of them cannot be opened by
// path either (an engine whose /proc the shell may not open) loses every
// start marker; an interrupt of a command then goes once the command's end
// line is sent again, a second after the command. Before, it waited for the
// start for ever.
func TestInterruptWithoutStartMarker(t *testing.T) {
	framing = func(p *sentinel.Paths) { p.OwnElse = "" }
	defer func() { framing = nil }()
	for _, shell := range []string{"dash", "ksh", "busybox"} {
		t.Run(shell, func(t *testing.T) {
			interruptOfSleep(t, lostOwnStreams(t, shell))
		})
	}
}

// lostOwnStreams starts a session of shell and closes the shell's own
// stdout and stderr, where open, once it waits for its next command.
func lostOwnStreams(t *testing.T, shell string) *Session {
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
	return s
}

// interruptOfSleep interrupts a program the session runs, and requires
// that the command ends signaled and the session runs the next one, unless
// the shell failed on the interrupt as shellFaults pins.
func interruptOfSleep(t *testing.T, s *Session) {
	c, err := s.Submit(CommandOptions{Cmd: "env sleep 100; echo not-reached"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return programs(c) > 0 }, deadline, time.Millisecond)
	require.NoError(t, c.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, c)
	if shellFailed(t, s, s.opts.Shell, r) { // ksh93's pinned deaths
		return
	}
	require.Equal(t, process.Signaled, r.Reason, "%+v", r)
	out, _ := output(c)
	require.NotContains(t, out, "not-reached")
	_, out, _ = run(t, s, CommandOptions{Cmd: "echo after"})
	require.Equal(t, "after\n", out)
}
