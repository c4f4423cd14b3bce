package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
)

// conch run whose output's reader goes away (conch run yes | head) ends
// the command as the pipe would a local one, by SIGPIPE, and exits 141: it
// was ended by SIGPIPE itself, and yes ran on in the daemon for good.
func TestRunBrokenPipe(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	for _, args := range [][]string{{}, {"--session", ""}} {
		if len(args) > 0 {
			sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
			require.NoError(t, err)
			args[1] = sess.ID
		}
		name := "brokenpipe" + strconv.Itoa(len(args))
		cmd, out, _ := s.runUntilLine(t, "conch\n", append(append([]string{"run", "--name", name}, args...), "--", "yes conch")...)
		require.NoError(t, out.Close())
		guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
		err := cmd.Wait()
		guard.Stop()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 141, ee.ExitCode(), "%v", err)

		list, err := s.c.List(t.Context(), client.ListOptions{Name: name, State: "all"})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		r, _, err := s.c.Wait(t.Context(), list.Items[0].ID, 30*time.Second)
		require.NoError(t, err)
		require.NotNil(t, r, "yes still runs")
		require.Equal(t, process.Signaled, r.Reason, "%+v", r)
		require.Equal(t, "PIPE", r.Signal)
	}
}

// conch run --idle / --timeout (in a session too) and conch interact whose
// output's reader goes away end the command by SIGPIPE and exit 141, as
// plain conch run does: they once died of SIGPIPE themselves while
// printing the answer, saying nothing, with the command left running for
// good.
func TestAnswerBrokenPipe(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
	require.NoError(t, err)
	// The output is far more than a pipe holds: conch is still writing it
	// when the reader goes away.
	const cmdText = "seq 1 100000; sleep 100"
	for i, args := range [][]string{
		{"--idle", "1s"},
		{"--timeout", "1s"},
		{"--session", sess.ID, "--idle", "1s"},
	} {
		name := "answerpipe" + strconv.Itoa(i)
		cmd, out, stderr := s.runUntilLine(t, "1\n", append(append([]string{"run", "--name", name}, args...), "--", cmdText)...)
		require.NoError(t, out.Close())
		s.endedByPipe(t, fmt.Sprint(args), name, cmd, stderr)
	}
	p, err := s.c.Start(t.Context(), client.StartOptions{Name: "interactpipe", Cmd: cmdText})
	require.NoError(t, err)
	cmd, out, stderr := s.runUntilLine(t, "1\n", "interact", p.ID, "--cursor", "0", "--idle", "1s")
	require.NoError(t, out.Close())
	s.endedByPipe(t, "interact", "interactpipe", cmd, stderr)
}

// conch run --idle / --timeout (in a session too, and under --keep-logs
// none) and conch interact whose output's reader goes away before the
// answer, for a command that never comes back (yes never goes quiet), end
// the command by SIGPIPE and exit 141, as `yes | true` would: they waited
// for good, printing nothing, with yes running on.
func TestAnswerReaderGone(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
	require.NoError(t, err)
	run := func(what, name string, args ...string) {
		t.Helper()
		cmd, out, stderr := s.startPiped(t, args...)
		require.NoError(t, out.Close())
		s.endedByPipe(t, what, name, cmd, stderr)
	}
	for i, args := range [][]string{
		{"--idle", "5s"},
		{"--timeout", "600s"},
		{"--session", sess.ID, "--idle", "5s"},
		{"--keep-logs", "none", "--idle", "5s"},
	} {
		name := "readergone" + strconv.Itoa(i)
		run(fmt.Sprint(args), name, append(append([]string{"run", "--name", name}, args...), "--", "yes")...)
	}
	p, err := s.c.Start(t.Context(), client.StartOptions{Name: "interactgone", Cmd: "yes"})
	require.NoError(t, err)
	run("interact", "interactgone", "interact", p.ID, "--idle", "5s")
}

