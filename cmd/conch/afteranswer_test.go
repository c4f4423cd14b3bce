package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
)

// testAnswerWait is the bound the conch of these tests gives a request the
// daemon answers at once ($CONCH_ANSWER_WAIT), rather than 30 s.
const testAnswerWait = 2 * time.Second

// stallingProxy forwards requests to the daemon of s, but holds those that
// stall picks unanswered, as a daemon stopped by SIGSTOP would, until their
// client gives up or the test ends. It returns its URL.
func stallingProxy(t *testing.T, s *served, stall func(*http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(s.url)
	require.NoError(t, err)
	tr := &http.Transport{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1 // streams as they come
	hang := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall(r) {
			select {
			case <-r.Context().Done():
			case <-hang:
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(hang) // before the close, which waits for the handlers
		proxy.CloseClientConnections()
		proxy.Close()
		tr.CloseIdleConnections()
	})
	return proxy.URL
}

// runStalled runs conch with args and stdin against the daemon at u (of
// s's token), its quick requests bounded by testAnswerWait, and returns its
// exit status and stderr. A minute bounds it (a hang guard): it is killed
// then, and the test fails.
func runStalled(t *testing.T, s *served, u, stdin string, args ...string) (int, string) {
	t.Helper()
	code, stderr, _ := runStalledOut(t, s, u, stdin, args...)
	return code, stderr
}

// runStalledOut is runStalled that also returns how many bytes conch wrote
// to its stdout.
func runStalledOut(t *testing.T, s *served, u, stdin string, args ...string) (int, string, int64) {
	t.Helper()
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+u, client.EnvToken+"="+s.token,
		envAnswerWait+"="+testAnswerWait.String())
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	stdout := new(countingWriter)
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	require.NoError(t, cmd.Start())
	var hung atomic.Bool
	guard := time.AfterFunc(time.Minute, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	err := cmd.Wait()
	guard.Stop()
	require.False(t, hung.Load(), "%v: still waiting a minute later; stderr %q", args, stderr.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String(), stdout.n.Load()
	}
	require.NoError(t, err)
	return 0, stderr.String(), stdout.n.Load()
}

// conch run, once the answer has come, pages the logs for what the answer
// left out: a daemon that stops answering then ends it, saying so, exit
// 125, as a request it answers at once does. It once waited for good.
func TestOutputPagesBounded(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	u := stallingProxy(t, s, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/logs")
	})
	// More output than an answer holds: the rest is paged after it. What
	// the answer held is printed all the same, with --plain too, whose
	// unfinished line was held back and lost (one line of 2,000,000
	// bytes: nothing printed).
	for _, args := range [][]string{
		{"run", "--timeout", "1m", "seq 1 1000000"},
		{"run", "--plain", "--timeout", "1m", "seq 1 1000000"},
		{"run", "--plain", "--timeout", "1m", `head -c 2000000 /dev/zero | tr '\0' a`},
	} {
		code, stderr, printed := runStalledOut(t, s, u, "", args...)
		require.Equal(t, exitOwn, code, "%v: stderr %q", args, stderr)
		require.Contains(t, stderr, "did not answer within "+testAnswerWait.String(), "%v", args)
		require.Positive(t, printed, "%v: what the answer held is printed", args)
	}
}

// conch start -i sends its stdin to the command after it printed its id,
// conch run -i while it waits for the command: a daemon that stops
// answering then ends it, saying so, exit 125. start -i once waited for
// good; so did run -i, for a command that waits for the rest of its stdin
// (cat), after it said that the rest was not sent; now it says too that
// the command may still run.
func TestStdinWritesBounded(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	u := stallingProxy(t, s, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/stdin")
	})
	code, stderr := runStalled(t, s, u, "data\n", "start", "-i", "cat")
	require.Equal(t, exitOwn, code, "stderr %q", stderr)
	require.Contains(t, stderr, "did not answer within "+testAnswerWait.String())
	for _, args := range [][]string{
		{"run", "-i", "cat"},
		{"run", "-i", "--output-limit", "100", "cat"},
	} {
		code, stderr := runStalled(t, s, u, "data\n", args...)
		require.Equal(t, exitOwn, code, "%v: stderr %q", args, stderr)
		require.Contains(t, stderr, "did not answer within "+testAnswerWait.String(), "%v", args)
		require.Contains(t, stderr, "the rest of it was not sent", "%v", args)
		require.Contains(t, stderr, "may still run", "%v", args)
	}
}

