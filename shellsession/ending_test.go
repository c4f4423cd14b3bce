package shellsession

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestIdleShellKilledFromOutside: a shell killed while it waits for a
// command ends its session at once: the session is terminal and later
// submissions fail with ErrSessionEnded, rather than be queued and fail.
func TestIdleShellKilledFromOutside(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			run(t, s, CommandOptions{Cmd: "true"})
			require.NoError(t, syscall.Kill(s.Info().PID, syscall.SIGKILL))
			requireEnds(t, s, "its shell's death")
			i := s.Info()
			require.Equal(t, process.Terminal, i.State)
			require.Equal(t, process.Signaled, i.Result.Reason, "%+v", *i.Result)
			require.Equal(t, "KILL", i.Result.Signal)
			_, err := s.Submit(CommandOptions{Cmd: "true"})
			require.ErrorIs(t, err, ErrSessionEnded)
		})
	}
}

// TestBackgroundJobEndsWhileIdle: a background job that ends while the
// session waits for its next command, or that the command itself kills,
// leaves the session alive (busybox sh took the interrupted read of its
// input for its end and exited).
func TestBackgroundJobEndsWhileIdle(t *testing.T) {
	t.Parallel()
	cmds := map[string]string{
		"ends": "sleep 0.2 >/dev/null 2>&1 & echo $!",
		// KILL, not TERM: the job's forked shell takes TERM with the
		// session shell's handler until it has reset its traps, and
		// drops it (TestSignalBeforeJobRuns), which on a loaded machine
		// was after the kill (the job then ran its 30 s, for dash, mksh
		// and busybox sh alike).
		"killed": "sleep 30 >/dev/null 2>&1 & p=$!; sleep 0.2; kill -9 $p; echo $p",
	}
	for _, shell := range testShells {
		for name, cmd := range cmds {
			t.Run(shell+"/"+name, func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell})
				for range 3 { // the shell's read is not always the call its SIGCHLD interrupts
					_, out, _ := run(t, s, CommandOptions{Cmd: cmd})
					pid, err := strconv.Atoi(strings.TrimSpace(out))
					require.NoError(t, err, "%q", out)
					// Once the job is a zombie or gone, the shell has had its SIGCHLD.
					require.Eventually(t, func() bool { return !proctree.Alive(pid) }, deadline, 10*time.Millisecond)
					r, out, _ := run(t, s, CommandOptions{Cmd: "echo alive"})
					require.Equal(t, "alive\n", out, "%+v", r)
					require.Equal(t, process.Running, s.Info().State)
				}
			})
		}
	}
}

// TestBusyboxInputLink: busybox sh, which reads its input through a link in
// the session's directory, starts where it is asked, as a shell started
// there would: $PWD, $OLDPWD and $0 as before.
func TestBusyboxInputLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wd, err := os.Getwd()
	require.NoError(t, err)
	oldpwd, ok := os.LookupEnv("OLDPWD")
	if !ok {
		oldpwd = "unset"
	}
	for cwd, want := range map[string]string{dir: dir, "": wd} {
		s := newSession(t, Options{Shell: "busybox", Cwd: cwd})
		_, out, _ := run(t, s, CommandOptions{Cmd: `echo "$0|$PWD|${OLDPWD-unset}"; pwd`})
		require.Equal(t, "sh|"+want+"|"+oldpwd+"\n"+want+"\n", out)
		_, _, stderr := run(t, s, CommandOptions{Cmd: "nosuchcommand"})
		require.True(t, strings.HasPrefix(stderr, "sh: "), "%q", stderr)
	}
}

// TestGivenUpEndKeepsOutput: a command whose end cannot be reported (here
// bash's frame guard, which the command changed) keeps the output it wrote
// before, even when the goroutine reading its streams had not read it when
// the failure came: that goroutine reads what the streams hold first, then
// ends the command.
func TestGivenUpEndKeepsOutput(t *testing.T) {
	const text = "echo kept; echo err >&2; __conch=x"
	beforeStep = func(c *Command) {
		if c.text != text {
			return
		}
		// Hold the reader until the failure is given up, and wake it as
		// giveUp does: it reads nothing in this step.
		for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(time.Millisecond) {
			c.mu.Lock()
			given := c.givenUp != nil
			c.mu.Unlock()
			if given {
				c.kick()
				return
			}
		}
	}
	defer func() { beforeStep = nil }()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	res, stdout, stderr := run(t, s, CommandOptions{Cmd: text})
	require.Equal(t, process.Failed, res.Reason, "%+v", res)
	require.Contains(t, res.Error, "$__conch")
	require.Equal(t, "kept\n", stdout)
	require.Equal(t, "err\n", stderr)
	expectRun(t, s, "echo next", 0, "next\n")
}

