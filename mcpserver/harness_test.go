package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/mcpserver"
)

// hangGuard bounds each test's calls; nothing here should come near it.
const hangGuard = 2 * time.Minute

// conn is a `conch mcp` subprocess and the MCP client session driving it.
type conn struct {
	t   *testing.T
	cs  *mcp.ClientSession
	cmd *exec.Cmd
}

// testEnv is an environment with its own HOME and state directory, and no
// daemon named.
func testEnv(t *testing.T) (env []string, stateHome string) {
	t.Helper()
	home := t.TempDir()
	stateHome = filepath.Join(home, "state")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_STATE_HOME", client.EnvURL, client.EnvToken:
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_STATE_HOME="+stateHome), stateHome
}

// startMCP runs `conch mcp args...` in env and connects to it over stdio.
func startMCP(t *testing.T, env []string, args ...string) *conn {
	t.Helper()
	cmd := exec.Command(conchBin, append([]string{"mcp"}, args...)...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	// A long grace: the server must end because its stdin closed, not
	// because the transport's TERM came.
	tr := &mcp.CommandTransport{Command: cmd, TerminateDuration: hangGuard}
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), tr, nil)
	require.NoError(t, err)
	cn := &conn{t: t, cs: cs, cmd: cmd}
	t.Cleanup(func() {
		_ = cs.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return cn
}

// call calls the tool and returns its result and its text.
func (c *conn) call(name string, args any) (*mcp.CallToolResult, string) {
	c.t.Helper()
	ctx, cancel := contextWithGuard(c.t)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(c.t, err, "%s is answered as a result, not a protocol error", name)
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return res, text.String()
}

// ok calls the tool, requires a result that is not an error, and decodes
// its structured content into out.
func (c *conn) ok(name string, args map[string]any, out any) string {
	c.t.Helper()
	res, text := c.call(name, args)
	require.False(c.t, res.IsError, "%s %v: %s", name, args, text)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(c.t, err)
	require.NoError(c.t, json.Unmarshal(b, out))
	return text
}

// toolError calls the tool and requires a tool error; it returns its text.
func (c *conn) toolError(name string, args map[string]any) string {
	c.t.Helper()
	res, text := c.call(name, args)
	require.True(c.t, res.IsError, "%s %v should fail: %s", name, args, text)
	return text
}

func (c *conn) run(args map[string]any) (mcpserver.Result, string) {
	c.t.Helper()
	var r mcpserver.Result
	text := c.ok("run", args, &r)
	return r, text
}

func (c *conn) list() mcpserver.ListOutput {
	c.t.Helper()
	var l mcpserver.ListOutput
	c.ok("list", nil, &l)
	return l
}

// close closes the server's stdin and requires that it exits by itself,
// with status 0.
func (c *conn) close() {
	c.t.Helper()
	require.NoError(c.t, c.cs.Close())
	require.NotNil(c.t, c.cmd.ProcessState, "conch mcp exited")
	require.Equal(c.t, 0, c.cmd.ProcessState.ExitCode(), "conch mcp exit status")
}

// proc is a process the test saw, to tell later whether it still runs.
type proc struct {
	pid   int
	start uint64
}

func seen(t *testing.T, pid int) proc {
	t.Helper()
	start, ok := proctree.StartTime(pid)
	require.True(t, ok, "process %d runs", pid)
	return proc{pid, start}
}

// alive reports whether the process still runs: the same pid with the same
// start time, not a zombie.
func (p proc) alive() bool {
	start, ok := proctree.StartTime(p.pid)
	return ok && start == p.start
}

// startDaemon runs `conch serve` on a loopback port with a token file and
// a state directory of its own, and returns a client for it once it
// answers, with its other flags args. The daemon is stopped with the test.
func startDaemon(t *testing.T, env []string, stateHome string, args ...string) *client.Client {
	t.Helper()
	return startDaemonLogging(t, env, stateHome, os.Stderr, args...)
}

// startDaemonLogging is startDaemon with the daemon's log (its stderr)
// written to stderr rather than the test's own.
func startDaemonLogging(t *testing.T, env []string, stateHome string, stderr io.Writer, args ...string) *client.Client {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("mcp-test-token\n"), 0o600))
	cmd := exec.Command(conchBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--log-level", "warn"}, args...)...)
	cmd.Env = env
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	endpoint := filepath.Join(stateHome, "conch", client.EndpointFile)
	deadline := time.Now().Add(hangGuard)
	for {
		ep, err := client.ReadEndpoint(filepath.Dir(endpoint))
		if err == nil && ep.PID == cmd.Process.Pid {
			c, err := client.New(ep.URL, "mcp-test-token")
			require.NoError(t, err)
			t.Cleanup(c.CloseIdleConnections)
			if _, err := c.Health(t.Context()); err == nil {
				return c
			}
		}
		require.True(t, time.Now().Before(deadline), "daemon answers")
		time.Sleep(20 * time.Millisecond)
	}
}

// gate is a file a test's command waits for, until the test opens it.
type gate string

func newGate(t *testing.T) gate { return gate(filepath.Join(t.TempDir(), "gate")) }

// wait is shell text that returns once the gate is open.
func (g gate) wait() string { return "while [ ! -e " + string(g) + " ]; do sleep 0.02; done" }

func (g gate) open(t *testing.T) { require.NoError(t, os.WriteFile(string(g), nil, 0o600)) }

// finish opens g and returns the answer of interact once the command id,
// which waits for g, has ended.
func (c *conn) finish(g gate, id string) mcpserver.Result {
	c.t.Helper()
	g.open(c.t)
	var done mcpserver.Result
	c.ok("interact", map[string]any{"id": id, "timeout": 60}, &done)
	require.False(c.t, done.Running, "%+v", done)
	return done
}

func contextWithGuard(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), hangGuard)
}

// outputOf returns r's output, read on through interact while the command
// runs and its output does not yet hold want: a loaded machine may answer
// a short wait before the command printed anything.
func (c *conn) outputOf(r mcpserver.Result, want string) string {
	c.t.Helper()
	out := r.Output
	for r.Running && !strings.Contains(out, want) {
		var next mcpserver.Result
		c.ok("interact", map[string]any{"id": r.ID, "cursor": r.Next, "idleTimeout": 0.2}, &next)
		r = next
		out += r.Output
	}
	return out
}

// processesUnder describes every process under pid, for a test's failure:
// each one's state, where it sleeps in the kernel, its signal masks and its
// command line.
func processesUnder(pid int) string {
	var b strings.Builder
	for _, p := range proctree.Descendants(pid) {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", p))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Fprintf(&b, "%d %q wchan=%s", p, strings.ReplaceAll(string(cmdline), "\x00", " "), wchan)
		for line := range strings.Lines(string(status)) {
			for _, f := range []string{"State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"} {
				if strings.HasPrefix(line, f+":") {
					b.WriteString(" " + strings.Join(strings.Fields(line), ""))
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
