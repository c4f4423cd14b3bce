package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

func TestSandboxdFlagDefaults(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	o, _, ok := parseSandboxd(e, nil)
	require.True(t, ok)
	require.Equal(t, 9090, o.grpcPort)
	require.Equal(t, 8080, o.restPort)
	require.Equal(t, "/workspace", o.rootDir)
	require.Equal(t, "SANDBOX_", o.metadataEnvPrefix)
	require.Equal(t, 10*time.Second, o.shutdownTimeout)
	require.Equal(t, 60*time.Second, o.httpIdleTimeout)
	require.Equal(t, "127.0.0.1", o.listenHost, "loopback unless asked")
	require.Equal(t, "127.0.0.1:7070", o.serve.listen, "conch's own API as conch serve has it")

	for _, args := range [][]string{
		{"--grpc-port", "9000", "--rest-port", "9000"},
		{"--grpc-port", "70000"},
		{"--shutdown-timeout", "0s"},
		{"--listen-host", ""},
		{"extra"},
	} {
		_, code, ok := parseSandboxd(e, args)
		require.False(t, ok, "%v", args)
		require.Equal(t, exitUsage, code, "%v", args)
	}
}

// sandboxdProc is a running `conch sandboxd`.
type sandboxdProc struct {
	cmd          *exec.Cmd
	grpc, rest   string // host:port
	api          string // http://host:port of conch's API
	token        string
	done         chan error
	stderrClosed chan struct{}

	mu    sync.Mutex
	lines []string // the daemon's stderr so far, a line each
}

var sandboxdAddrs = regexp.MustCompile(`sandboxd gRPC on (\S+), REST on (\S+), root`)

// sandboxdListening reads the addresses of the gRPC and REST ports from
// the notice conch sandboxd writes once it serves, in either log format.
func sandboxdListening(line string) (grpcAddr, restAddr string, ok bool) {
	if m := sandboxdAddrs.FindStringSubmatch(line); m != nil {
		return m[1], m[2], true
	}
	var l struct{ Msg, GRPC, REST string }
	if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "sandboxd listening" && l.GRPC != "" && l.REST != "" {
		return l.GRPC, l.REST, true
	}
	return "", "", false
}

// startSandboxd runs the conch binary's sandboxd with args on free loopback
// ports and returns once it serves.
func startSandboxd(t *testing.T, root string, extraEnv []string, args ...string) *sandboxdProc {
	t.Helper()
	return startSandboxdLimited(t, 0, root, extraEnv, args...)
}

// startSandboxdLimited is startSandboxd with the daemon's RLIMIT_NOFILE
// lowered to nofile (0: left as it is).
func startSandboxdLimited(t *testing.T, nofile int, root string, extraEnv []string, args ...string) *sandboxdProc {
	t.Helper()
	return startSandboxdAs(t, nofile, false, root, extraEnv, args...)
}