// TestEndReadLateIsNoUnreportedEnd: a command whose end marker the shell
// wrote before it went back to its prompt, but which the goroutine reading
// its streams has not read yet, is not taken for one whose end never comes:
// on a loaded machine that goroutine waited its turn past the engine's look
// at an idle shell, and an interrupted builtin loop failed, "the shell went
// back to its prompt without reporting the command's end".
func TestEndReadLateIsNoUnreportedEnd(t *testing.T) {
	const text = "echo late-read"
	held := false
	beforeStep = func(c *Command) {
		if c.text != text || held {
			return
		}
		held = true
		// Hold the reader past the first look at the idle shell (a
		// second after the frame went, 100 ms long), or until that
		// look gave the end up.
		c.mu.Lock()
		until := c.idleAt.Add(time.Second)
		c.mu.Unlock()
		for time.Now().Before(until) {
			c.mu.Lock()
			given := c.givenUp != nil
			c.mu.Unlock()
			if given {
				c.kick()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { beforeStep = nil }()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	res, stdout, _ := run(t, s, CommandOptions{Cmd: text})
	require.Equal(t, process.Exited, res.Reason, "%+v", res)
	require.Equal(t, "late-read\n", stdout)
	expectRun(t, s, "echo next", 0, "next\n")
}

// TestFailedExec: `exec` of a program that cannot run behaves as at the
// shell's prompt: bash returns 127 (126) and goes on, the other shells
// end, and so does their session. bash ended too: each command is a
// sourced file, where a failed exec ends bash unless execfail is set.
func TestFailedExec(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			for cmd, status := range map[string]int{"exec nosuchcmd_conch": 127, "exec /etc/passwd": 126} {
				s := newSession(t, Options{Shell: shell})
				r, _, errOut := run(t, s, CommandOptions{Cmd: cmd})
				require.Equal(t, status, code(r), "%s: stderr %q", cmd, errOut)
				if shell != "bash" {
					requireEnds(t, s, cmd)
					continue
				}
				r, out, _ := run(t, s, CommandOptions{Cmd: "echo $?"})
				require.Equal(t, 0, code(r))
				require.Equal(t, fmt.Sprintf("%d\n", status), out, cmd)
			}
		})
	}
}

// TestBashPosixSpecialBuiltinError pins what cannot be mended: in POSIX
// mode (set -o posix, or POSIXLY_CORRECT in the environment) an error of a
// special builtin — a bad option to set, a redirection of ":" that fails —
// ends bash, and its session, where at bash's prompt it goes on: bash
// sources each command, and a sourced file is not interactive.
func TestBashPosixSpecialBuiltinError(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"set -o nosuchoption_conch", ": >/nonexistent_conch/x"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: "bash"})
			run(t, s, CommandOptions{Cmd: cmd + " || echo survived"})
			_, out, _ := run(t, s, CommandOptions{Cmd: "echo survived"})
			require.Equal(t, "survived\n", out, "outside POSIX mode the session goes on")
			run(t, s, CommandOptions{Cmd: "set -o posix"})
			r, out, errOut := run(t, s, CommandOptions{Cmd: cmd + "; echo not reached"})
			require.NotEqual(t, 0, code(r), "stderr %q", errOut)
			require.Empty(t, out)
			requireEnds(t, s, cmd+" in POSIX mode")
		})
	}
}

