package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/internal/buftest"
	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/mcpserver"
)

// The tools against the engine in `conch mcp`'s own process.
func TestToolsInProcess(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	testTools(t, c)
	c.close()
}

// The same tools against a running daemon (--url, the token found in the
// state directory), whose sessions `conch mcp` leaves alone on exit.
func TestToolsAgainstDaemon(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome)
	c := startMCP(t, env, "--url", d.URL())
	testTools(t, c)
	sessions := c.list().Sessions
	require.NotEmpty(t, sessions)
	c.close()
	left, err := d.Sessions(t.Context())
	require.NoError(t, err)
	for _, s := range sessions {
		require.True(t, slices.ContainsFunc(left, func(p client.Process) bool { return p.ID == s.ID && !p.Ended() }),
			"session %s lives on in the daemon", s.Name)
	}
}

func testTools(t *testing.T, c *conn) {
	t.Run("schemas", func(t *testing.T) { testSchemas(t, c) })
	t.Run("state", func(t *testing.T) { testState(t, c) })
	t.Run("errors", func(t *testing.T) { testErrors(t, c) })
	t.Run("input", func(t *testing.T) { testInput(t, c) })
	t.Run("interrupt", func(t *testing.T) { testInterrupt(t, c) })
	t.Run("bounded", func(t *testing.T) { testBounded(t, c) })
	t.Run("limits", func(t *testing.T) { testLimits(t, c) })
	t.Run("sessions", func(t *testing.T) { testSessions(t, c) })
	t.Run("code", func(t *testing.T) { testCode(t, c) })
}

// Every tool comes with a description and an input schema naming its fields.
func testSchemas(t *testing.T, c *conn) {
	res, err := c.cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	want := map[string]string{"run": "language", "interact": "id", "read_output": "cursor", "list": "", "close_session": "session"}
	for _, tool := range res.Tools {
		field, ok := want[tool.Name]
		require.True(t, ok, "unexpected tool %s", tool.Name)
		delete(want, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
		schema := tool.InputSchema.(map[string]any)
		require.Equal(t, "object", schema["type"], tool.Name)
		if field != "" {
			require.Contains(t, schema["properties"], field, tool.Name)
		}
		if tool.Name == "run" || tool.Name == "interact" {
			// The waits are bounded, which the schema says: a timeout
			// past a day waited a day without a word.
			props := schema["properties"].(map[string]any)
			for _, wait := range []string{"timeout", "idleTimeout"} {
				desc, _ := props[wait].(map[string]any)["description"].(string)
				require.Contains(t, desc, "from 0.001 to 86400", "%s's %s", tool.Name, wait)
			}
		}
	}
	require.Empty(t, want, "tools missing")
}

// A session keeps its directory and variables from one run to the next;
// a failing command is a result with its exit code.
func testState(t *testing.T, c *conn) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	r, _ := c.run(map[string]any{"command": "cd sub && export GREETING=hi", "session": "state", "cwd": dir})
	require.False(t, r.Running)
	require.Equal(t, 0, *r.ExitCode)
	require.Equal(t, filepath.Join(dir, "sub"), r.Cwd)

	r, text := c.run(map[string]any{"command": `echo "$GREETING from $(pwd)"`, "session": "state"})
	require.Equal(t, "hi from "+filepath.Join(dir, "sub")+"\n", r.Output)
	require.Contains(t, text, "exit code 0")
	require.Contains(t, text, "cwd: "+filepath.Join(dir, "sub"))

	r, text = c.run(map[string]any{"command": "echo oops >&2; (exit 3)", "session": "state"})
	require.Equal(t, 3, *r.ExitCode)
	require.Equal(t, "oops\n", r.Output)
	require.Contains(t, text, "exit code 3")

	var read mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID}, &read)
	require.Equal(t, "oops\n", read.Output)
	require.False(t, read.More)
	require.False(t, read.Running)
}

// Bad arguments are tool errors saying what to fix.
func testErrors(t *testing.T, c *conn) {
	require.Contains(t, c.toolError("run", map[string]any{"command": ""}), "command is empty")
	require.Contains(t, c.toolError("run", map[string]any{"timeout": 1}), "command")
	require.Contains(t, c.toolError("run", map[string]any{"command": "true", "timeout": "soon"}), "timeout")
	require.Contains(t, c.toolError("run", map[string]any{"command": "true", "timeout": -1}), "cannot be negative")
	require.Contains(t, c.toolError("interact", map[string]any{"id": "no-such-id", "input": "x"}), "not found")
	require.Contains(t, c.toolError("close_session", map[string]any{"session": "never-made"}), "no session")
	require.Contains(t, c.toolError("run", map[string]any{"command": "true", "session": "badshell", "shell": "/no/such/shell"}), "create session")

	// A key given twice is refused, as the daemon's API refuses it, and
	// nothing runs: a gateway that checked the call may have read the other.
	ran := filepath.Join(t.TempDir(), "ran")
	for _, args := range []string{
		`{"command": "true", "command": "touch ` + ran + `"}`,
		`{"command": "touch ` + ran + `", "limits": {"pids": 64, "pids": 0}}`,
	} {
		res, text := c.call("run", json.RawMessage(args))
		require.True(t, res.IsError, "%s: %s", args, text)
		require.Contains(t, text, "given twice", args)
		require.NoFileExists(t, ran)
	}
	_, text := c.call("run", json.RawMessage(`{"command": "touch `+ran+`", "session": "dup"}`))
	require.FileExists(t, ran, text)

	// A number past every argument's range says so, and which: the SDK's
	// error named Go's struct field and type, with a stray brace.
	for args, at := range map[string]string{
		`{"command": "true", "outputLimit": 1e20}`:                `"outputLimit" is 1e20`,
		`{"command": "true", "limits": {"pids": -1e400}}`:         `"limits.pids" is -1e400`,
		`{"command": "true", "outputLimit": 9223372036854775808}`: `"outputLimit" is 9223372036854775808`,
	} {
		res, text := c.call("run", json.RawMessage(args))
		require.True(t, res.IsError, "%s: %s", args, text)
		require.Contains(t, text, at, args)
		require.Contains(t, text, "at most 9223372036854775807", args)
		require.NotContains(t, text, "Go struct", args)
	}
}