// conch interact of a process that has ended asks, once its input is
// refused, whether the process has ended, to say so: a daemon that stops
// answering then ends it, saying so, exit 125. It once waited for good.
func TestEndedAskBounded(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "true"})
	require.NoError(t, err)
	_, _, err = s.c.Wait(t.Context(), p.ID, 30*time.Second)
	require.NoError(t, err)
	u := stallingProxy(t, s, func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Path == "/v1/processes/"+p.ID
	})
	code, stderr := runStalled(t, s, u, "", "interact", p.ID, "--input", "x")
	require.Equal(t, exitOwn, code, "stderr %q", stderr)
	require.Contains(t, stderr, "did not answer within "+testAnswerWait.String())
	require.Contains(t, stderr, "asked then whether "+p.ID+" has ended")
}

// While conch run --json waits, it asks the daemon for /healthz; a daemon
// at its --max-connections answers that 429 at once: alive and busy, which
// does not end the wait as one that does not answer would.
func TestProbeAtConnectionBound(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--max-connections", "2")
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: "sleep 30"})
	require.NoError(t, err)
	s.c.CloseIdleConnections()
	wait := s.command("wait", p.ID) // holds one connection
	require.NoError(t, wait.Start())
	defer func() {
		_ = wait.Process.Kill()
		_ = wait.Wait()
	}()
	run := s.command("run", "--json", "sleep 4; echo done")
	run.Env = append(run.Env, envAnswerWait+"="+testAnswerWait.String()) // a probe a second
	var stdout, stderr strings.Builder
	run.Stdout, run.Stderr = &stdout, &stderr
	require.NoError(t, run.Start())
	guard := time.AfterFunc(time.Minute, func() { _ = run.Process.Kill() }) // a hang guard
	defer guard.Stop()
	// The bound is reached while the run waits: a request past it is refused.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	refused := false
	for deadline := time.Now().Add(3 * time.Second); !refused && time.Now().Before(deadline); {
		resp, err := hc.Get(s.url + "/healthz")
		if err == nil {
			refused = resp.StatusCode == http.StatusTooManyRequests
			resp.Body.Close()
		}
		if !refused {
			time.Sleep(50 * time.Millisecond)
		}
	}
	require.True(t, refused, "the daemon never reached its --max-connections: the test tested nothing")
	require.NoError(t, run.Wait(), "stderr %q", stderr.String())
	require.Contains(t, stdout.String(), "done")
}

// conch run whose paging of what the answer left out fails part way (the
// daemon stops answering after the first page) prints what it read, says
// on stderr how many bytes are missing there and which command reads them,
// then prints the tail the answer held, and exits 125. It once printed
// the pages read alone: the tail was lost, and the cursor was not said.
func TestOutputPageLostTailPrinted(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	var whole strings.Builder
	for i := 1; i <= 1000000; i++ {
		fmt.Fprintln(&whole, i)
	}
	full := whole.String()
	for _, plain := range []bool{false, true} {
		outputPageLost(t, s, full, plain)
	}
}

// outputPageLost runs seq 1 1000000 (whose output is full) as
// TestOutputPageLostTailPrinted says, with --plain or without.
func outputPageLost(t *testing.T, s *served, full string, plain bool) {
	t.Helper()
	var pages atomic.Int32
	u := stallingProxy(t, s, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/logs") && pages.Add(1) > 1
	})
	args := []string{"run", "--timeout", "1m", "seq 1 1000000"}
	if plain {
		args = []string{"run", "--plain", "--timeout", "1m", "seq 1 1000000"}
	}
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+u, client.EnvToken+"="+s.token,
		envAnswerWait+"="+testAnswerWait.String())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() }) // a hang guard
	err := cmd.Wait()
	guard.Stop()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr %q", stderr.String())
	require.Equal(t, exitOwn, ee.ExitCode(), "stderr %q", stderr.String())
	require.GreaterOrEqual(t, pages.Load(), int32(2), "no page was refused: the test tested nothing")

	m := regexp.MustCompile(`conch: (\d+) bytes of output could not be read here; conch logs --cursor (\d+) (\S+) prints them`).
		FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "no gap said: stderr %q", stderr.String())
	missing, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Positive(t, missing)
	got := stdout.String()
	require.Equal(t, len(full), len(got)+missing, "printed and missing make the output")
	require.True(t, strings.HasSuffix(got, "\n1000000\n"), "the tail the answer held is printed")
	require.Contains(t, stderr.String(), strconv.Itoa(missing)+" bytes of the output of "+m[3]+" were not printed")

	// The command said prints the missing bytes, then the tail.
	out, err := s.command("logs", "--cursor", m[2], m[3]).Output()
	require.NoError(t, err)
	at := len(full) - len(out)
	require.Equal(t, full[at:], string(out))
	require.Equal(t, full[:at], got[:at], "printed up to the gap")
	require.Equal(t, full[at+missing:], got[at:], "the tail after the gap")
}