// conch run --timeout and conch interact --timeout of a command that
// writes faster than retention keeps come back once the wait ran out: they
// once joined the answer with the logs until the page held the answer's
// last frame, which retention had dropped, and printed for as long as the
// command wrote (yes: gigabytes, for good).
func TestAnswerOutrunByOutput(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	answer := func(what string, args ...string) string {
		t.Helper()
		cmd, out, stderr := s.startPiped(t, args...)
		guard := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		defer guard.Stop()
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s: stderr %q", what, stderr.String())
		require.Equal(t, exitRunning, ee.ExitCode(), "%s: %v, stderr %q", what, err, stderr.String())
		require.Contains(t, stderr.String(), "dropped by retention", what)
		return stderr.String()
	}
	answer("run", "run", "--name", "outrun", "--timeout", "1s", "--", "yes")
	list, err := s.c.List(t.Context(), client.ListOptions{Name: "outrun", State: "all"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	id := list.Items[0].ID
	defer s.c.Kill(context.WithoutCancel(t.Context()), id, client.KillOptions{Signal: "KILL"})
	answer("interact", "interact", id, "--timeout", "1s")
}

// endedByPipe requires that conch, cmd, whose output's reader has gone,
// exits 141 and that the one process named name ended by SIGPIPE.
func (s *served) endedByPipe(t *testing.T, what, name string, cmd *exec.Cmd, stderr *strings.Builder) {
	t.Helper()
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, what)
	require.Equal(t, exitBrokenPipe, ee.ExitCode(), "%s: %v, stderr %q", what, err, stderr.String())

	list, err := s.c.List(t.Context(), client.ListOptions{Name: name, State: "all"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, what)
	r, _, err := s.c.Wait(t.Context(), list.Items[0].ID, 30*time.Second)
	require.NoError(t, err)
	require.NotNil(t, r, "%s: the command still runs", what)
	require.Equal(t, "PIPE", r.Signal, "%s: %+v", what, r)
}

// runUntilLine starts conch with args against s and returns it once the
// first line of its stdout is want, with that stdout and what it writes to
// stderr.
func (s *served) runUntilLine(t *testing.T, want string, args ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd, out, stderr := s.startPiped(t, args...)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, want, line)
	return cmd, out, stderr
}

// startPiped starts conch with args against s, its stdout a pipe to read
// and its stderr kept.
func (s *served) startPiped(t *testing.T, args ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd := s.command(args...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	return cmd, out, &stderr
}

// conch run whose daemon stops answering (wedged, not gone) leaves on
// Ctrl-C once the daemon has not taken the signal for signalPassWait,
// saying so, rather than ignore every Ctrl-C while it waits for an answer
// that never comes. The daemon here answers the start and nothing more.
func TestRunDaemonNotAnswering(t *testing.T) {
	t.Parallel()
	stderr := interruptWedged(t, true)
	require.Contains(t, stderr, "the daemon did not take SIGINT for wedged, which may still run")
}

// interruptWedged runs conch run -- 'sleep 100' against a daemon that
// answers the start (when answerStart) and nothing else, sends conch SIGINT
// once the start was answered (or asked for), and returns conch's stderr
// once it exited 125.
func interruptWedged(t *testing.T, answerStart bool) string {
	t.Helper()
	asked := make(chan struct{}, 1)
	hang := make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/processes" {
			if answerStart {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":"wedged","kind":"exec","state":"running"}`)
				asked <- struct{}{}
				return
			}
			asked <- struct{}{}
		}
		select { // no answer
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer fake.Close()
	defer close(hang)
	cmd := exec.Command("conch", "run", "--", "sleep 100")
	cmd.Env = append(os.Environ(), client.EnvURL+"="+fake.URL, client.EnvToken+"=t")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("conch run did not ask to start the command")
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitOwn, ee.ExitCode(), "stderr: %s", stderr.String())
	return stderr.String()
}

// conch run whose output is read too late for the daemon to keep says
// where output was dropped, on stderr, as conch logs -f does: it once
// printed what was left with a gap in the middle, exit 0 and nothing said.
func TestRunSaysDroppedOutput(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	cmd, out, stderr := s.startPiped(t, "run", "--name", "dropped", "--", "seq 1 3000000")
	// Read nothing until the command has ended: the daemon cannot keep
	// what conch has not read.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		list, err := s.c.List(t.Context(), client.ListOptions{Name: "dropped", State: "all"})
		require.NoError(t, err)
		if len(list.Items) == 1 && list.Items[0].State == "terminal" {
			break
		}
		require.True(t, time.Now().Before(deadline), "seq did not end")
	}
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines++
	}
	require.NoError(t, cmd.Wait())
	require.Less(t, lines, 3000000, "output was dropped")
	require.Contains(t, stderr.String(), "conch: ", "the drop is said")
	require.Contains(t, stderr.String(), "dropped")
}

// conch run of a command that catches SIGINT and exits with a status of
// its own exits with that status when Ctrl-C is passed on: it once exited
// 130, as for a command the signal ended. The loop's program sleeps long:
// bash drops an interrupt that lands just as the program it waits for
// exits by itself, as at a terminal.
func TestRunInterruptHandled(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	cmd, _, _ := s.runUntilLine(t, "ready\n", "run", "--", `trap "exit 7" INT; echo ready; while :; do sleep 30; done`)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 7, ee.ExitCode())
}