// A command waiting for input answers early, and is answered through
// interact.
func testInput(t *testing.T, c *conn) {
	done := c.waitsThenAnswers(map[string]any{"command": `printf 'name? '; read -r name; echo "hello $name"`, "session": "input"}, "conch\n")
	require.Contains(t, done.Output, "hello conch")
	require.Equal(t, "input", done.Session)
}

// waitsThenAnswers runs args, requires that the run comes back waiting for
// input with its prompt "name?", answers it through interact, and returns
// the end, which must be exit code 0.
func (c *conn) waitsThenAnswers(args map[string]any, input string) mcpserver.Result {
	t := c.t
	t.Helper()
	r, text := c.run(args)
	require.True(t, r.Running, text)
	require.True(t, r.WaitingForInput, text)
	require.Contains(t, text, "still running as "+r.ID+"; waiting for input")
	require.Contains(t, r.Output, "name?")
	var done mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "input": input}, &done)
	require.False(t, done.Running)
	require.Equal(t, 0, *done.ExitCode)
	return done
}

// A long command answers when its timeout runs out, still running; INT
// through interact ends it, and the session goes on.
func testInterrupt(t *testing.T, c *conn) {
	r, text := c.run(map[string]any{"command": "echo started; sleep 300", "session": "intr", "timeout": 0.5, "closeStdin": true})
	require.True(t, r.Running, text)
	require.Contains(t, text, "still running as "+r.ID)
	require.Contains(t, c.outputOf(r, "started\n"), "started")

	l := c.list()
	require.True(t, slices.ContainsFunc(l.Processes, func(p mcpserver.ProcessInfo) bool {
		return p.ID == r.ID && p.Session == "intr"
	}), "list shows the running command: %+v", l.Processes)

	var done mcpserver.Result
	text = c.ok("interact", map[string]any{"id": r.ID, "signal": "INT"}, &done)
	require.False(t, done.Running, text)
	require.Equal(t, "INT", done.Signal, text)
	require.Empty(t, done.Note, text)

	r, _ = c.run(map[string]any{"command": "echo after", "session": "intr"})
	require.Equal(t, "after\n", r.Output)

	// A signal for a command that ended says that it reached nothing,
	// rather than answer the result as if it were the interrupt's.
	text = c.ok("interact", map[string]any{"id": r.ID, "signal": "INT"}, &done)
	require.Equal(t, 0, *done.ExitCode, text)
	require.Contains(t, done.Note, "had ended before the signal", text)
	require.Contains(t, text, "note: the command had ended before the signal: INT reached nothing")
	require.Contains(t, c.toolError("interact", map[string]any{"id": r.ID, "input": "late\n"}),
		"stdin is closed: the command has ended")
}

// 10 MiB of output come back as a head and a tail within the limit, with
// what was left out, which read_output reads from its cursor.
func testBounded(t *testing.T, c *conn) {
	const total = 10 << 20
	r, text := c.run(map[string]any{
		"command":     "head -c " + strconv.Itoa(total) + " /dev/zero | tr '\\0' x | fold -w 99",
		"session":     "big",
		"outputLimit": 16 << 10,
		"timeout":     120,
	})
	require.False(t, r.Running)
	require.Equal(t, 0, *r.ExitCode)
	require.Positive(t, r.OmittedBytes)
	require.True(t, r.Truncated, "10 MiB is more than the retention")
	require.NotEmpty(t, r.OmittedAfter)
	require.Less(t, len(text), 16<<10+headerBytes, "the text is bounded")
	t.Logf("10 MiB answered in %d bytes of text, %d omitted", len(text), r.OmittedBytes)
	require.Contains(t, text, "bytes omitted")
	require.Contains(t, r.Output, strings.Repeat("x", 99)+"\n", r.Output[:200])

	var read mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": r.OmittedAfter, "limit": 1000}, &read)
	require.True(t, read.More, "%+v / %+v", read, r)
	require.Positive(t, read.Bytes)
	require.Contains(t, read.Output, strings.Repeat("x", 99))
	require.NotEqual(t, r.OmittedAfter, read.Next)
}

// headerBytes bounds what a tool's text holds besides the output: its
// status lines and the line saying what was omitted.
const headerBytes = 512

// run's text holds at most outputLimit bytes of output and a header;
// read_output's at most limit bytes and a header, and reading on from its
// next cursors gives the whole output, every byte once.
func testLimits(t *testing.T, c *conn) {
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	for _, limit := range []int{50, 200, 1000, 5000} {
		r, text := c.run(map[string]any{"command": "seq 1 20000", "session": "limits", "outputLimit": limit})
		require.Positive(t, r.OmittedBytes)
		require.LessOrEqual(t, len(text), limit+headerBytes, "outputLimit %d: %d bytes of text", limit, len(text))
		t.Logf("outputLimit %d: %d bytes of text", limit, len(text))

		res, text := c.call("read_output", map[string]any{"id": r.ID, "limit": limit})
		require.False(t, res.IsError, text)
		require.LessOrEqual(t, len(text), limit+headerBytes, "read_output limit %d: %d bytes of text", limit, len(text))
	}

	r, _ := c.run(map[string]any{"command": "seq 1 20000; printf 'é€😀%.0s' $(seq 300)", "session": "limits"})
	want.WriteString(strings.Repeat("é€😀", 300))
	var got strings.Builder
	cursor, reads := "", 0
	for {
		var read mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 1001}, &read)
		require.LessOrEqual(t, len(read.Output), 1001)
		require.True(t, utf8.ValidString(read.Output))
		got.WriteString(read.Output)
		cursor = read.Next
		if reads++; !read.More {
			break
		}
		require.Less(t, reads, 1000, "read_output goes on")
	}
	require.Equal(t, want.String(), got.String(), "read_output's pieces join to the whole output")

	// What the line says was omitted is all that is not shown, also what
	// was cut here of the daemon's head and tail: it said 250 of 300 with
	// 28 shown.
	r, _ = c.run(map[string]any{"command": "printf 'abcdefghij%.0s' $(seq 1 30)", "session": "limits", "outputLimit": 100})
	m := regexp.MustCompile(`(?s)^(.*)\n\[\.\.\. (\d+) bytes omitted; [^\n]*\]\n(.*)$`).FindStringSubmatch(r.Output)
	require.NotNil(t, m, "%q", r.Output)
	n, _ := strconv.Atoi(m[2])
	require.Equal(t, 300, n+len(m[1])+len(m[3]), "%q", r.Output)
	require.EqualValues(t, n, r.OmittedBytes)

	// A limit shorter than the next character: it comes whole, over the
	// limit. The same next came back, with nothing, for ever.
	r, _ = c.run(map[string]any{"command": `printf 'ab\360\237\230\200cd\n'`, "session": "limits"})
	got.Reset()
	cursor, reads = "0", 0
	for {
		var read mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 3}, &read)
		got.WriteString(read.Output)
		cursor = read.Next
		if reads++; !read.More {
			break
		}
		require.Less(t, reads, 10, "read_output goes on: %q so far", got.String())
	}
	require.Equal(t, "ab😀cd\n", got.String())
}

