package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/client"
)

// served is a `conch serve` process started by a test, and what it wrote to
// stderr.
type served struct {
	cmd    *exec.Cmd
	url    string
	token  string
	state  string // its $XDG_STATE_HOME
	c      *client.Client
	mu     sync.Mutex
	lines  []string // stderr, line by line
	stderr chan struct{}
	pipe   io.ReadCloser // the read end of its stderr
}

// startServe starts `conch serve` (the test binary, as testscript installs it in
// $PATH) with args, and waits until it listens. The test ends it.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return startServeWith(t, serveSetup{}, args...)
}

// serveSetup is how startServeWith starts `conch serve`.
type serveSetup struct {
	// under is a command line that runs conch serve: it ends by running
	// its arguments.
	under []string
	// stall stops the reading of its stderr once it listens, until the
	// test ends, with the pipe's room cut to a page.
	stall bool
	// tokenFrom is where it takes its token from: "" a token file the
	// test writes (--token-file), "env" $CONCH_TOKEN, "new" nowhere: it
	// makes one and writes it to the state directory.
	tokenFrom string
	// uid, when not 0, is the user (and group) it runs as, under (its
	// wrapper) too: its state directory and token file are that user's,
	// in a directory it can reach, and so is the conch binary it runs (a
	// link to the test's). Only root can start it so.
	uid int
}

// command is conch with args, as a client of s.
func (s *served) command(args ...string) *exec.Cmd {
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+s.url, client.EnvToken+"="+s.token)
	return cmd
}

// startServeWith is startServe set up by setup.
func startServeWith(t *testing.T, setup serveSetup, args ...string) *served {
	t.Helper()
	dir, bin := t.TempDir(), "conch"
	if setup.uid != 0 {
		dir, bin = userDir(t, setup.uid)
	}
	argv := append(slices.Clone(setup.under), bin, "serve", "--listen", "127.0.0.1:0")
	env := append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"), client.EnvToken+"=")
	switch setup.tokenFrom {
	case "":
		tokenFile := filepath.Join(dir, "token")
		require.NoError(t, os.WriteFile(tokenFile, []byte("drain-test-token\n"), 0o600))
		if setup.uid != 0 {
			require.NoError(t, os.Chown(tokenFile, setup.uid, setup.uid))
		}
		argv = append(argv, "--token-file", tokenFile)
	case "env":
		env = append(env, client.EnvToken+"=drain-test-token")
	}
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	if setup.uid != 0 {
		cmd.Env = append(cmd.Env, "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(setup.uid), Gid: uint32(setup.uid)}}
	}
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &served{cmd: cmd, token: "drain-test-token", state: filepath.Join(dir, "state"), stderr: make(chan struct{}), pipe: pipe}
	t.Cleanup(func() {
		stopDaemon(cmd.Process, s.stderr)
		_ = cmd.Wait()
	})
	release := make(chan struct{})
	if setup.stall {
		_, err := unix.FcntlInt(pipe.(*os.File).Fd(), unix.F_SETPIPE_SZ, os.Getpagesize())
		require.NoError(t, err)
		t.Cleanup(func() { close(release) }) // before stopDaemon: cleanups run last first
	}
	listening := make(chan string, 1)
	go func() {
		defer close(s.stderr)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.lines = append(s.lines, line)
			s.mu.Unlock()
			if u, ok := listeningURL(line); ok {
				listening <- u
				if setup.stall {
					<-release
				}
			}
		}
	}()
	select {
	case s.url = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("conch serve did not listen within 30 s")
	}
	if setup.tokenFrom == "new" {
		s.token, err = client.ReadToken(filepath.Join(s.state, "conch", client.TokenFile))
		require.NoError(t, err)
	}
	s.c, err = client.New(s.url, s.token)
	require.NoError(t, err)
	t.Cleanup(s.c.CloseIdleConnections)
	return s
}

// kill ends the daemon with SIGKILL, as a crash would. When the test
// ends, the next daemon of its state directory starts and stops, and so
// ends what the killed one left (its sessions, its instance directory in
// /dev/shm, its cgroups), as it would after a crash.
func (s *served) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Kill())
	t.Cleanup(func() {
		next := exec.Command(s.cmd.Args[0], s.cmd.Args[1:]...)
		next.Env = s.cmd.Env
		pipe, err := next.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, next.Start())
		exited := make(chan struct{})
		listening := make(chan struct{})
		go func() {
			defer close(exited)
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				if _, ok := listeningURL(sc.Text()); ok {
					close(listening)
				}
			}
		}()
		select {
		case <-listening:
		case <-time.After(30 * time.Second):
		}
		stopDaemon(next.Process, exited)
		_ = next.Wait()
	})
}