// startSandboxdAs is startSandboxdLimited, the daemon leading a session
// of its own (without a controlling terminal) when sessionLeader, as PID 1
// of a container does.
func startSandboxdAs(t *testing.T, nofile int, sessionLeader bool, root string, extraEnv []string, args ...string) *sandboxdProc {
	t.Helper()
	work := t.TempDir()
	token := "sandboxd-test-token"
	argv := append([]string{"conch", "sandboxd", "--grpc-port", "0", "--rest-port", "0",
		"--root-dir", root, "--listen", "127.0.0.1:0"}, args...)
	if nofile > 0 {
		argv = append([]string{"sh", "-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(nofile)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(work, "state"), "CONCH_TOKEN="+token)
	cmd.Env = append(cmd.Env, extraEnv...)
	if sessionLeader {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &sandboxdProc{cmd: cmd, token: token, done: make(chan error, 1), stderrClosed: make(chan struct{})}
	found := make(chan struct{})
	go func() {
		defer close(p.stderrClosed)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if u, ok := listeningURL(line); ok {
				p.api = u
			}
			if grpcAddr, restAddr, ok := sandboxdListening(line); ok {
				p.grpc, p.rest = grpcAddr, restAddr
				close(found)
			}
		}
	}()
	go func() {
		<-p.stderrClosed
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { stopDaemon(cmd.Process, p.stderrClosed) })
	select {
	case <-found:
	case err := <-p.done:
		t.Fatalf("conch sandboxd exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("conch sandboxd did not start serving")
	}
	return p
}

// requireExit0 waits for conch sandboxd to exit, a minute at most, and
// requires it to exit 0.
func (p *sandboxdProc) requireExit0(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		require.NoError(t, err, "conch sandboxd exits 0")
	case <-time.After(60 * time.Second):
		t.Fatal("conch sandboxd did not exit")
	}
}

func (p *sandboxdProc) client(t *testing.T) sandboxdpb.ProcessServiceClient {
	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return sandboxdpb.NewProcessServiceClient(conn)
}

// TestSandboxdDaemon runs conch sandboxd: both surfaces serve, a process
// started through the ProcessService is one of conch's API's (listed there,
// without the daemon's token in its environment), and SIGTERM turns
// /v1/health to 503 at once, kills a process that ignores TERM within the
// shutdown timeout, ends its stream with exit -1, and the daemon exits 0.
func TestSandboxdDaemon(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// A drain of a second: the process that ignores TERM outlives it.
	p := startSandboxd(t, root, []string{"SANDBOX_ID=sbx-1", "SANDBOX_API_TOKEN=hidden"}, "--shutdown-timeout", "10s", "--drain-timeout", "1s",
		"--allow-host", "sbx-1.sandboxes.test")
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	get := func(url string, header ...string) (int, string) {
		resp, body := send(t, hc, "GET", url, "", header...)
		return resp.StatusCode, body
	}
	code, _ := get("http://" + p.rest + "/v1/health")
	require.Equal(t, 200, code)
	// On loopback the REST port takes loopback names and --allow-host's
	// only: a page that rebinds its own domain to 127.0.0.1 is refused.
	_, port, _ := net.SplitHostPort(p.rest)
	for host, want := range map[string]int{"localhost:" + port: 200, "sbx-1.sandboxes.test:" + port: 200,
		"rebind.example:" + port: 403, "127.0.0.1.rebind.example": 403} {
		code, body := get("http://"+p.rest+"/v1/health", "Host", host)
		require.Equal(t, want, code, "Host %s: %s", host, body)
	}
	code, body := get("http://" + p.rest + "/v1/metadata")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"env":{"SANDBOX_ID":"sbx-1"}}`, body)

	c := p.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	resp, err := c.Execute(ctx, &sandboxdpb.ExecuteRequest{Config: cfgOf("sh", "-c", `echo "[$CONCH_TOKEN]"; pwd`)})
	require.NoError(t, err)
	require.Equal(t, "[]\n"+root+"\n", string(resp.GetStdout()), "the token stays out; the root is the cwd")

	stream, pid := startIgnoringTerm(ctx, t, c)

	code, body = get(p.api+"/v1/processes", "Authorization", "Bearer "+p.token)
	require.Equal(t, 200, code)
	var list struct {
		Items []struct {
			Name  string
			State string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	running := 0
	for _, pr := range list.Items {
		if pr.Name == "sandboxd" && pr.State == "running" {
			running++
		}
	}
	require.Equal(t, 1, running, "the Start process is one of conch's: %s", body)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	// Once the daemon has taken the signal (the first 503), every answer
	// is 503 until the port closes; before it, the signal may not have been
	// handled yet.
	saw503 := false
	for {
		resp, err := hc.Get("http://" + p.rest + "/v1/health")
		if err != nil {
			break // the port closed
		}
		resp.Body.Close()
		if saw503 || resp.StatusCode != 200 {
			require.Equal(t, 503, resp.StatusCode, "health after SIGTERM")
			saw503 = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, saw503, "health answered 503 while the TERM-ignoring process was given its grace")
	exit := readToEnd(t, stream, io.Discard)
	require.NotNil(t, exit, "the stream ends with exit")
	require.Equal(t, int32(-1), *exit, "killed")
	p.requireExit0(t)
	require.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "the process that ignored TERM is gone")
}

// readToEnd reads a Start stream to its end, its stdout into out, and
// returns the exit code of its exit event (nil without one).
func readToEnd(t *testing.T, stream grpc.ServerStreamingClient[sandboxdpb.StartResponse], out io.Writer) *int32 {
	t.Helper()
	var exit *int32
	for {
		msg, err := stream.Recv()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return exit
		}
		_, _ = out.Write(msg.GetStdout())
		if e := msg.GetExit(); e != nil {
			c := e.GetExitCode()
			exit = &c
		}
	}
}

func cfgOf(argv ...string) *sandboxdpb.ProcessConfig {
	return &sandboxdpb.ProcessConfig{Command: argv}
}

// send sends a request with body and a header (name, value) when given,
// and returns the answer, its body read.
func send(t *testing.T, hc *http.Client, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
		if header[0] == "Host" {
			req.Host = header[1] // net/http sends req.Host, never a Host in req.Header
		}
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestSandboxdDrainsOnSIGTERM sends SIGTERM to conch sandboxd while a
// process started through the ProcessService runs and a second client tries
// to start work: /v1/health and /readyz answer 503 at once, new processes
// are refused (UNAVAILABLE on the sandboxd surface, 503 draining with
// Retry-After on conch's API), the running process's stream is delivered
// whole, to its exit code, and the daemon exits 0.
func TestSandboxdDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := startSandboxd(t, t.TempDir(), nil, "--drain-timeout", "2m")
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	status := func(url string) int {
		resp, _ := send(t, hc, "GET", url, "")
		return resp.StatusCode
	}
	require.Equal(t, 200, status("http://"+p.rest+"/v1/health"))

	// The process runs until the test lets it go, so that everything
	// below happens while it runs, however loaded the machine.
	gate := filepath.Join(t.TempDir(), "gate")
	c := p.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := c.Start(ctx, &sandboxdpb.StartRequest{Config: cfgOf("sh", "-c",
		"echo started; while [ ! -e "+gate+" ]; do sleep 0.02; done; sleep 0.5; echo done; exit 3")})
	require.NoError(t, err)
	var out strings.Builder
	for !strings.Contains(out.String(), "started") {
		msg, err := stream.Recv()
		require.NoError(t, err)
		out.Write(msg.GetStdout())
	}

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	deadline := time.Now().Add(30 * time.Second)
	for status("http://"+p.rest+"/v1/health") != 503 {
		require.False(t, time.Now().After(deadline), "/v1/health did not answer 503 within 30 s of SIGTERM")
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 503, status(p.api+"/readyz"))

	_, err = c.Execute(ctx, &sandboxdpb.ExecuteRequest{Config: cfgOf("true")})
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "Execute while draining: %v", err)
	second, err := c.Start(ctx, &sandboxdpb.StartRequest{Config: cfgOf("true")})
	if err == nil {
		_, err = second.Recv()
	}
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "Start while draining: %v", err)
	resp, body := send(t, hc, "POST", p.api+"/v1/processes", `{"cmd":"true"}`, "Authorization", "Bearer "+p.token)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Contains(t, body, `"code":"draining"`)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	exit := readToEnd(t, stream, &out)
	require.Equal(t, "started\ndone\n", out.String())
	require.NotNil(t, exit, "the stream ends with exit")
	require.Equal(t, int32(3), *exit)
	p.requireExit0(t)
}

// TestSandboxdDrainWaitsForStreams sends SIGTERM while a Start stream
// whose process has ended still owes its client the output: the drain
// waits for the stream, not only for the process, so that a client that
// reads after the shutdown timeout has run out still gets every byte and
// the exit. The drain once ended at once ("processes=0 requests=0"), and
// the stream was cut UNAVAILABLE when the shutdown timeout ran out.
func TestSandboxdDrainWaitsForStreams(t *testing.T) {
	t.Parallel()
	p := startSandboxd(t, t.TempDir(), nil, "--drain-timeout", "2m", "--shutdown-timeout", "1s")
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	c := p.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// More than the flow-control windows hold: the stream waits for the
	// client to read, with the process long ended.
	const size = 4 << 20
	stream, err := c.Start(ctx, &sandboxdpb.StartRequest{Config: cfgOf("head", "-c", strconv.Itoa(size), "/dev/zero")})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.NotNil(t, msg.GetInit())
	code, body := get(t, hc, p.api+"/v1/processes?state=running", p.token)
	for ; strings.Contains(body, `"sandboxd"`); code, body = get(t, hc, p.api+"/v1/processes?state=running", p.token) {
		require.Equal(t, 200, code, body)
		time.Sleep(10 * time.Millisecond)
	}

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	deadline := time.Now().Add(30 * time.Second)
	for code, _ := get(t, hc, "http://"+p.rest+"/v1/health", ""); code != 503; code, _ = get(t, hc, "http://"+p.rest+"/v1/health", "") {
		require.False(t, time.Now().After(deadline), "/v1/health did not answer 503 within 30 s of SIGTERM")
		time.Sleep(10 * time.Millisecond)
	}
	// Longer than --shutdown-timeout: a drain that did not wait for the
	// stream has shut the daemon down by now.
	time.Sleep(2 * time.Second)
	var out countWriter
	exit := readToEnd(t, stream, &out)
	require.Equal(t, size, int(out), "every byte of the stream")
	require.NotNil(t, exit, "the stream ends with exit")
	require.Equal(t, int32(0), *exit)
	p.requireExit0(t)
}

// TestSandboxdJSONLog runs conch sandboxd with the log flags of
// deploy/kubernetes/sandboxtemplate.yaml (--log-format json) through a
// process and a SIGTERM: every line of its stderr is a JSON object, and its
// notices and drain steps carry the messages docs/api.md lists for conch
// serve's log, so that one log query finds both daemons' shutdowns. sandboxd
// once logged "stopping: ending every process" where conch serve logs
// "shutting down: ending every process".
func TestSandboxdJSONLog(t *testing.T) {
	t.Parallel()
	p := startSandboxd(t, t.TempDir(), nil, "--log-format", "json")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := p.client(t).Execute(ctx, &sandboxdpb.ExecuteRequest{Config: cfgOf("true")})
	require.NoError(t, err)
	require.Equal(t, int32(0), r.GetExitCode())

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.requireExit0(t)
	p.mu.Lock()
	lines := p.lines
	p.mu.Unlock()
	msgs := jsonLines(t, lines)
	require.Subset(t, msgs, []string{"containment", "listening", "sandboxd listening",
		"process started", "process ended", "stopping", "drain started", "drain finished",
		"shutting down: ending every process", "stopped"}, "%s", strings.Join(lines, "\n"))
}

// get sends a GET with the token when one is given, and returns the
// answer's status and body.
func get(t *testing.T, hc *http.Client, url, token string) (int, string) {
	t.Helper()
	var header []string
	if token != "" {
		header = []string{"Authorization", "Bearer " + token}
	}
	resp, body := send(t, hc, "GET", url, "", header...)
	return resp.StatusCode, body
}

// countWriter counts the bytes written to it.
type countWriter int

func (c *countWriter) Write(b []byte) (int, error) {
	*c += countWriter(len(b))
	return len(b), nil
}

// TestSandboxdWriteStdinBound checks the bound docs/sandboxd.md gives a
// WriteStdin: 4 MiB less 12 bytes of input fits in one call, written
// whole, and a call of 4 MiB is refused RESOURCE_EXHAUSTED, writing
// nothing. The docs once said input of any size was written whole.
func TestSandboxdWriteStdinBound(t *testing.T) {
	t.Parallel()
	p := startSandboxd(t, t.TempDir(), nil)
	c := p.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := c.Start(ctx, &sandboxdpb.StartRequest{Config: cfgOf("wc", "-c")})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	id := msg.GetInit().GetProcessId()
	write := func(n int) error {
		_, err := c.WriteStdin(ctx, &sandboxdpb.WriteStdinRequest{ProcessId: id,
			Payload: &sandboxdpb.WriteStdinRequest_Input{Input: make([]byte, n)}})
		return err
	}
	require.NoError(t, write(4<<20-12))
	err = write(4 << 20)
	require.Equal(t, codes.ResourceExhausted, grpcstatus.Code(err), "%v", err)
	_, err = c.WriteStdin(ctx, &sandboxdpb.WriteStdinRequest{ProcessId: id, Payload: &sandboxdpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	require.NoError(t, err)
	var out strings.Builder
	exit := readToEnd(t, stream, &out)
	require.Equal(t, strconv.Itoa(4<<20-12), strings.TrimSpace(out.String()))
	require.NotNil(t, exit)
	require.Equal(t, int32(0), *exit)
}

// TestSandboxdMetricsPortTaken starts conch sandboxd with a --metrics-listen
// address another socket holds: it exits 1 saying why, without having said
// it listens, and leaves no endpoint record behind. It once printed both
// listening lines, then exited and left daemon.json naming its dead pid.
func TestSandboxdMetricsPortTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	state := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command("conch", "sandboxd", "--grpc-port", "0", "--rest-port", "0", "--root-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--metrics-listen", taken.Addr().String())
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "CONCH_TOKEN=sandboxd-test-token")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("conch sandboxd did not exit within 60 s")
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, stderr.String())
	require.Equal(t, 1, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "--metrics-listen")
	require.Contains(t, stderr.String(), "address already in use")
	require.NotContains(t, stderr.String(), "listening on")
	require.NotContains(t, stderr.String(), "sandboxd gRPC on")
	require.NoFileExists(t, filepath.Join(state, "conch", client.EndpointFile), "no endpoint record is left behind")
}

// TestSandboxdPortsFitDescriptorLimit: the gRPC and REST ports share the
// API's bound, --max-connections lowered to half the limit of open files,
// and take a quarter of it at most each: the REST port serves while idle
// gRPC connections hold theirs (sharing half, it waited on as the gRPC
// port let each go at its handshake's timeout and took the next). Bounded at --max-connections
// alone (4096 by default),
// connections that send nothing to the gRPC port, which needs no token,
// took every descriptor a daemon under a limit of 64 had: the REST port
// accepted nothing, and the API answered only on its spare descriptor,
// once a connection.
func TestSandboxdPortsFitDescriptorLimit(t *testing.T) {
	t.Parallel()
	p := startSandboxdLimited(t, 64, t.TempDir(), nil)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 100 {
		c, err := net.Dial("tcp", p.grpc)
		require.NoError(t, err)
		idle = append(idle, c)
	}
	// The gRPC port has accepted as many as it holds, 8, a quarter of the
	// bound of 32, half of 64, once each of them has had grpc's first
	// frame.
	for i, c := range idle[:8] {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second))) // a hang guard
		_, err := c.Read(make([]byte, 1))
		require.NoError(t, err, "gRPC connection %d", i)
	}
	hc := &http.Client{Timeout: 30 * time.Second} // a hang guard
	defer hc.CloseIdleConnections()
	for range 5 {
		resp, body := send(t, hc, "GET", p.api+"/healthz", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.False(t, resp.Close, "answered on the spare descriptor: the daemon is out of them")
	}
	resp, body := send(t, hc, "GET", "http://"+p.rest+"/v1/health", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestSandboxdBoundsIdleConnections holds many more connections that send
// nothing to the gRPC and REST ports than the daemon has descriptors: they
// need no token. Those ports had no bound, and such connections took every
// descriptor the daemon had (accept: too many open files) until grpc let
// them go, 120 s later: conch's API, its probes and gRPC answered nothing
// meanwhile. The two ports now hold at most half --max-connections
// together, the rest wait in the kernel's queue, and the API answers.
func TestSandboxdBoundsIdleConnections(t *testing.T) {
	t.Parallel()
	p := startSandboxdLimited(t, 64, t.TempDir(), nil, "--max-connections", "8")
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for _, addr := range []string{p.grpc, p.rest} {
		for range 100 {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			idle = append(idle, c)
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second} // a hang guard, far below the 120 s grpc held them
	defer hc.CloseIdleConnections()
	for range 5 {
		resp, body := send(t, hc, "GET", p.api+"/healthz", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}

	// The gRPC port lets go of the connections it holds that never began
	// HTTP/2 (the first 8, two at a time; the hang guard is far below
	// the 120 s grpc gives them when not told otherwise), and once the
	// others close too, the ports serve again.
	for _, c := range idle[8:] {
		c.Close()
	}
	for _, c := range idle[:8] {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
		_, err := io.Copy(io.Discard, c)
		require.NoError(t, err, "a gRPC connection that sends nothing is closed")
	}
	resp, body := send(t, hc, "GET", "http://"+p.rest+"/v1/health", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := p.client(t).Execute(ctx, &sandboxdpb.ExecuteRequest{Config: cfgOf("echo", "hi")}, grpc.WaitForReady(true))
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(out.GetStdout()))
}

// TestSandboxdKeepsNoTerminal reads a terminal under the root of a daemon
// that leads its session, as PID 1 of a container does: refused 400, and
// not opened. The open made the terminal the daemon's controlling
// terminal, and the terminal's hangup (the program on it ended) then sent
// the daemon SIGHUP, which drained and stopped it.
func TestSandboxdKeepsNoTerminal(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no terminal: %v", err)
	}
	defer ptmx.Close()
	require.NoError(t, tty.Close())
	p := startSandboxdAs(t, 0, true, filepath.Dir(tty.Name()), nil)
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	resp, body := send(t, hc, "GET", "http://"+p.rest+"/v1/files/"+filepath.Base(tty.Name()), "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	require.NoError(t, err)
	_, after, _ := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after) // state, ppid, pgrp, session, tty_nr, ...
	require.Equal(t, "0", fields[4], "the daemon has no controlling terminal")
	require.NoError(t, ptmx.Close())
	resp, body = send(t, hc, "GET", "http://"+p.rest+"/v1/health", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestSandboxdShutdownEndsEveryProcessAtOnce: stopping, conch sandboxd
// sends SIGTERM to the processes of conch's own API as it does to
// sandboxd's, at once and within --shutdown-timeout, as docs/sandboxd.md
// says ("every process left gets SIGTERM, and SIGKILL 2 s later"). The
// API's processes once got theirs only after every sandboxd process was
// gone, a TERM-ignoring one killed 2 s on, and their KILL 5 s after that,
// under a bound of 30 s of their own rather than the flag's.
func TestSandboxdShutdownEndsEveryProcessAtOnce(t *testing.T) {
	t.Parallel()
	p := startSandboxd(t, t.TempDir(), nil, "--shutdown-timeout", "8s", "--drain-timeout", "0s")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, sbxPID := startIgnoringTerm(ctx, t, p.client(t))
	// The API's process says, as its TERM comes, whether sandboxd's
	// TERM-ignoring process is still there, in its grace.
	said := filepath.Join(t.TempDir(), "said")
	c, err := client.New(p.api, p.token)
	require.NoError(t, err)
	api, err := c.Start(ctx, client.StartOptions{Cmd: fmt.Sprintf(
		`trap 'if kill -0 %d 2>/dev/null; then echo alive >%s; else echo gone >%s; fi; exit 0' TERM; echo up; while :; do sleep 0.05; done`,
		sbxPID, said, said)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		page, err := c.Logs(ctx, api.ID, client.LogsOptions{})
		return err == nil && len(page.Items) > 0
	}, 30*time.Second, 20*time.Millisecond, "the API's process never trapped TERM")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.requireExit0(t)
	b, err := os.ReadFile(said)
	require.NoError(t, err, "the API's process got no TERM")
	require.Equal(t, "alive\n", string(b), "the API's process got its TERM only once sandboxd's were gone")
}

// startIgnoringTerm starts, through c's ProcessService, a process that
// ignores SIGTERM, and returns its stream, past its init and its pid.
func startIgnoringTerm(ctx context.Context, t *testing.T, c sandboxdpb.ProcessServiceClient) (grpc.ServerStreamingClient[sandboxdpb.StartResponse], int) {
	t.Helper()
	stream, err := c.Start(ctx, &sandboxdpb.StartRequest{Config: cfgOf("sh", "-c", "trap '' TERM; echo $$; while :; do sleep 0.05; done")})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.NotNil(t, msg.GetInit())
	msg, err = stream.Recv()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(msg.GetStdout())))
	require.NoError(t, err)
	return stream, pid
}