// TestEndedSessionHasUsage: an ended session's result says what it used,
// as every ended process, command and cell does: its shell's CPU time and
// its children's (or its cgroup's), whether it ended by itself or was
// closed.
func TestEndedSessionHasUsage(t *testing.T) {
	t.Parallel()
	busy := `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'`
	for _, end := range []string{"exit", "close"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{})
			r, _, _ := run(t, s, CommandOptions{Cmd: busy})
			require.NotNil(t, r.Usage)
			if end == "exit" {
				_, err := s.Submit(CommandOptions{Cmd: "exit 3"})
				require.NoError(t, err)
			} else {
				require.NoError(t, s.Close())
			}
			requireEnds(t, s, end)
			res := s.Info().Result
			require.NotNil(t, res)
			require.NotNil(t, res.Usage, "an ended session says what it used")
			require.Greater(t, res.Usage.CPU, 10*time.Millisecond, "the busy loops' CPU, the child's included: %+v", res.Usage)
		})
	}
}

// TestShellEndsBeforeReadingCommand: a command sent to a shell that then
// exits on its own without reading it never ran, and is lost, not reported
// with the shell's exit status as if it had run and ended the shell (exit
// 3). Here bash, whose own stdin the first command closed (the copy of it
// that bash keeps in its 10 while it sources the command), ends as the
// command does, and runs its exit trap, during which the second is sent.
func TestShellEndsBeforeReadingCommand(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash"})
	dir := t.TempDir()
	trapped, ran := dir+"/trapped", dir+"/ran"
	c, err := s.Submit(CommandOptions{Cmd: fmt.Sprintf("trap 'touch %s; sleep 1; exit 7' EXIT; exec 10>&-", trapped)})
	require.NoError(t, err)
	wait(t, c)
	require.Eventually(t, func() bool { _, err := os.Stat(trapped); return err == nil }, deadline, 5*time.Millisecond)
	next, err := s.Submit(CommandOptions{Cmd: fmt.Sprintf("touch %s; exit 4", ran)})
	require.NoError(t, err, "the shell runs its exit trap: the session has not ended yet")
	r := wait(t, next)
	require.NoFileExists(t, ran, "the shell ran the command after all")
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	require.Contains(t, r.Error, "before it read the command")
}

// TestSessionEndedUnderCommand: a command running when the engine ends its
// session (a kill of the session with TERM, its deletion) is lost, saying
// so, whatever status the shell exits with: bash exits 143 on TERM, and the
// command, which never finished, read exited 143, as if it had run exit.
func TestSessionEndedUnderCommand(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, end := range []string{"kill TERM", "close"} {
			t.Run(shell+"/"+end, func(t *testing.T) {
				t.Parallel()
				sessionEndedUnder(t, shell, end)
			})
		}
	}
}

// sessionEndedUnder ends a session of shell under its running command, by
// end, and requires the command lost.
func sessionEndedUnder(t *testing.T, shell, end string) {
	s := newSession(t, Options{Shell: shell})
	c, err := s.Submit(CommandOptions{Cmd: "/bin/sleep 2; echo after"})
	require.NoError(t, err)
	waitProgram(t, c, "sleep") // by its path: ksh93's own sleep is a builtin
	if end == "close" {
		go s.Close()
	} else {
		require.NoError(t, s.Kill(syscall.SIGTERM, 0, 0))
	}
	r := wait(t, c)
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	// Whether the shell exits on the signal (bash, 143) or is killed by
	// it, the command says the session was ended under it: "killed by
	// SIGKILL" alone, said of a deleted session, read as a kill from
	// outside.
	require.Regexp(t, `^the session was ended under it \((its shell exited \d+|its shell was killed by SIG(TERM|KILL))\)$`, r.Error)
	out, _ := output(c)
	require.Empty(t, out)
}

// TestExecOfALongProgram: a command that execs a program that runs longer
// than the watchdog's first look (a second) reports the program's end, as
// `exec true` does, and one that ignores SIGINT is stopped by its execution
// timeout: timed_out, the session ended saying why. The look took the input
// that the exec closed for a shell deaf to its input: the command failed
// after a second, "the shell closed its own input", the program killed.
func TestExecOfALongProgram(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell+"/ends", func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			r, _, _ := run(t, s, CommandOptions{Cmd: "exec sleep 1.5"})
			require.True(t, r.Reason == process.Exited && code(r) == 0, "%+v", r)
			requireEnds(t, s, "the exec'd program's end")
		})
		t.Run(shell+"/ignores-INT", func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, StopGrace: 2 * time.Second})
			// Ignored by the program itself: zsh gives what it runs the
			// SIGINT it ignores at its default.
			r, _, _ := run(t, s, CommandOptions{Cmd: `exec sh -c 'trap "" INT; exec sleep 60'`, ExecutionTimeout: 500 * time.Millisecond})
			require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
			requireEnds(t, s, "the timeout's kill")
			require.Contains(t, s.Info().Result.Error, "did not stop after its execution timeout")
		})
	}
}