// conch run --json waits on the run route, which names the command only at
// its end: a daemon that stops answering while it waits ends it, exit 125,
// saying that the command may still run, as conch run --idle says it. It
// once said only that the daemon did not answer.
func TestRunRouteNotAnsweredMayStillRun(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	u := stallingProxy(t, s, func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	for _, args := range [][]string{
		{"run", "--json", "sleep 30"},
		{"run", "--keep-logs", "none", "sleep 30"},
		{"run", "--idle", "20s", "sleep 30"},
	} {
		code, stderr := runStalled(t, s, u, "", args...)
		require.Equal(t, exitOwn, code, "%v: stderr %q", args, stderr)
		require.Contains(t, stderr, "did not answer within "+testAnswerWait.String(), "%v", args)
		require.Contains(t, stderr, "may still run", "%v", args)
	}
}

// conch interact --cursor N --plain reads the output before the cursor to
// render from it what that output left open; a daemon that does not answer
// that read ends it, once it printed what it has, exit 125, saying that
// the text was rendered without it. It once printed as if nothing was
// missing, and exited as the command did.
func TestCarriedBeforeNotAnswered(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	// More output after the cursor than an answer holds: the rest is
	// paged, its frames rendered as they come; --output-limit 100 cuts it.
	p, cursor := endedWithFirstCursor(t, s, `printf 'abc'; sleep 0.2; printf '\rX\n'; seq 1 300000`)
	// The read of the frames before the cursor is the one that asks for
	// a bounded page.
	u := stallingProxy(t, s, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/logs") && r.URL.Query().Get("limit") != ""
	})
	for _, args := range [][]string{
		{"interact", p.ID, "--cursor", cursor, "--plain", "--output-limit", "100"},
		{"interact", p.ID, "--cursor", cursor, "--plain"},
	} {
		code, stderr, printed := runStalledOut(t, s, u, "", args...)
		require.Equal(t, exitOwn, code, "%v: stderr %q", args, stderr)
		require.Contains(t, stderr, "before cursor "+cursor+" could not be read", "%v", args)
		require.Contains(t, stderr, "did not answer within "+testAnswerWait.String(), "%v", args)
		require.Contains(t, stderr, p.ID+" has ended (exited 0)", "%v", args)
		require.Positive(t, printed, "%v: what the answer held is printed", args)
	}
}

// conch start -i whose write of stdin the daemon refuses (the command's
// stdin was closed meanwhile) says so, and exits 125: input the user gave
// was not sent. It once exited 0 with a warning. A command that ended before
// it took all of its stdin stopped reading, as a reader of a pipe may: that
// is said, with how it ended, and the status is 0; it was once said not at
// all.
func TestStartStdinRefused(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	for _, tc := range []struct {
		cmd    string
		before func(id string)
		says   func(id string) string
		status int
	}{
		{"sleep 30", func(id string) {
			require.NoError(t, s.c.WriteStdin(t.Context(), id, nil, true))
		}, func(string) string { return "the rest of it was not sent, and its stdin is closed" }, exitOwn},
		{"true", func(id string) {
			_, _, err := s.c.Wait(t.Context(), id, 30*time.Second)
			require.NoError(t, err)
		}, func(id string) string { return id + " ended (exited 0) before it took all of its stdin" }, 0},
	} {
		cmd := s.command("start", "-i", tc.cmd)
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() }) // a hang guard
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		id := strings.TrimSpace(line)
		tc.before(id)
		_, err = in.Write([]byte("hi\n"))
		require.NoError(t, err)
		require.NoError(t, in.Close())
		err = cmd.Wait()
		guard.Stop()
		_ = s.c.Kill(t.Context(), id, client.KillOptions{Signal: "KILL"})
		status := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			status = ee.ExitCode()
		} else {
			require.NoError(t, err, "%s: stderr %q", tc.cmd, stderr.String())
		}
		require.Equal(t, tc.status, status, "%s: stderr %q", tc.cmd, stderr.String())
		require.Contains(t, stderr.String(), tc.says(id), tc.cmd)
	}
}