// Ctrl-\ (SIGQUIT) is passed to conch run's command as Ctrl-C is, and
// stops wait as Ctrl-C does, exiting 131: it dumped every goroutine of
// conch, exited 2 (a usage error's status), and left the command running.
func TestQuitPassedOn(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	cmd, _, stderr := s.runUntilLine(t, "ready\n", "run", "--name", "quitme", "--", "echo ready; exec sleep 30")
	// The signal once landed on the shell before its exec, which dropped
	// it (a shell's default for QUIT here), and the sleep ran its 30 s:
	// it is sent once the sleep runs.
	require.Eventually(t, func() bool {
		list, err := s.c.List(t.Context(), client.ListOptions{Name: "quitme"})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(list.Items[0].PID) + "/comm")
		return string(comm) == "sleep\n"
	}, 30*time.Second, 10*time.Millisecond, "the sleep runs")
	require.NoError(t, cmd.Process.Signal(syscall.SIGQUIT))
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee)
	require.Equal(t, 128+int(syscall.SIGQUIT), ee.ExitCode(), stderr.String())
	require.NotContains(t, stderr.String(), "goroutine")
	list, err := s.c.List(t.Context(), client.ListOptions{Name: "quitme", State: "all"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	r, _, err := s.c.Wait(t.Context(), list.Items[0].ID, 30*time.Second)
	require.NoError(t, err)
	require.NotNil(t, r, "the command still runs")
	require.Equal(t, "QUIT", r.Signal)

	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "sleep 30"})
	require.NoError(t, err)
	defer s.c.Kill(t.Context(), p.ID, client.KillOptions{Signal: "KILL"})
	wait, _, werr := s.startPiped(t, "wait", p.ID)
	time.Sleep(500 * time.Millisecond) // its request is in the daemon's hands
	require.NoError(t, wait.Process.Signal(syscall.SIGQUIT))
	require.ErrorAs(t, wait.Wait(), &ee)
	require.Equal(t, 128+int(syscall.SIGQUIT), ee.ExitCode(), werr.String())
	got, err := s.c.Get(t.Context(), p.ID)
	require.NoError(t, err)
	require.Equal(t, "running", string(got.State), "wait leaves it running")
}

// conch run "" and conch start "" are usage errors (2), said before the
// daemon is asked: they exited 125 with the daemon's "give cmd or argv".
func TestEmptyCommandIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"run", "start"} {
		cmd := exec.Command("conch", verb, "")
		cmd.Env = append(os.Environ(), client.EnvURL+"=http://127.0.0.1:1", client.EnvToken+"=t")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		var ee *exec.ExitError
		require.ErrorAs(t, cmd.Run(), &ee, verb)
		require.Equal(t, exitUsage, ee.ExitCode(), "%s: %s", verb, stderr.String())
		require.Contains(t, stderr.String(), "the command is empty")
	}
}

// conch ready of a pattern on a process that ended with the head of its
// output dropped says the pattern may have been in it: "ended before it
// was ready" alone read as if the process never wrote it.
func TestReadyAfterADropSaysSo(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	r, _, err := s.c.Run(t.Context(), client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo READY; head -c 300000 /dev/zero"}})
	require.NoError(t, err)
	require.True(t, r.Truncated)
	stderr := readyEndedFirst(t, s, r.ProcessID)
	require.Contains(t, stderr, "dropped by retention or the log budget before it was matched: the pattern may have been there")
}

// readyEndedFirst runs conch ready --pattern READY id, which wants the
// process to end first, and returns what conch said.
func readyEndedFirst(t *testing.T, s *served, id string) string {
	t.Helper()
	cmd := s.command("ready", id, "--pattern", "READY")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Run(), &ee)
	require.Equal(t, exitFailure, ee.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "ended before it was ready")
	return stderr.String()
}

// conch ready of a pattern on a process that ended without printing it,
// under keepLogs none, says no output was dropped: the wait held the log
// from the call on and matched all of it. It said the pattern may have
// been in what retention dropped, for the record of such a process says
// its head was dropped (nothing is kept for later reading).
func TestReadyWithoutADropSaysNone(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	p, err := s.c.Start(t.Context(), client.StartOptions{Argv: []string{"bash", "-c", "sleep 0.5; echo nope"}, KeepLogs: api.KeepNone})
	require.NoError(t, err)
	require.NotContains(t, readyEndedFirst(t, s, p.ID), "dropped", "nothing was dropped before the wait read it")
}

// conch run --plain prints each line rendered once it is complete, as the
// command writes it: it printed nothing until the command ended, and
// conch run --plain yes | head -1 never returned.
func TestRunPlainStreams(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	gate := filepath.Join(t.TempDir(), "gate")
	cmd, out, stderr := s.startPiped(t, "run", "--plain", "--",
		`printf 'x\rfirst\n'; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo second`)
	r := bufio.NewReader(out)
	got := make(chan string, 1)
	go func() {
		line, _ := r.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		require.Equal(t, "first\n", line)
	case <-time.After(time.Minute): // a hang guard: the command waits for the test
		_ = cmd.Process.Kill()
		t.Fatalf("nothing printed while the command ran: %s", stderr)
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, "second\n", string(rest))
	require.NoError(t, cmd.Wait(), stderr.String())
}