// Sessions are made by name with their shell, listed, and closed.
func testSessions(t *testing.T, c *conn) {
	r, _ := c.run(map[string]any{"command": "echo $0", "session": "dashed", "shell": "dash"})
	require.Contains(t, r.Output, "dash")
	r, text := c.run(map[string]any{"command": "true", "session": "dashed", "shell": "zsh"})
	require.Contains(t, text, "shell applies only when a session is created")
	require.Regexp(t, `it runs dash \(/\S*dash\), not zsh`, text)
	_ = r

	l := c.list()
	i := slices.IndexFunc(l.Sessions, func(s mcpserver.SessionInfo) bool { return s.Name == "dashed" })
	require.GreaterOrEqual(t, i, 0, "list shows the session: %+v", l.Sessions)
	id := l.Sessions[i].ID

	var closed mcpserver.CloseOutput
	c.ok("close_session", map[string]any{"session": "dashed"}, &closed)
	require.Equal(t, id, closed.ID)
	l = c.list()
	require.False(t, slices.ContainsFunc(l.Sessions, func(s mcpserver.SessionInfo) bool { return s.Name == "dashed" }))

	// The default session is main.
	r, _ = c.run(map[string]any{"command": "echo in main"})
	require.Equal(t, "main", r.Session)
}

// When stdin closes, or SIGTERM comes, `conch mcp` ends every session and
// process of its engine (background jobs included) and exits.
func TestExitEndsEverything(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stdin", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			env, _ := testEnv(t)
			c := startMCP(t, env)
			r, _ := c.run(map[string]any{"command": "sleep 1000 & echo $!"})
			job, err := strconv.Atoi(strings.TrimSpace(r.Output))
			require.NoError(t, err, r.Output)
			running, _ := c.run(map[string]any{"command": "sh -c 'echo $$; exec sleep 1000'", "session": "other", "idleTimeout": 0.2, "closeStdin": true})
			require.True(t, running.Running)
			out := c.outputOf(running, "\n")
			cmd, err := strconv.Atoi(strings.TrimSpace(out))
			require.NoError(t, err, out)
			procs := []proc{seen(t, job), seen(t, cmd)}
			for _, s := range c.list().Sessions {
				procs = append(procs, seen(t, s.PID))
			}
			require.Len(t, procs, 4, "a job, a command, two shells")
			if how == "SIGTERM" {
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
				require.NoError(t, c.cs.Wait())
			}
			c.close()
			for _, p := range procs {
				require.False(t, p.alive(), "process %d ended with conch mcp", p.pid)
			}
		})
	}
}

// A session whose shell exited says so, and the next run under its name
// starts a new one.
func TestSessionShellExits(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	first, _ := c.run(map[string]any{"command": "echo $$", "session": "gone"})
	c.call("run", map[string]any{"command": "exit 4", "session": "gone"})
	text := c.toolError("run", map[string]any{"command": "echo again", "session": "gone"})
	require.Contains(t, text, "has ended")
	r, _ := c.run(map[string]any{"command": "echo $$", "session": "gone"})
	require.Equal(t, 0, *r.ExitCode)
	require.NotEqual(t, first.Output, r.Output, "a new shell")
	c.close()
}

// TestTextEscapesControls makes a session's cwd, a running command's line
// and a session's name hold an escape sequence and a newline: the text a
// model reads shows them as escapes (the output always was plain text; the
// cwd and list lines once carried them raw, and close_session the name).
func TestTextEscapesControls(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	dir := "d\x1b]0;x\x07"
	_, text := c.run(map[string]any{"command": `d=$(printf 'd\033]0;x\007'); mkdir -p "$d" && cd "$d"`, "cwd": t.TempDir()})
	require.Contains(t, text, `d\x1b]0;x\x07`)
	require.NotContains(t, text, dir)
	r, _ := c.run(map[string]any{"command": "sleep 30\n", "session": "other", "timeout": 0.2})
	require.True(t, r.Running)
	// A command queued behind it is listed as queued, not running.
	q, qtext := c.run(map[string]any{"command": "echo queued", "session": "other", "timeout": 0.2})
	require.True(t, q.Running && q.Queued, "%+v", q)
	require.Contains(t, qtext, "still queued as "+q.ID+" behind the command its session runs")
	_, text = c.call("list", map[string]any{})
	require.Contains(t, text, `d\x1b]0;x\x07`)
	require.Contains(t, text, `sleep 30\x0a`)
	require.NotContains(t, text, "\x1b")
	require.Contains(t, text, "2 commands running or queued:\n")
	require.Contains(t, text, q.ID+" in other, starting: echo queued")
	require.Contains(t, text, "2 sessions:\n")
	c.call("interact", map[string]any{"id": r.ID, "signal": "INT"})

	// A session's name, in every text that names it.
	name := "s\x1b]0;x\x07\nn"
	_, text = c.run(map[string]any{"command": "true", "session": name})
	require.Contains(t, text, `s\x1b]0;x\x07\x0an`)
	_, text = c.call("close_session", map[string]any{"session": name})
	require.Contains(t, text, `s\x1b]0;x\x07\x0an`)
	require.NotContains(t, text, "\x1b")
}