// conch run whose paging of what the answer left out meets output that
// the daemon's log retention dropped before it was read (the command wrote
// on meanwhile) prints what it read, says on stderr how many bytes are
// missing there and that retention dropped them, then prints the tail the
// answer held, and exits as it would have: the dropped bytes are nowhere to
// read again, as output dropped while conch run follows is not. It once
// warned, and printed nothing after the gap: the tail was lost.
func TestOutputPageDroppedTailPrinted(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-retention", "2M") // an answer holds 1 MiB
	for _, plain := range []bool{false, true} {
		dir := t.TempDir()
		wrote, more := dir+"/wrote", dir+"/more"
		// 1,500,005 bytes, then, once the first page is asked for, 4 MB
		// more, which drops all of them.
		cmd := fmt.Sprintf(`head -c 1500000 /dev/zero | tr '\0' a; printf '\nEND\n'; while [ ! -e %s ]; do sleep 0.05; done; head -c 4000000 /dev/zero | tr '\0' b; touch %s; sleep 30`,
			more, wrote)
		var pages atomic.Int32
		u := stallingProxy(t, s, func(r *http.Request) bool {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/logs") || pages.Add(1) > 1 {
				return false
			}
			if err := os.WriteFile(more, nil, 0o600); err != nil {
				return false
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if _, err := os.Stat(wrote); err == nil {
					break
				}
			}
			return false
		})
		args := []string{"run", "--name", "dropped", "--timeout", "2s", cmd}
		if plain {
			args = []string{"run", "--name", "dropped", "--plain", "--timeout", "2s", cmd}
		}
		c := exec.Command("conch", args...)
		c.Env = append(os.Environ(), client.EnvURL+"="+u, client.EnvToken+"="+s.token,
			envAnswerWait+"="+testAnswerWait.String())
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		require.NoError(t, c.Start())
		guard := time.AfterFunc(time.Minute, func() { _ = c.Process.Kill() }) // a hang guard
		err := c.Wait()
		guard.Stop()
		for p, err := range s.c.Processes(t.Context(), client.ListOptions{Name: "dropped", State: "running"}) {
			require.NoError(t, err)
			_ = s.c.Kill(t.Context(), p.ID, client.KillOptions{Signal: "KILL"})
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stderr %q", stderr.String())
		require.Equal(t, exitRunning, ee.ExitCode(), "plain %v: stderr %q", plain, stderr.String())
		_, err = os.Stat(wrote)
		require.NoError(t, err, "the first page was never asked for: the test tested nothing; stderr %q", stderr.String())

		m := regexp.MustCompile(`conch: (\d+) bytes of output are missing here: the daemon's log retention dropped output here before it was read\n`).
			FindStringSubmatch(stderr.String())
		require.NotNil(t, m, "plain %v: no gap said: stderr %q", plain, stderr.String())
		missing, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		require.Positive(t, missing)
		got := stdout.String()
		require.Equal(t, 1500005, len(got)+missing, "plain %v: printed and missing make the output", plain)
		require.True(t, strings.HasSuffix(got, "a\nEND\n"), "plain %v: the tail the answer held is printed", plain)
		require.NotContains(t, stderr.String(), "conch logs --cursor", "plain %v: nothing to read again", plain)
	}
}