// conch run --json that comes back before the command ended prints the
// run route's answer then: the process's fields, the output so far and why
// it came back. It printed the output alone, with an empty reason.
func TestRunJSONCameBack(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	cmd := s.command("run", "--json", "--idle", "300ms", "--", "echo a; exec sleep 30")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	require.Equal(t, 123, ee.ExitCode())
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	defer s.c.Kill(t.Context(), fmt.Sprint(got["id"]), client.KillOptions{Signal: "KILL"})
	require.Equal(t, "running", got["state"], "%s", out)
	require.NotEmpty(t, got["id"])
	require.Equal(t, got["id"], got["processId"])
	require.Equal(t, "a\n", got["output"])
	require.Equal(t, "idle_timeout", got["cameBack"])
	require.NotContains(t, got, "reason")

	// A command quiet from the start: its output is there, empty.
	cmd = s.command("run", "--json", "--idle", "300ms", "--", "exec sleep 30")
	out, _ = cmd.Output()
	got = nil
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	defer s.c.Kill(t.Context(), fmt.Sprint(got["id"]), client.KillOptions{Signal: "KILL"})
	require.Contains(t, got, "output")
	require.Equal(t, "", got["output"])
}

// conch run --output-limit says what it left out where it left it out,
// between the head and the tail, on a line of its own: it said so after
// the tail, the head and tail joined (aaaccc). The command it names prints
// the head's end again, the output being one frame, and it says so.
func TestRunOutputLimitSaysWhere(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	cmd := s.command("run", "--output-limit", "6", "--", "printf aaaabbbbcccc")
	var both strings.Builder
	cmd.Stdout, cmd.Stderr = &both, &both
	require.NoError(t, cmd.Run(), both.String())
	require.Regexp(t, `^aaa\nconch: 6 bytes of output left out here; conch logs --cursor 0 \S+ prints them after the head's last 3 bytes again, then the tail and what came after it\nccc$`, both.String())
}

// conch run --output-limit of an output larger than the daemon keeps says
// that the head was dropped, and how to read what it left out: it once
// printed the kept part as if it were the head, saying nothing.
func TestRunSaysTruncatedHead(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	cmd := s.command("run", "--output-limit", "1000", "--", "seq 1 100000")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	require.NotContains(t, string(out), "\n1\n2\n3\n", "the head is gone")
	require.Contains(t, stderr.String(), "the head of the output was dropped")
	require.Regexp(t, `conch logs --cursor \S+ \S+ prints them`, stderr.String())
}

// conch logs (without -f) of a process that writes on prints what was kept
// when it started and ends: it once printed for as long as the process
// wrote (500 MB of yes in 15 s).
func TestLogsEndsOnBusyProcess(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "yes"})
	require.NoError(t, err)
	defer s.c.Kill(t.Context(), p.ID, client.KillOptions{Signal: "KILL"})
	require.NoError(t, untilOutput(t.Context(), s.c, p.ID))
	cmd := s.command("logs", p.ID)
	n := 0
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	b := make([]byte, 64<<10)
	for {
		k, err := out.Read(b)
		n += k
		if err != nil {
			break
		}
	}
	require.NoError(t, cmd.Wait(), "conch logs ends")
	require.Positive(t, n)
	require.Less(t, n, 64<<20, "what was kept when it started, not all yes writes")
}

// conch logs of a process that writes faster than its retention keeps
// prints what is kept when it reads, a page of it: when retention had
// dropped everything up to the newest frame it saw at its start before it
// read the first page, it printed nothing. A proxy holds its first read of
// the logs until that has happened.
func TestLogsRetentionOvertakes(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "yes"})
	require.NoError(t, err)
	defer s.c.Kill(t.Context(), p.ID, client.KillOptions{Signal: "KILL"})
	stdout, stderr := logsHeld(t, s, p.ID, func() error { return overtaken(t.Context(), s.c, p.ID) })
	require.Contains(t, stdout, "y\n")
	require.Contains(t, stderr, "dropped by retention")
}

// conch logs of a process that keeps no logs says so, not that retention
// dropped its output.
func TestLogsOfKeepNone(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	r, _, err := s.c.Run(t.Context(), client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo gone", KeepLogs: "none"}})
	require.NoError(t, err)
	cmd := s.command("logs", r.ProcessID)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	require.Empty(t, stdout.String())
	require.Contains(t, stderr.String(), "keeps no output for later reading (keepLogs none)")
	require.NotContains(t, stderr.String(), "retention")
}

// conch logs of a process that had written nothing when it started prints
// nothing, though output came before it read the first page: that is
// output after its start, which logs -f follows; only output retention
// dropped is replaced by what is kept then.
func TestLogsOfNothingYet(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "read x; echo late", Stdin: "open"})
	require.NoError(t, err)
	defer s.c.Kill(t.Context(), p.ID, client.KillOptions{Signal: "KILL"})
	stdout, stderr := logsHeld(t, s, p.ID, func() error {
		// The process answers only now, after logs read its state.
		if err := s.c.WriteStdin(t.Context(), p.ID, []byte("go\n"), false); err != nil {
			return err
		}
		return untilOutput(t.Context(), s.c, p.ID)
	})
	require.Empty(t, stdout)
	require.Empty(t, stderr)
}