// TestKillOfAnExecdProgram: a kill of a command that exec'd a program (the
// shell is that program now) ends it as any program: signaled with what
// was sent, the session ended with it. It was lost, "the session's shell
// was killed by SIGINT".
func TestKillOfAnExecdProgram(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(shell+"/"+process.SignalName(sig), func(t *testing.T) {
				t.Parallel()
				s := newSession(t, Options{Shell: shell})
				c, err := s.Submit(CommandOptions{Cmd: "exec sleep 30"})
				require.NoError(t, err)
				waitRunning(t, c)
				pid := s.Info().PID
				require.Eventually(t, func() bool {
					comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
					return err == nil && string(comm) == "sleep\n"
				}, deadline, 5*time.Millisecond, "the shell became sleep")
				require.NoError(t, c.Kill(sig, 0, 0))
				r := wait(t, c)
				require.True(t, r.Reason == process.Signaled && r.Signal == process.SignalName(sig), "%+v", r)
				requireEnds(t, s, "the exec'd program's end")
			})
		}
	}
}

// TestSessionKillEscalates: a session whose shell ignores the signal that
// ends it gets KILL escalateAfter later, as an exec process does; the
// session's StopGrace (an hour here) is only the default. The kill waited
// out the StopGrace whatever it asked.
func TestSessionKillEscalates(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, StopGrace: time.Hour})
			r, _, _ := run(t, s, CommandOptions{Cmd: "trap '' TERM"})
			require.Equal(t, 0, code(r), "%+v", r)
			killed := make(chan error, 1)
			go func() { killed <- s.Kill(syscall.SIGTERM, 100*time.Millisecond, syscall.SIGKILL) }()
			select {
			case err := <-killed:
				require.NoError(t, err)
			case <-time.After(60 * time.Second):
				syscall.Kill(s.Info().PID, syscall.SIGKILL) // so that the session's end can end
				t.Fatal("the kill is still waiting a minute later: its KILL, due 100 ms after TERM, did not come")
			}
			requireEnds(t, s, "the kill")
			i := s.Info()
			require.Equal(t, process.Signaled, i.Result.Reason, "%+v", i.Result)
			require.Equal(t, "TERM", i.Result.Signal)
		})
	}
}

// TestSessionKillEscalatesTo: escalateTo is what reaches the session's
// processes escalateAfter later, and KILL StopGrace (a second here) after
// it. The shell ignores TERM and HUP; a program it started, which ignores
// TERM, notes the HUP it gets. It got KILL, StopGrace after the TERM,
// whatever the kill asked.
func TestSessionKillEscalatesTo(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			got, ready := filepath.Join(dir, "got"), filepath.Join(dir, "ready")
			s := newSession(t, Options{Shell: shell, StopGrace: time.Second})
			// The program starts before the shell's traps: a signal ignored
			// as a shell starts cannot be trapped.
			r, _, _ := run(t, s, CommandOptions{Cmd: "/bin/sh -c 'trap \"\" TERM; trap \"echo hup >" + got +
				"; exit\" HUP; : >" + ready + "; while :; do sleep 0.1; done' >/dev/null 2>&1 & trap '' TERM HUP"})
			require.Equal(t, 0, code(r), "%+v", r)
			require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil }, deadline, 10*time.Millisecond)
			require.NoError(t, s.Kill(syscall.SIGTERM, 100*time.Millisecond, syscall.SIGHUP))
			requireEnds(t, s, "the kill")
			b, err := os.ReadFile(got)
			require.NoError(t, err, "the session's program got no HUP")
			require.Equal(t, "hup\n", string(b))
		})
	}
}