// conch logs --plain --cursor N reads the output before the cursor to
// render from it what that output left open, as conch interact does; a
// daemon that does not answer that read ends it, once it printed what it
// has, exit 125, saying that the text was rendered without it. It once
// printed as if nothing was missing, and exited 0.
func TestLogsCarriedBeforeNotAnswered(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	p, cursor := endedWithFirstCursor(t, s, `printf 'abc'; sleep 0.2; printf '\rX\n'; seq 1 3000`)
	// The read of the frames before the cursor is the one that asks for
	// a page of at most plaintext.CarriedFrames frames; the print's own
	// pages ask for 1000.
	u := stallingProxy(t, s, func(r *http.Request) bool {
		limit := r.URL.Query().Get("limit")
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/logs") && limit != "" && limit != "1000"
	})
	for _, args := range [][]string{
		{"logs", "--plain", "--cursor", cursor, p.ID},
		{"logs", "-f", "--plain", "--cursor", cursor, p.ID},
	} {
		code, stderr, printed := runStalledOut(t, s, u, "", args...)
		require.Equal(t, exitOwn, code, "%v: stderr %q", args, stderr)
		require.Contains(t, stderr, "before cursor "+cursor+" could not be read", "%v", args)
		require.Contains(t, stderr, "did not answer within "+testAnswerWait.String(), "%v", args)
		require.Positive(t, printed, "%v: what was read is printed", args)
	}
	// A process that is not there is said as that alone.
	code, stderr := runStalled(t, s, u, "", "logs", "--plain", "--cursor", cursor, "nosuchprocess")
	require.Equal(t, exitOwn, code, "stderr %q", stderr)
	require.NotContains(t, stderr, "rendered without it")
}

// conch run -i whose write of stdin the daemon refuses while the command
// runs on (its stdin was closed meanwhile, as conch interact --eof closes
// it) says on stderr that the rest was not sent, and exits as the command
// does: its status is the command's, as conch run's always is, where conch
// start -i, which has no command's status to give, exits 125.
func TestRunStdinRefused(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	dir := t.TempDir()
	said := dir + "/said"
	cmd := s.command("run", "-i", "--name", "stdin-refused",
		fmt.Sprintf(`cat; while [ ! -e %s ]; do sleep 0.05; done; echo on; exit 3`, said))
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	guard := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() }) // a hang guard
	defer guard.Stop()
	// The command, once it runs, has its stdin closed elsewhere.
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == "" && time.Now().Before(deadline); {
		for p, err := range s.c.Processes(t.Context(), client.ListOptions{Name: "stdin-refused"}) {
			require.NoError(t, err)
			id = p.ID
		}
		if id == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	require.NotEmpty(t, id, "conch run -i never started its command")
	require.NoError(t, s.c.WriteStdin(t.Context(), id, nil, true))
	// Then conch's stdin comes: the write of it is refused, which is
	// said; the command goes on once it is.
	stderrDone := make(chan string)
	go func() {
		var all strings.Builder
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			fmt.Fprintln(&all, sc.Text())
			if strings.Contains(sc.Text(), "the rest of it was not sent") {
				_ = os.WriteFile(said, nil, 0o600)
			}
		}
		stderrDone <- all.String()
	}()
	_, err = in.Write([]byte("hi\n"))
	require.NoError(t, err)
	require.NoError(t, in.Close())
	stderr := <-stderrDone
	err = cmd.Wait()
	_ = s.c.Kill(t.Context(), id, client.KillOptions{Signal: "KILL"})
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr %q", stderr)
	require.Equal(t, 3, ee.ExitCode(), "the command's status; stderr %q", stderr)
	require.Contains(t, stderr, "conch: sending stdin to "+id+": ")
	require.Contains(t, stderr, "the rest of it was not sent, and its stdin is closed")
	require.Equal(t, "on\n", stdout.String())
}

// endedWithFirstCursor starts cmd, waits for it to end, and returns it
// with the cursor of its first frame: output before that cursor is what
// a read from it carries over.
func endedWithFirstCursor(t *testing.T, s *served, cmd string) (*client.Process, string) {
	t.Helper()
	p, err := s.c.Start(t.Context(), client.StartOptions{Cmd: cmd})
	require.NoError(t, err)
	_, _, err = s.c.Wait(t.Context(), p.ID, 30*time.Second)
	require.NoError(t, err)
	page, err := s.c.Logs(t.Context(), p.ID, client.LogsOptions{Cursor: "0", Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Items)
	return p, page.Items[0].Cursor
}