// logsHeld runs conch logs of process id through a proxy to s that runs
// hold before it passes on the first read of the logs, and returns what it
// printed.
func logsHeld(t *testing.T, s *served, id string, hold func() error) (stdout, stderr string) {
	t.Helper()
	target, err := url.Parse(s.url)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var held atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/logs") && !held.Swap(true) {
			if err := hold(); err != nil {
				t.Errorf("hold the first read of the logs: %v", err) // not FailNow: another goroutine
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	cmd := exec.Command("conch", "logs", id)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+front.URL, client.EnvToken+"="+s.token)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	require.NoError(t, cmd.Run(), "conch logs ends")
	require.True(t, held.Load(), "conch logs read no logs")
	return out.String(), errs.String()
}

// untilOutput returns once process id has written something, or after a
// minute with an error.
func untilOutput(ctx context.Context, c *client.Client, id string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		q, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		if q.LastCursor != "" {
			return nil
		}
	}
	return errors.New("no output within a minute")
}

// overtaken returns once the oldest frame kept of process id is newer than
// the newest one was when it was called, or after a minute with an error.
func overtaken(ctx context.Context, c *client.Client, id string) error {
	q, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	last := cursorOf(q.LastCursor)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		page, err := c.Logs(ctx, id, client.LogsOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(page.Items) > 0 && cursorOf(page.Items[0].Cursor) > last {
			return nil
		}
	}
	return errors.New("retention did not drop the frames kept within a minute")
}

// conch run whose daemon does not answer the start leaves on Ctrl-C once
// signalPassWait has passed, saying that the command may have started: it
// once ignored every signal until the start was answered, which a wedged
// daemon never does.
func TestRunStartNotAnswered(t *testing.T) {
	t.Parallel()
	require.Contains(t, interruptWedged(t, false), "the command may have started")
}

// conch run whose daemon is killed while the command runs says that the
// daemon was killed, and the command with it: it said only "read stream:
// unexpected EOF", then that the command might still run.
func TestRunDaemonGone(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	cmd, _, stderr := s.runUntilLine(t, "started\n", "run", "--", "echo started; sleep 30")
	s.kill(t)
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitOwn, ee.ExitCode())
	require.Regexp(t, `the daemon stopped, or was killed, before (\S+) ended, and (\S+) ended with it`, stderr.String())
	require.NotContains(t, stderr.String(), "may still run")
}

// conch run --json (in a session too) and conch run --keep-logs none pass
// Ctrl-C to the command, as conch run does, and exit as it then does: they
// wait through the run route, whose answer names the process only at its
// end, and once exited 130 with the command left running. One program
// runs from the moment the file says it started: in a session, Ctrl-C
// landing just as `touch` exited by itself would be dropped by bash, as at
// a terminal, and `sleep 30` would run to its end.
func TestRunRouteInterrupt(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
	require.NoError(t, err)
	for i, args := range [][]string{
		{"--json"},
		{"--keep-logs", "none"},
		{"--session", sess.ID, "--json"},
		{"--session", sess.ID, "--keep-logs", "none"},
	} {
		name := "routeint" + strconv.Itoa(i)
		started := filepath.Join(t.TempDir(), "started")
		cmd := exec.Command("conch", append(append([]string{"run", "--name", name}, args...),
			"--", "sh -c 'touch "+started+" && exec sleep 30'")...)
		cmd.Env = append(os.Environ(), client.EnvURL+"="+s.url, client.EnvToken+"="+s.token)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(started); err == nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "%v: the command did not start", args)
		}
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
		err := cmd.Wait()
		guard.Stop()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v", args)
		require.Equal(t, exitInterrupted, ee.ExitCode(), "%v: %s", args, stderr.String())

		list, err := s.c.List(t.Context(), client.ListOptions{Name: name, State: "all"})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		r, _, err := s.c.Wait(t.Context(), list.Items[0].ID, 30*time.Second)
		require.NoError(t, err)
		require.NotNil(t, r, "%v: the command still runs", args)
		require.Equal(t, "INT", r.Signal, "%v: %+v", args, r)
	}
}

// The client commands whose request the daemon answers at once (ps, kill,
// start, logs) give up on a daemon that does not answer (stopped by
// SIGSTOP, or stuck) after answerWait (kill: and its escalation's 10 s;
// session new: and a session's 30 s to start), saying so, and exit 125:
// they once waited for good.
func TestQuickRequestsBounded(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // no answer
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer fake.Close()
	defer close(hang)
	cmds := [][]string{{"ps"}, {"kill", "someid"}, {"start", "true"}, {"logs", "someid"}, {"session", "ls"}, {"session", "new"}}
	errs := make(chan error, len(cmds))
	for _, args := range cmds {
		go func() {
			cmd := exec.Command("conch", args...)
			cmd.Env = append(os.Environ(), client.EnvURL+"="+fake.URL, client.EnvToken+"=t")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				errs <- err
				return
			}
			guard := time.AfterFunc(answerWait+time.Minute, func() { _ = cmd.Process.Kill() })
			err := cmd.Wait()
			guard.Stop()
			var ee *exec.ExitError
			switch {
			case !errors.As(err, &ee) || ee.ExitCode() != exitOwn:
				errs <- fmt.Errorf("%v: %v, stderr %q", args, err, stderr.String())
			case !strings.Contains(stderr.String(), "did not answer within"):
				errs <- fmt.Errorf("%v: stderr %q", args, stderr.String())
			default:
				errs <- nil
			}
		}()
	}
	for range cmds {
		require.NoError(t, <-errs)
	}
}