// listeningURL is the URL of the line where conch serve says it listens,
// in the text format or the JSON one.
func listeningURL(line string) (string, bool) {
	if u, ok := strings.CutPrefix(line, "conch: listening on "); ok {
		return u, true
	}
	var l struct{ Msg, URL string }
	if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.URL != "" {
		return l.URL, true
	}
	return "", false
}

// stopDaemon stops a daemon as an operator would, with SIGTERM, so that it
// removes its stream directory, and kills it when it is not gone 2 s later
// (work still in flight drains longer). exited is closed once its stderr
// is: the daemon has exited.
func stopDaemon(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = p.Kill()
		<-exited
	}
}

// get sends a request without a token and returns the answer, its body read.
func (s *served) get(t *testing.T, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if method != "GET" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// until polls /readyz until it answers code.
func (s *served) until(t *testing.T, code int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _ := s.get(t, "GET", "/readyz", "")
		if resp.StatusCode == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer %d within 30 s", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exited waits for the daemon to exit and returns its exit code, and its
// stderr.
func (s *served) exited(t *testing.T) (int, []string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { <-s.stderr; done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return code, s.lines
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not exit within 60 s")
		return 0, nil
	}
}

// TestServeDrainsOnSIGTERM sends SIGTERM to a real `conch serve` while a
// command runs and a second client tries to start work: /readyz answers 503
// at once, the new work is refused with 503 draining and Retry-After, the
// running command's answer arrives whole, and the daemon exits 0, having
// logged each step of the drain as JSON.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--log-format", "json", "--drain-timeout", "2m")
	s.until(t, http.StatusOK)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// The command runs until the test lets it go, so that everything below
	// happens while it runs, however loaded the machine.
	gate := filepath.Join(t.TempDir(), "gate")
	type answer struct {
		r   *client.RunResult
		err error
	}
	ran := make(chan answer, 1)
	go func() {
		r, _, err := s.c.Run(ctx, client.RunOptions{StartOptions: client.StartOptions{
			Cmd: "while [ ! -e " + gate + " ]; do sleep 0.02; done; sleep 0.5; echo done; exit 3"}})
		ran <- answer{r, err}
	}()
	for {
		list, err := s.c.List(ctx, client.ListOptions{State: "running"})
		require.NoError(t, err)
		if len(list.Items) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	s.until(t, http.StatusServiceUnavailable)
	resp, body := s.get(t, "GET", "/readyz", "")
	require.Contains(t, body, `"status":"draining"`)
	resp, _ = s.get(t, "GET", "/livez", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	other, err := client.New(s.url, s.token)
	require.NoError(t, err)
	defer other.CloseIdleConnections()
	for _, r := range []struct{ path, body string }{
		{"/v1/processes", `{"cmd":"true"}`},
		{"/v1/sessions", `{}`},
	} {
		resp, body := s.get(t, "POST", r.path, r.body)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
		require.Contains(t, body, `"code":"draining"`)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	_, _, err = other.Run(ctx, client.RunOptions{StartOptions: client.StartOptions{Cmd: "echo no"}})
	require.True(t, client.HasCode(err, client.CodeDraining), "%v", err)
	select {
	case a := <-ran:
		t.Fatalf("the command answered before it ended: %+v", a)
	default:
	}

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	a := <-ran
	require.NoError(t, a.err)
	require.Equal(t, "done\n", a.r.Stdout)
	require.Equal(t, 3, *a.r.ExitCode)

	code, lines := s.exited(t)
	require.Equal(t, 0, code, "%s", strings.Join(lines, "\n"))
	msgs := jsonLines(t, lines)
	require.Subset(t, msgs, []string{"containment", "listening", "stopping", "drain started", "drain finished", "shutting down: ending every process", "stopped"})
}

// jsonLines checks that every line of a daemon's stderr is a JSON object
// with a time, a level and a message, and returns the messages.
func jsonLines(t *testing.T, lines []string) (msgs []string) {
	t.Helper()
	for _, l := range lines {
		var rec struct{ Time, Level, Msg string }
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "a line of stderr that is not JSON: %s", l)
		require.True(t, rec.Time != "" && rec.Level != "" && rec.Msg != "", "a line without a time, level or message: %s", l)
		msgs = append(msgs, rec.Msg)
	}
	return msgs
}

// TestServeJSONStartFailure starts conch serve in the JSON format on an
// address another socket holds: it exits 1 with why as a JSON error line,
// its stderr JSON throughout.
func TestServeJSONStartFailure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := t.TempDir()
	cmd := exec.Command("conch", "serve", "--log-format", "json", "--listen", ln.Addr().String())
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+dir, client.EnvToken+"=a-token")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	require.Equal(t, 1, exit.ExitCode())
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Equal(t, "failed", jsonLines(t, lines)[len(lines)-1])
	require.Contains(t, lines[len(lines)-1], "address already in use")
}

// TestServeStopsOnASignalWhileStarting sends SIGTERM to `conch serve` and
// `conch sandboxd` while they start, held there reading their --token-file
// from a FIFO: once the token comes, the daemon starts and stops as it
// would later (exit 0, "stopped" logged, its endpoint record removed),
// where the signal killed it at once.
// A second signal while it still starts, the token never coming, ends it
// at once, as the signal would (exit 143) rather than leave it stuck.
func TestServeStopsOnASignalWhileStarting(t *testing.T) {
	t.Parallel()
	daemons := map[string][]string{"serve": {"serve"}, "sandboxd": {"sandboxd", "--grpc-port", "0", "--rest-port", "0"}}
	for name, daemon := range daemons {
		for _, stuck := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/then_started", true: "/stuck"}[stuck], func(t *testing.T) {
				t.Parallel()
				earlySignal(t, daemon, stuck)
			})
		}
	}
}