// TestLongSessionNameNotEchoed: a session name over the daemon's bound is
// refused in a message of a few lines, as is closing a session by such a
// name: the 100,000-byte name came back whole.
func TestLongSessionNameNotEchoed(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	long := strings.Repeat("n", 100_000)
	text := c.toolError("run", map[string]any{"command": "true", "session": long})
	require.Contains(t, text, "session name is 100000 bytes, at most 1024")
	require.Less(t, len(text), 1000, text)
	text = c.toolError("close_session", map[string]any{"session": long})
	require.Contains(t, text, "no session")
	require.Less(t, len(text), 1000, text)
}

// TestOutputLimitHolds cuts a long output: the output, the line saying what
// was omitted included, holds within outputLimit (it once went past it by
// that line's length).
func TestOutputLimitHolds(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	var full strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	for _, limit := range []int{200, 1000} {
		r, _ := c.run(map[string]any{"command": "seq 1 100000", "outputLimit": limit})
		require.Contains(t, r.Output, "bytes omitted")
		require.LessOrEqual(t, len(r.Output), limit, "%q", r.Output)
		require.True(t, strings.HasPrefix(r.Output, "1\n"), "%q", r.Output)
		require.True(t, strings.HasSuffix(r.Output, "100000\n"), "%q", r.Output)
		// read_output from the cursor given reads on right after the head:
		// the head's part of a frame cut in two is not read again.
		head, _, _ := strings.Cut(r.Output, "\n[... ")
		var out mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": r.OmittedAfter, "limit": 200}, &out)
		all := full.String()
		require.True(t, strings.HasPrefix(all, head))
		rest := all[len(head):]
		require.True(t, strings.HasPrefix(rest, out.Output) || strings.HasPrefix(strings.TrimPrefix(rest, "\n"), out.Output),
			"read from %s: %q, want the start of %q", r.OmittedAfter, out.Output, rest[:50])
		require.Contains(t, r.Output, fmt.Sprintf("cursor %q", r.OmittedAfter))
	}
}

// TestInteractReadsOnFromLastAnswer waits more on a command with interact
// and no cursor: the answer holds what the command printed since run's
// answer, not only what came after the interact call (it once lost A).
func TestInteractReadsOnFromLastAnswer(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	gate := newGate(t)
	r, _ := c.run(map[string]any{"command": gate.wait() + "; echo A; sleep 1; echo B", "timeout": 0.3})
	require.True(t, r.Running)
	gate.open(t)
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(20 * time.Millisecond) {
		var out mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID}, &out)
		if strings.Contains(out.Output, "A") {
			break
		}
		require.True(t, time.Now().Before(deadline), "A was not printed")
	}
	var w mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "timeout": 30}, &w)
	require.False(t, w.Running)
	require.Equal(t, "A\nB\n", w.Output)
}

// TestOutputLimitTinyAndHuge: an outputLimit of 1 cuts the output and says
// so (the daemon was asked for no limit, the cut was silent); an outputLimit
// or read_output limit past MaxOutputLimit is refused (8 reads of a limit of
// 1e18 at once took conch mcp to 1.8 GB). An outputLimit shorter than the
// line saying what was omitted gets that line alone, whole, past the limit,
// as the README and the schema say: all the output is omitted.
func TestOutputLimitTinyAndHuge(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	for _, limit := range []int{1, 10, 64} {
		r, _ := c.run(map[string]any{"command": "seq 1000", "outputLimit": limit})
		var whole mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "limit": 1 << 20}, &whole)
		require.Positive(t, whole.Bytes)
		require.Equal(t, whole.Bytes, r.OmittedBytes, "%+v", r)
		require.Equal(t, fmt.Sprintf("\n[... %d bytes omitted; read_output with cursor %q reads them ...]\n", whole.Bytes, r.OmittedAfter), r.Output)
		require.Greater(t, len(r.Output), limit)
	}
	text := c.toolError("run", map[string]any{"command": "echo x", "outputLimit": int64(mcpserver.MaxOutputLimit) + 1})
	require.Contains(t, text, "at most")
	r, _ := c.run(map[string]any{"command": "echo x"})
	text = c.toolError("read_output", map[string]any{"id": r.ID, "limit": int64(1e18)})
	require.Contains(t, text, "at most")
	var read mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "limit": mcpserver.MaxOutputLimit}, &read)
	require.Equal(t, "x\n", read.Output)
}

// TestReadCursorPastItsFrame reads from a cursor whose offset is past the
// end of the frame it points into: a tool error, where the offset ran on
// across frames and the answer said 0 bytes and nothing more to read.
func TestReadCursorPastItsFrame(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	r, _ := c.run(map[string]any{"command": "seq 1 100"})
	text := c.toolError("read_output", map[string]any{"id": r.ID, "cursor": "0+99999999999"})
	require.Contains(t, text, "holds")
	var read mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": "0+2"}, &read)
	require.True(t, strings.HasPrefix(read.Output, "2\n3\n"), "%q", read.Output)
}