// conch run, in every mode, and conch interact give up on a daemon that
// does not answer (stopped by SIGSTOP, or stuck), saying so, and exit 125,
// as conch start does: its start after answerWait, and a request that
// waits on the daemon's side (an interact, the run route, a wait) after
// what it asked to wait and answerWait, or, however long it may wait, once
// the daemon has not answered /healthz within answerWait. They once waited
// for good, --timeout 3s too.
func TestRunAndInteractBounded(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	wait := func(r *http.Request) {
		select { // no answer
		case <-r.Context().Done():
		case <-hang:
		}
	}
	// stopped does not answer at all; started takes the start of a
	// command, then answers nothing more.
	stopped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wait(r) }))
	defer stopped.Close()
	started := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && (r.URL.Path == "/v1/processes" || r.URL.Path == "/v1/sessions/s/commands") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"p","kind":"exec","state":"running"}`)
			return
		}
		wait(r)
	}))
	defer started.Close()
	defer close(hang) // before the servers close, which waits for their handlers
	cases := []struct {
		url  string
		args []string
	}{
		{stopped.URL, []string{"run", "echo x"}},
		{stopped.URL, []string{"run", "--session", "s", "echo x"}},
		{stopped.URL, []string{"run", "--idle", "1s", "echo x"}},
		{stopped.URL, []string{"run", "--json", "echo x"}},
		{stopped.URL, []string{"interact", "p", "--input", "hi", "--idle", "1s"}},
		{started.URL, []string{"run", "--timeout", "3s", "echo x"}},
		{started.URL, []string{"run", "--idle", "1s", "echo x"}},
		{started.URL, []string{"run", "--session", "s", "--idle", "1s", "echo x"}},
		{started.URL, []string{"run", "--output-limit", "10", "echo x"}},
		{started.URL, []string{"run", "-i", "--output-limit", "10", "echo x"}},
		{started.URL, []string{"run", "--json", "echo x"}},
		{started.URL, []string{"run", "--json", "--timeout", "3s", "echo x"}},
		{started.URL, []string{"run", "--keep-logs", "none", "--idle", "1s", "echo x"}},
		{started.URL, []string{"run", "--session", "s", "--json", "echo x"}},
		{started.URL, []string{"interact", "p", "--timeout", "2s"}},
	}
	errs := make(chan error, len(cases))
	for _, tc := range cases {
		go func() {
			cmd := exec.Command("conch", tc.args...)
			cmd.Env = append(os.Environ(), client.EnvURL+"="+tc.url, client.EnvToken+"=t")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				errs <- err
				return
			}
			guard := time.AfterFunc(answerWait+probeEvery+time.Minute, func() { _ = cmd.Process.Kill() })
			err := cmd.Wait()
			guard.Stop()
			var ee *exec.ExitError
			switch {
			case !errors.As(err, &ee) || ee.ExitCode() != exitOwn:
				errs <- fmt.Errorf("%v: %v, stderr %q", tc.args, err, stderr.String())
			case !strings.Contains(stderr.String(), "did not answer within"):
				errs <- fmt.Errorf("%v: stderr %q", tc.args, stderr.String())
			default:
				errs <- nil
			}
		}()
	}
	for range cases {
		require.NoError(t, <-errs)
	}
}

// conch kill of a session whose shell outlives the signal waits for the
// daemon's answer, which comes once the session has ended, escalate-after
// later: past answerWait, it once gave up saying that the daemon did not
// answer and might be stuck.
func TestKillWaitsOutSessionEscalation(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
	require.NoError(t, err)
	_, _, err = s.c.RunCommand(t.Context(), sess.ID, client.CommandRunOptions{CommandOptions: client.CommandOptions{Cmd: "trap '' TERM"}})
	require.NoError(t, err)
	after := answerWait + 2*time.Second
	ctx, cancel := context.WithTimeout(t.Context(), answerWait+2*time.Minute) // hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, "conch", "kill", "--escalate-after", after.String(), sess.ID)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+s.url, client.EnvToken+"="+s.token)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	p, err := s.c.Get(t.Context(), sess.ID)
	require.NoError(t, err)
	require.Equal(t, "terminal", string(p.State), "%+v", p)
}

// conch run of a process that writes far faster than its retention keeps
// says the gaps its reader met in about a line a second, the first as the
// stream says it: it wrote a line for each gap, hundreds a second.
func TestRunSaysGapsInFewLines(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "64K")
	cmd := s.command("run", "--", "head -c 100000000 /dev/zero")
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	began := time.Now()
	require.NoError(t, cmd.Run())
	took := time.Since(began)
	said := stderr.String()
	require.Contains(t, said, "dropped by retention", "no gap: the test tested nothing")
	lines := strings.Count(said, "\n")
	require.LessOrEqual(t, lines, 2+int(took/time.Second), "%d lines in %v: %.600s", lines, took, said)
}

// A wait whose daemon is killed under it says the daemon closed the
// connection before it answered: it printed Go's own `Get "URL": EOF`.
func TestWaitDaemonGoneSaysSo(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "sleep 60"})
	require.NoError(t, err)
	cmd := s.command("wait", p.ID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(500 * time.Millisecond) // its request is in the daemon's hands
	s.kill(t)
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee)
	require.Equal(t, 125, ee.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "closed the connection before it answered", stderr.String())
}

// TestLogsFollowDaemonGoneSaysSo kills the daemon under conch logs -f: it
// exits 125 saying that the daemon was killed and the process with it. It
// said only "read stream: unexpected EOF", then that the process may still
// run.
func TestLogsFollowDaemonGoneSaysSo(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "echo started; sleep 60"})
	require.NoError(t, err)
	cmd, _, stderr := s.runUntilLine(t, "started\n", "logs", "-f", p.ID)
	s.kill(t)
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee)
	require.Equal(t, exitOwn, ee.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "the daemon stopped, or was killed, before "+p.ID+" ended, and "+p.ID+" ended with it")
	require.NotContains(t, stderr.String(), "may still run")
}

// findRun finds the process of a run with a long argv, of which the
// record keeps the head only: it found nothing, and conch run --json's
// Ctrl-C did not reach the command.
func TestFindRunOfALongArgv(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	for _, n := range []int{10, 3000} {
		argv := []string{"sh", "-c", "sleep 30", "_"}
		for i := range n {
			argv = append(argv, fmt.Sprintf("%030d", i))
		}
		asked := time.Now()
		p, err := s.c.Start(t.Context(), client.StartOptions{Argv: argv})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.c.Kill(context.Background(), p.ID, client.KillOptions{Signal: "KILL"}) })
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		f := addStartFlags(fs)
		require.NoError(t, fs.Parse(nil))
		found, err := f.findRun(t.Context(), s.c, client.StartOptions{Argv: argv}, client.CommandOptions{}, asked)
		require.NoError(t, err)
		require.Equal(t, p.ID, found, "an argv of %d elements", len(argv))
	}
}

// conch run that comes back says what the command is doing on a line of
// its own: still queued behind another command of its session, or still
// running; a blank line goes first only after output that left a line
// open (a prompt), not after a whole line.
func TestRunCameBackSays(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	sess, err := s.c.CreateSession(t.Context(), client.SessionOptions{})
	require.NoError(t, err)
	defer s.c.Kill(context.WithoutCancel(t.Context()), sess.ID, client.KillOptions{Signal: "KILL"})
	cameBack := func(args ...string) string {
		t.Helper()
		cmd := s.command(args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		_, err := cmd.Output()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, stderr.String())
		require.Equal(t, exitRunning, ee.ExitCode(), stderr.String())
		return stderr.String()
	}
	msg := cameBack("run", "--session", sess.ID, "--timeout", "300ms", "--", "echo line; sleep 30")
	require.True(t, strings.HasPrefix(msg, "conch: "), "no blank line after a whole line: %q", msg)
	require.Contains(t, msg, "is still running")
	msg = cameBack("run", "--session", sess.ID, "--timeout", "300ms", "--", "true")
	require.Contains(t, msg, "is still queued", "behind the sleep")
	msg = cameBack("run", "--timeout", "300ms", "--", "printf 'name? '; exec sleep 30")
	require.True(t, strings.HasPrefix(msg, "\nconch: "), "after a prompt, a line of its own: %q", msg)
	// Ended now: a daemon stopped with it running drains for longer than
	// the test waits, and is killed, its instance directory left behind.
	id := strings.Fields(strings.TrimPrefix(msg, "\nconch: "))[0]
	require.NoError(t, s.c.Kill(t.Context(), id, client.KillOptions{Signal: "KILL"}))
}

// conch logs --plain and conch interact --plain from a cursor inside an
// escape sequence render what comes after it as the whole output renders
// there: they showed the sequence's rest (1mRED) as text.
func TestPlainFromACursorInsideAnEscape(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	gate := filepath.Join(t.TempDir(), "gate")
	p, err := s.c.Start(t.Context(), client.StartOptions{
		Cmd: `printf 'x\033[3'; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '1mRED\033[0m\n'`})
	require.NoError(t, err)
	require.NoError(t, untilOutput(t.Context(), s.c, p.ID))
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	w, _, err := s.c.Wait(t.Context(), p.ID, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, w)
	page, err := s.c.Logs(t.Context(), p.ID, client.LogsOptions{})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "a frame for each write")
	from := page.Items[0].Cursor
	for _, args := range [][]string{
		{"logs", "--plain", "--cursor", from, p.ID},
		{"interact", "--plain", "--cursor", from, p.ID},
	} {
		cmd := s.command(args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%v: %s", args, stderr.String())
		require.Equal(t, "RED\n", string(out), "%v", args)
	}
}

// conch logs and conch ps end with an error, exit 125, when the daemon's
// pages do not move on (a page names as next a cursor asked for already):
// logs once printed the same page for ever, and ps listed it until its
// 30 s ran out, saying that the daemon did not answer.
func TestPagingThatDoesNotMoveOn(t *testing.T) {
	t.Parallel()
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/processes/p":
			io.WriteString(w, `{"id":"p","kind":"exec","state":"running","lastCursor":"9"}`)
		case "/v1/processes/p/logs":
			io.WriteString(w, `{"items":[{"cursor":"1","channel":"stdout","data":"x\n"}],"next":"1"}`)
		case "/v1/processes":
			io.WriteString(w, `{"items":[{"id":"p","kind":"exec","state":"running"}],"next":"1"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()
	for _, args := range [][]string{{"logs", "p"}, {"logs", "--cursor", "1", "p"}, {"ps"}} {
		require.Contains(t, failsOwn(t, fake.URL, args...), "do not move on", args)
	}
}