// earlySignal is TestServeStopsOnASignalWhileStarting for the daemon
// `conch` runs with the arguments daemon, its token file a FIFO.
func earlySignal(t *testing.T, daemon []string, stuck bool) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	args := append(slices.Clone(daemon), "--listen", "127.0.0.1:0", "--token-file", fifo, "--log-format", "json")
	if daemon[0] == "sandboxd" {
		args = append(args, "--root-dir", filepath.Join(dir, "root"))
	}
	cmd := exec.Command("conch", args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"), client.EnvToken+"=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waited error
	done := make(chan struct{})
	go func() {
		waited = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// The daemon opened the FIFO to read the token once a writer can
	// open it without waiting.
	var w int
	deadline := time.Now().Add(30 * time.Second)
	for {
		fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == nil {
			w = fd
			break
		}
		require.ErrorIs(t, err, unix.ENXIO)
		require.False(t, time.Now().After(deadline), "conch %s did not open its token file within 30 s", daemon[0])
		time.Sleep(10 * time.Millisecond)
	}
	defer func() { // w as it is then: closed below, its number may be another's by then
		if w >= 0 {
			unix.Close(w)
		}
	}()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var err error
	if stuck {
		// A second signal, sent until it ends the daemon: two sent at
		// once may arrive as one.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		guard := time.After(30 * time.Second)
	wait:
		for {
			select {
			case <-done:
				err = waited
				break wait
			case <-tick.C:
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case <-guard:
				t.Fatalf("conch %s, stuck starting, did not end within 30 s of SIGTERM sent again\n%s", daemon[0], stderr.String())
			}
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s", stderr.String())
		require.Equal(t, 143, ee.ExitCode(), "%s: %s", ee, stderr.String())
		return
	}
	time.Sleep(100 * time.Millisecond) // the signal is in before the token
	_, err = unix.Write(w, []byte("early-signal-token\n"))
	require.NoError(t, err)
	require.NoError(t, unix.Close(w))
	w = -1
	select {
	case <-done:
		err = waited
	case <-time.After(60 * time.Second):
		t.Fatalf("conch %s did not stop within 60 s of its token\n%s", daemon[0], stderr.String())
	}
	require.NoError(t, err, "%s", stderr.String())
	require.Contains(t, stderr.String(), `"msg":"stopped"`)
	_, err = os.Stat(filepath.Join(dir, "state", "conch", client.EndpointFile))
	require.ErrorIs(t, err, os.ErrNotExist, "the endpoint record is left behind")
}

// /healthz says the memory limit in force: the one GOMEMLIMIT sets when
// the daemon was started with it, which wins over its budgets' sum, not
// that sum.
func TestHealthMemoryLimitOfGOMEMLIMIT(t *testing.T) {
	t.Parallel()
	s := startServeWith(t, serveSetup{under: []string{"env", "GOMEMLIMIT=300MiB"}})
	resp, body := s.get(t, "GET", "/healthz", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var h struct {
		MemoryLimit int64 `json:"memoryLimit"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &h), body)
	require.Equal(t, int64(300<<20), h.MemoryLimit)
}