// TestInteractReadCursor passes interact the "CURSOR+N" cursor read_output
// gives as next: interact reads on from there, every byte once, where the
// daemon refused it ("bad cursor"). A rest of the frame longer than half
// the outputLimit is cut as a long output is, with the cursor to read the
// rest from.
func TestInteractReadCursor(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	var full strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	all := full.String()
	r, _ := c.run(map[string]any{"command": "seq 1 1000; read -r x; echo end", "idleTimeout": 0.5})
	require.Contains(t, c.outputOf(r, "\n1000\n"), "\n1000\n")

	var page mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "limit": 100}, &page)
	require.Contains(t, page.Next, "+", "a cursor into a frame")
	require.True(t, strings.HasPrefix(all, page.Output))

	var cut mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "cursor": page.Next, "outputLimit": 300, "idleTimeout": 0.2}, &cut)
	require.True(t, cut.Running)
	require.LessOrEqual(t, len(cut.Output), 300)
	head, _, ok := strings.Cut(cut.Output, "\n[... ")
	require.True(t, ok, "cut: %q", cut.Output)
	require.Contains(t, cut.OmittedAfter, "+")
	var rest strings.Builder
	for cursor, reads := cut.OmittedAfter, 0; ; reads++ {
		require.Less(t, reads, 100, "read_output goes on")
		var read mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor}, &read)
		rest.WriteString(read.Output)
		if !read.More {
			break
		}
		cursor = read.Next
	}
	// The head's last newline is not shown before the line saying what was
	// omitted.
	joined := page.Output + head + rest.String()
	if joined != all {
		joined = page.Output + head + "\n" + rest.String()
	}
	require.Equal(t, all, joined, "head %q, then %q", head, rest.String())

	var done mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "cursor": page.Next, "input": "\n"}, &done)
	require.False(t, done.Running)
	require.Equal(t, all[len(page.Output):]+"end\n", done.Output)
}

// TestReadPagesKeepEscapesWhole pages through coloured output with small
// limits: no page cuts an escape sequence, whose rest read as text on the
// next page (ESC [ 3 1 m red in pages of 3 bytes read "", "1mr", "ed",
// "[0m").
func TestReadPagesKeepEscapesWhole(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	r, _ := c.run(map[string]any{"command": `printf '\033[31mred\033[0m!\033]0;title\007\n'`})
	require.Equal(t, "red!\n", r.Output)
	for limit := 1; limit <= 12; limit++ {
		var got strings.Builder
		cursor := ""
		for reads := 0; ; reads++ {
			require.Less(t, reads, 100, "read_output goes on")
			var read mcpserver.ReadOutput
			c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": limit}, &read)
			require.Empty(t, strings.Trim(read.Output, "red!\n"), "limit %d: a page holds a piece of an escape sequence: %q", limit, read.Output)
			got.WriteString(read.Output)
			if !read.More {
				break
			}
			cursor = read.Next
		}
		require.Equal(t, "red!\n", got.String(), "limit %d", limit)
	}
}

// TestEscapeSplitBetweenAnswers answers while a command's output ends in
// the middle of an escape sequence: the next answer, of interact or of
// read_output, reads the sequence whole, where its rest read as text
// ("31mred" after "ab ESC [").
func TestEscapeSplitBetweenAnswers(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	gate := newGate(t)
	r, _ := c.run(map[string]any{"command": `printf 'ab\033['; ` + gate.wait() + `; printf '31mred\n'`,
		"timeout": 0.3, "closeStdin": true})
	shown := r.Output
	for !strings.Contains(shown, "ab") {
		require.True(t, r.Running, "%+v", r)
		c.ok("interact", map[string]any{"id": r.ID, "idleTimeout": 0.2}, &r)
		shown += r.Output
	}
	require.True(t, r.Running)
	var held mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID}, &held)
	require.Equal(t, "ab", held.Output)

	done := c.finish(gate, r.ID)
	require.Equal(t, "abred\n", shown+done.Output)
	var rest mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": held.Next}, &rest)
	require.Equal(t, "red\n", rest.Output)
}

// TestLongSequenceSplitBetweenAnswers answers while a command's output ends
// inside an OSC string longer than plaintext.MaxUnfinished (a 6 KB OSC 52
// clipboard): the next answer, of interact or of read_output, drops the
// string's rest as the whole output does, where it showed it as text
// ("BBB...done"); read_output's pages through it show none of it either.
// Nothing of the string is held back: next goes on past it.
func TestLongSequenceSplitBetweenAnswers(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	dir := t.TempDir()
	printed, gate := filepath.Join(dir, "printed"), newGate(t)
	r, _ := c.run(map[string]any{"command": `printf 'before\n\033]52;c;'; head -c 6000 /dev/zero | tr '\0' A; touch ` + printed +
		`; ` + gate.wait() + `; head -c 50 /dev/zero | tr '\0' B; printf '\007done\n'`,
		"timeout": 0.3, "closeStdin": true})
	waitFile(t, printed)
	printedBytes := int64(len("before\n\x1b]52;c;") + 6000)
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(20 * time.Millisecond) {
		var read mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "limit": 1 << 20}, &read)
		if read.Bytes >= printedBytes {
			break
		}
		require.True(t, time.Now().Before(deadline), "the log holds what was printed")
	}
	shown := r.Output
	c.ok("interact", map[string]any{"id": r.ID, "idleTimeout": 0.2}, &r)
	shown += r.Output
	require.True(t, r.Running, "%+v", r)
	require.Equal(t, "before\n", shown)
	held := r.Next

	pages := func(cursor string) string {
		var all strings.Builder
		for reads := 0; ; reads++ {
			require.Less(t, reads, 100, "read_output goes on")
			var read mcpserver.ReadOutput
			c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 2000}, &read)
			require.False(t, strings.Contains(read.Output, "A"), "a page shows the string's body as text: %.60q", read.Output)
			all.WriteString(read.Output)
			if !read.More {
				return all.String()
			}
			cursor = read.Next
		}
	}
	require.Equal(t, "before\n", pages(""))

	done := c.finish(gate, r.ID)
	require.Equal(t, "done\n", done.Output)
	require.Equal(t, "before\ndone\n", pages(""))
	var rest mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": held}, &rest)
	require.Equal(t, "done\n", rest.Output)
	require.Less(t, rest.Bytes, int64(100), "read on from past the string's start")
	require.Contains(t, held, "~", "next carries the string's start")
	for _, bad := range []string{held + "0", "0~41", "0~zz", "0~"} {
		text := c.toolError("read_output", map[string]any{"id": r.ID, "cursor": bad})
		require.Contains(t, text, "want a cursor an answer gave", bad)
	}
}