// failsOwn runs conch with args against the daemon at url, within
// answerWait and a minute (a hang guard), and returns its stderr once it
// exited 125, the error of its own, what the tests here expect of a
// daemon whose pages do not move on.
func failsOwn(t *testing.T, url string, args ...string) string {
	t.Helper()
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+url, client.EnvToken+"=t")
	var stderr strings.Builder
	var out countingWriter
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Start())
	guard := time.AfterFunc(answerWait+time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%v: stderr %q, %d bytes out", args, stderr.String(), out.n.Load())
	require.Equal(t, exitOwn, ee.ExitCode(), "%v: stderr %q", args, stderr.String())
	return stderr.String()
}

// conch logs ends with an error, exit 125, when the daemon's pages name a
// new next each time but their frames do not move on (the same cursor
// again, or one that is no number): it once printed them for ever.
func TestLogsPagesOfNewCursors(t *testing.T) {
	t.Parallel()
	for _, cursor := range []string{"1", "c"} {
		var n atomic.Int64
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/processes/p":
				io.WriteString(w, `{"id":"p","kind":"exec","state":"running","lastCursor":"9"}`)
			case "/v1/processes/p/logs":
				next := "n" + strconv.FormatInt(n.Add(1), 10)
				io.WriteString(w, `{"items":[{"cursor":"`+cursor+`","channel":"stdout","data":"x\n"}],"next":"`+next+`"}`)
			default:
				http.NotFound(w, r)
			}
		}))
		stderr := failsOwn(t, fake.URL, "logs", "p")
		fake.Close()
		require.Contains(t, stderr, "do not move on", cursor)
	}
}