// TestEscapeSplitInACutAnswer answers while the output of a command ends
// inside an escape sequence that starts in the first frame of the tail of a
// cut answer, whose start the daemon does not give: the next answer reads
// the sequence's rest as the whole output does, where it showed "31mred".
// The frame is the one the head ends in, or a later one.
func TestEscapeSplitInACutAnswer(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	for name, before := range map[string]string{"head's frame": "", "later frame": "seq 1 3000; sleep 0.1; "} {
		t.Run(name, func(t *testing.T) { testEscapeSplitInACutAnswer(t, c, before) })
	}
}

func testEscapeSplitInACutAnswer(t *testing.T, c *conn, before string) {
	dir := t.TempDir()
	printed, gate := filepath.Join(dir, "printed"), newGate(t)
	// Answered once quiet: after the printf, which goes out in one write.
	r, _ := c.run(map[string]any{"command": before + `printf '%03000d\033[' 0; touch ` + printed +
		`; ` + gate.wait() + `; printf '31mred\n'`,
		"idleTimeout": 0.5, "closeStdin": true, "outputLimit": 1000})
	waitFile(t, printed)
	shown := r.Output
	for r.Running && !strings.HasSuffix(shown, "000") {
		c.ok("interact", map[string]any{"id": r.ID, "idleTimeout": 0.5, "outputLimit": 1000}, &r)
		shown += r.Output
	}
	require.True(t, r.Running, "%+v", r)
	require.Positive(t, r.OmittedBytes, "a cut answer: %+v", r)
	done := c.finish(gate, r.ID)
	require.Equal(t, "red\n", done.Output, "after %q", r.Next)
}

// TestOmittedAfterInsideASequence cuts outputs whose head ends inside an
// escape sequence (the daemon cuts between characters, not sequences):
// read_output from the answer's omittedAfter reads the sequence's rest as
// the whole output does, where it read it as text ("31mred", the body of
// an OSC string). So does the cursor it reads from when the head's text is
// cut further (a cursor move made it longer than its bytes), the start of
// the head's last frame, which a title's rest begins.
func TestOmittedAfterInsideASequence(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	var seq strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	// readOn is the head of r's output, and all that read_output reads
	// from its omittedAfter.
	readOn := func(r mcpserver.Result) (head, read string) {
		t.Helper()
		head, _, ok := strings.Cut(r.Output, "\n[... ")
		require.True(t, ok, "a cut output: %q", r.Output)
		for cursor, reads := r.OmittedAfter, 0; ; reads++ {
			require.Less(t, reads, 100, "read_output goes on")
			var page mcpserver.ReadOutput
			c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 1 << 20}, &page)
			read += page.Output
			if !page.More {
				return head, read
			}
			cursor = page.Next
		}
	}

	// A head of 498 to 502 bytes ends before ESC [31m, or after its ESC,
	// ESC [, ESC [3 or ESC [31.
	for limit := 1092; limit <= 1100; limit++ {
		r, _ := c.run(map[string]any{"command": `printf '%0498d\033[31mred\n' 0; seq 1 3000`, "outputLimit": limit})
		head, read := readOn(r)
		require.Equal(t, strings.Repeat("0", 498)+"red\n"+seq.String(), head+read, "outputLimit %d", limit)
	}

	r, _ := c.run(map[string]any{"command": `printf 'x\033]52;c;'; head -c 3000 /dev/zero | tr '\0' A; printf '\007after\n'; seq 1 3000`,
		"outputLimit": 1000})
	head, read := readOn(r)
	require.Equal(t, "xafter\n"+seq.String(), head+read)

	// The title's start alone in a frame, its rest and a cursor move in
	// the next one, which the head ends in: omittedAfter is that frame's
	// start, read again.
	r, _ = c.run(map[string]any{"command": `printf '\033]0;ti'; sleep 0.1; printf 'tle\007\033[600Cx%02000d\n' 0; seq 1 3000`,
		"outputLimit": 1000})
	_, read = readOn(r)
	require.Equal(t, strings.Repeat(" ", 600)+"x"+strings.Repeat("0", 2000)+"\n"+seq.String(), read)
}

// TestReadTextLongerThanItsBytes pages through output whose text is longer
// than its bytes (a cursor move of 7 bytes makes 600 blanks; a byte that is
// not UTF-8 reads as the three of U+FFFD): every line and byte is read
// once, within the limit, where a page's text was cut to the limit while
// its next went past all the bytes read, and what was between was lost.
func TestReadTextLongerThanItsBytes(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	var moves strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&moves, "%s%d\n", strings.Repeat(" ", 600), i)
	}
	for command, want := range map[string]string{
		`for i in $(seq 1 20); do printf '\033[600C%d\n' $i; done`: moves.String(),
		`head -c 3000 /dev/zero | tr '\0' '\377'`:                  strings.Repeat("\ufffd", 3000),
	} {
		r, _ := c.run(map[string]any{"command": command, "outputLimit": 100000})
		require.Equal(t, want, r.Output)
		var got strings.Builder
		cursor := ""
		for reads := 0; ; reads++ {
			require.Less(t, reads, 100, "read_output goes on")
			var read mcpserver.ReadOutput
			c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 2000}, &read)
			require.LessOrEqual(t, len(read.Output), 2000)
			got.WriteString(read.Output)
			if !read.More {
				break
			}
			cursor = read.Next
		}
		require.Equal(t, want, got.String(), command)
	}
}

// TestAnswerTextLongerThanItsBytes runs commands whose output fits the
// outputLimit in bytes but not in text (a cursor move of 7 bytes makes 600
// blanks): the answer is cut and says so, and read_output from its
// omittedAfter reads the rest, where its text was cut short with nothing
// said and the rest never read. The same holds while the command runs, its
// next after all the output.
func TestAnswerTextLongerThanItsBytes(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "%s%d\n", strings.Repeat(" ", 600), i)
	}
	const moves = `for i in $(seq 1 20); do printf '\033[600C%d\n' $i; done`
	check := func(r mcpserver.Result) {
		t.Helper()
		require.LessOrEqual(t, len(r.Output), 2000)
		head, _, ok := strings.Cut(r.Output, "\n[... ")
		require.True(t, ok, "the answer says it is cut: %q", r.Output)
		require.Positive(t, r.OmittedBytes)
		var rest strings.Builder
		for cursor, reads := r.OmittedAfter, 0; ; reads++ {
			require.Less(t, reads, 100, "read_output goes on")
			var read mcpserver.ReadOutput
			c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 1 << 20}, &read)
			rest.WriteString(read.Output)
			if !read.More {
				break
			}
			cursor = read.Next
		}
		// The head's last newline is not shown before the line saying
		// what was omitted.
		joined := head + rest.String()
		if joined != want.String() {
			joined = head + "\n" + rest.String()
		}
		require.Equal(t, want.String(), joined)
	}
	r, _ := c.run(map[string]any{"command": moves, "outputLimit": 2000})
	require.False(t, r.Running)
	check(r)
	// Lines wider than the answer, the head in two frames, its text cut in
	// the first: read_output reads from the first again, where it read
	// from the second, and the first's lines after the cut were neither
	// shown nor read (L101-L137 of L100-L299, outputLimit 1500).
	r, _ = c.run(map[string]any{"command": `for i in $(seq 100 299); do printf 'L%s\033[9999C|\n' $i; [ $i = 137 ] && sleep 0.3; done`, "outputLimit": 1500})
	require.False(t, r.Running)
	require.LessOrEqual(t, len(r.Output), 1500)
	head, _, ok := strings.Cut(r.Output, "\n[... ")
	require.True(t, ok, "the answer says it is cut: %q", r.Output)
	seen := map[string]bool{}
	for _, w := range strings.Fields(head) {
		seen[w] = true
	}
	for cursor, reads := r.OmittedAfter, 0; ; reads++ {
		require.Less(t, reads, 1000, "read_output goes on")
		var read mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": cursor, "limit": 1 << 20}, &read)
		for _, w := range strings.Fields(read.Output) {
			seen[w] = true
		}
		if !read.More {
			break
		}
		cursor = read.Next
	}
	for i := 100; i <= 299; i++ {
		require.True(t, seen[fmt.Sprintf("L%d", i)] || seen[fmt.Sprintf("L%d|", i)], "L%d is shown or read", i)
	}

	r, _ = c.run(map[string]any{"command": moves + "; read -r x; echo end", "outputLimit": 2000, "idleTimeout": 0.5})
	for r.Running && r.OmittedBytes == 0 {
		require.Empty(t, r.Output, "a first answer before the output")
		c.ok("interact", map[string]any{"id": r.ID, "idleTimeout": 0.5, "outputLimit": 2000}, &r)
	}
	require.True(t, r.Running)
	check(r)
	var done mcpserver.Result
	c.ok("interact", map[string]any{"id": r.ID, "input": "\n"}, &done)
	require.Equal(t, "end\n", done.Output)
}

// TestInteractWithNoCursorKnown answers a command that another conch mcp
// started (both drive one daemon), with input and no cursor given or
// known: the answer is the output after the input, whose start has no
// cursor, and it ends inside an escape sequence. The next answer reads on
// from the sequence, where next was "+2", 2 bytes into the whole output,
// and it read "z\nab" again.
func TestInteractWithNoCursorKnown(t *testing.T) {
	t.Parallel()
	_, a, b := sharedPair(t)
	gate := newGate(t)
	r, _ := a.run(map[string]any{"command": `echo xyz; read -r x; printf 'ab\033['; ` + gate.wait() + `; printf '31mred\n'`,
		"timeout": 0.3})
	require.True(t, r.Running, "%+v", r)
	var w mcpserver.Result
	b.ok("interact", map[string]any{"id": r.ID, "input": "\n", "idleTimeout": 0.5}, &w)
	for w.Running && !strings.Contains(w.Output, "ab") {
		b.ok("interact", map[string]any{"id": r.ID, "idleTimeout": 0.5}, &w)
	}
	require.True(t, w.Running, "%+v", w)
	require.Equal(t, "ab", w.Output)
	done := b.finish(gate, r.ID)
	require.Equal(t, "red\n", done.Output, "read on from %q", w.Next)
}

// TestInteractSignalAsksOnce: interact with a signal looks the command up
// once, before the signal (to say whether it reached anything); the
// answer, which names no session once the command has ended, takes its
// session from that look rather than a second one.
func TestInteractSignalAsksOnce(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	var log buftest.Buffer
	d := startDaemonLogging(t, env, stateHome, &log, "--log-level", "info")
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	r, text := c.run(map[string]any{"command": "sleep 300", "session": "sig", "timeout": 0.3, "closeStdin": true})
	require.True(t, r.Running, text)
	count := func(route string) int {
		return strings.Count(log.String(), `msg=request route="`+route+`"`)
	}
	const get, listing = "GET /v1/processes/{id}", "GET /v1/processes"
	before := count(get)
	var done mcpserver.Result
	text = c.ok("interact", map[string]any{"id": r.ID, "signal": "INT"}, &done)
	require.False(t, done.Running, text)
	require.Equal(t, "sig", done.Session, text)
	// A request's log line is written after its answer, before its
	// connection serves the next request: once the line of a list, sent
	// next on the connection kept from interact's requests, is there, so
	// are theirs.
	listed := count(listing)
	c.list()
	require.Eventually(t, func() bool { return count(listing) > listed }, hangGuard, 10*time.Millisecond)
	require.Equal(t, 1, count(get)-before, "Gets of the command for one interact with a signal")
}