// conch ps ends with an error, exit 125, at once when the daemon's pages
// name a new next each time but hold no record, or the same record again:
// it once listed them until its 30 s ran out, its memory growing.
func TestPsPagesOfNewCursors(t *testing.T) {
	t.Parallel()
	for _, items := range []string{``, `{"id":"p","kind":"exec","state":"running"}`} {
		var n atomic.Int64
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"items":[`+items+`],"next":"n`+strconv.FormatInt(n.Add(1), 10)+`"}`)
		}))
		stderr := failsOwn(t, fake.URL, "ps")
		fake.Close()
		require.Contains(t, stderr, "not the daemon's answer", items)
		require.LessOrEqual(t, n.Load(), int64(2), "items %q: pages asked", items)
	}
}

// countingWriter counts the bytes written to it, and keeps none.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// conch logs of a process whose output the log budget dropped says the
// budget may have dropped it, as its stream does: it said retention alone.
func TestLogsDroppedByTheBudgetSaysSo(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "1M", "--log-budget", "1M")
	first, _, err := s.c.Run(t.Context(), client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo first; head -c 600000 /dev/zero"}})
	require.NoError(t, err)
	require.False(t, first.Truncated, "retention kept it")
	_, _, err = s.c.Run(t.Context(), client.RunOptions{StartOptions: client.StartOptions{Cmd: "head -c 900000 /dev/zero"}})
	require.NoError(t, err)
	got, err := s.c.Get(t.Context(), first.ProcessID)
	require.NoError(t, err)
	require.True(t, got.TruncatedHead, "the budget dropped the log of the process that ended first")
	cmd := s.command("logs", first.ProcessID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	require.Contains(t, stderr.String(), "dropped by retention or the log budget")
}