// TestReadFromDroppedOutput reads from a cursor into a frame that the
// daemon's retention dropped since: the answer says so and starts at the
// first frame kept, whole, where the cursor's offset, into the frame that
// is gone, once cut that many bytes off the first frame kept.
func TestReadFromDroppedOutput(t *testing.T) {
	t.Parallel()
	env, stateHome := testEnv(t)
	d := startDaemon(t, env, stateHome, "--log-retention", "64K")
	c := startMCP(t, env, "--url", d.URL())
	defer c.close()
	gate := newGate(t)
	r, _ := c.run(map[string]any{"command": `printf '%03000d\n' 0; ` + gate.wait() + `; seq 1 100000`,
		"timeout": 0.5})
	require.True(t, r.Running, "%+v", r)
	var first mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "limit": 100}, &first)
	require.True(t, strings.HasSuffix(first.Next, "+100"), "a cursor into the first frame: %+v", first)
	gate.open(t)
	ctx, cancel := contextWithGuard(t)
	defer cancel()
	_, _, err := d.Wait(ctx, r.ID, hangGuard)
	require.NoError(t, err)

	page, err := d.Logs(ctx, r.ID, client.LogsOptions{Limit: 1})
	require.NoError(t, err)
	require.True(t, page.TruncatedHead, "the first frame was dropped")
	kept, err := page.Items[0].Bytes()
	require.NoError(t, err)

	var read mcpserver.ReadOutput
	text := c.ok("read_output", map[string]any{"id": r.ID, "cursor": first.Next, "limit": 1000}, &read)
	require.True(t, read.Truncated, text)
	require.Contains(t, text, "dropped", text)
	n := min(len(kept), 200)
	require.Equal(t, string(kept[:n]), read.Output[:n], "the first frame kept, from its start")

	// Its next cursor, into that first frame kept, reads on from there:
	// it once pointed into the frame that is gone, whose place the first
	// one kept took again, and the same bytes came back for ever.
	require.Greater(t, len(kept), int(read.Bytes), "the read was cut inside the first frame kept")
	var again mcpserver.ReadOutput
	text = c.ok("read_output", map[string]any{"id": r.ID, "cursor": read.Next, "limit": 1000}, &again)
	require.False(t, again.Truncated, text)
	n = min(len(kept)-int(read.Bytes), 200)
	require.Equal(t, string(kept[read.Bytes:int(read.Bytes)+n]), again.Output[:n], "read on where the read before ended")
}

// conch mcp holds an answer's text to its limit as it renders it, never the
// whole text first: 4 MiB of ESC[1023C x (10 bytes to a line of 1,025)
// rendered to gigabytes, in run and read_output alike, and the host's
// conch mcp ran out of memory with a limit the tools accept.
func TestRenderHeldToTheLimit(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	const limit = 4 << 20
	r, _ := c.run(map[string]any{"command": `yes "$(printf '\033[1023Cx')" | head -c 4000000`, "outputLimit": limit, "timeout": 120})
	require.LessOrEqual(t, len(r.Output), limit)
	require.Contains(t, r.Output, "bytes omitted")
	var out mcpserver.ReadOutput
	c.ok("read_output", map[string]any{"id": r.ID, "cursor": "0", "limit": limit}, &out)
	require.LessOrEqual(t, len(out.Output), limit)
	require.True(t, out.More)
	peak, err := heaptest.Peak(c.cmd.Process.Pid, false)
	require.NoError(t, err)
	t.Logf("conch mcp peaked at %d MiB", peak>>20)
	require.Less(t, peak, int64(256<<20), "conch mcp's peak resident memory")
}

// TestOmittedBytesAreBytes cuts output whose text is far longer than its
// bytes (each line moves the cursor 50 or 500 columns): omittedBytes counts
// the bytes whose text is not shown, which read_output reads from the
// answer's cursor. It once added the length of the text cut here to the
// bytes the daemon left out, and said more were omitted than there were
// (12,442 of 1,800).
func TestOmittedBytesAreBytes(t *testing.T) {
	t.Parallel()
	env, _ := testEnv(t)
	c := startMCP(t, env)
	defer c.close()
	for _, columns := range []int{50, 500} {
		r, _ := c.run(map[string]any{"command": fmt.Sprintf(`for i in $(seq 100 299); do printf 'L%%s\033[%dC|\n' $i; done`, columns), "outputLimit": 300})
		require.False(t, r.Running)
		require.LessOrEqual(t, len(r.Output), 300, "%q", r.Output)
		var whole, fromCursor mcpserver.ReadOutput
		c.ok("read_output", map[string]any{"id": r.ID, "limit": 1 << 20}, &whole)
		c.ok("read_output", map[string]any{"id": r.ID, "cursor": r.OmittedAfter, "limit": 1 << 20}, &fromCursor)
		require.False(t, whole.More)
		require.False(t, fromCursor.More)
		move := fmt.Sprintf("\033[%dC", columns)
		lineBytes := int64(len("L100" + move + "|\n"))
		require.Equal(t, 200*lineBytes, whole.Bytes)

		// The bytes shown: whole lines; the head's last line cut in its
		// label or its cursor move (the move's bytes are shown when all its
		// blanks are); the tail's first line after its move, "|".
		head, tail, ok := strings.Cut(r.Output, "\n[... ")
		require.True(t, ok, "%q", r.Output)
		_, tail, ok = strings.Cut(tail, "...]\n")
		require.True(t, ok, "%q", r.Output)
		var shown int64
		for line := range strings.Lines(head + "\n" + tail) {
			line = strings.TrimSuffix(line, "\n")
			switch label := strings.TrimRight(line, " "); {
			case strings.HasSuffix(line, "|") && strings.HasPrefix(line, "L"):
				shown += lineBytes
			case line == "|":
				shown += 2
			case len(line)-len(label) == columns:
				shown += int64(len(label) + len(move))
			default:
				shown += int64(len(label))
			}
		}
		require.Equal(t, whole.Bytes-shown, r.OmittedBytes, "%d columns: %q", columns, r.Output)
		require.LessOrEqual(t, r.OmittedBytes, fromCursor.Bytes, "read_output from the cursor reads them")
	}
}
