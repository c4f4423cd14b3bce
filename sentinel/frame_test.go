package sentinel

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/racetest"
)

// TestEndLineOncePerNonce runs end lines in real shells: a command's end
// line writes its stdout marker once however often it runs, and nothing on
// stderr; one run late — after the next command's frame set the guard —
// writes nothing, no Failed marker either, and leaves the next command's
// end line its marker.
func TestEndLineOncePerNonce(t *testing.T) {
	t.Parallel()
	printf := Calls{}
	print := Calls{Print: []string{`\builtin print`, `\command print`}}
	for _, tt := range []struct {
		sh    string
		calls Calls
	}{{"sh", printf}, {"bash", printf}, {"zsh", printf}, {"mksh", printf}, {"ksh", printf}, {"mksh", print}} {
		sh, name := tt.sh, tt.sh
		if len(tt.calls.Print) > 0 {
			name += "/print"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A directory whose name printf or print could take for escapes.
			dir := filepath.Join(t.TempDir(), `a\b c%s\0`)
			require.NoError(t, os.Mkdir(dir, 0o700))
			paths := func(name string) Paths {
				p := Paths{Stdout: filepath.Join(dir, name+".out"), Stderr: filepath.Join(dir, name+" err"), Script: "/s", Calls: tt.calls}
				require.NoError(t, os.WriteFile(p.Stdout, nil, 0o600))
				require.NoError(t, os.WriteFile(p.Stderr, nil, 0o600))
				return p
			}
			p1, p2 := paths("first"), paths("second")
			n1, n2 := NewNonce(), NewNonce()
			script := guardVar + "=" + string(n1) + "\n(exit 3)\n" + EndLine(n1, p1) + EndLine(n1, p1) +
				guardVar + "=" + string(n2) + "\n" + EndLine(n1, p1) + "(exit 4)\n" + EndLine(n2, p2)
			shell := exec.CommandContext(t.Context(), sh, "-c", script)
			shell.Dir = dir
			own, err := shell.Output()
			require.NoError(t, err)
			require.Empty(t, string(own), "the shell's own stdout")
			requireMarkers(t, dir, []marked{{p1, n1, "3"}, {p2, n2, "4"}})
		})
	}
}

// TestEndInText runs frames whose text carries their end line in real
// shells: it writes the command's marker with its status, and the end line
// sent again after it writes nothing; cut short before it, the end line
// sent again writes the marker. A command that changed the guard (or whose
// frame could not set it) gets no marker on its stdout: its Failed marker,
// with its status, goes to the shell's own stdout.
func TestEndInText(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"sh", "bash", "zsh", "ksh"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(sh); err != nil {
				t.Skip(sh, " is not installed")
			}
			dir := t.TempDir()
			frame := func(name, cmd string) (Paths, Frame) {
				p := Paths{Stdout: filepath.Join(dir, name+".out"), Stderr: filepath.Join(dir, name+".err"),
					Script: filepath.Join(dir, name+".cmd"), EndInText: true}
				require.NoError(t, os.WriteFile(p.Script, []byte(cmd), 0o600))
				f := New(0, p)
				require.True(t, f.EndInText)
				require.Equal(t, 2, strings.Count(f.Text, "\n"), "the frame's line and its end line: %q", f.Text)
				require.NotContains(t, f.Text, sinkVar, "the end line in the text does not look at the guard")
				return p, f
			}
			p1, f1 := frame("plain", "(exit 3)")
			p2, f2 := frame("guard", guardVar+"=changed; (exit 5)")
			p3, f3 := frame("cut", "(exit 6)")
			cut, _, _ := strings.Cut(f3.Text, "\n")
			// Each end line sent again runs with $? 0: had one written,
			// its marker would say 0.
			script := f1.Text + f1.End + f2.Text + f2.End + f1.End + cut + "\n" + f3.End + f3.End
			shell := exec.CommandContext(t.Context(), sh, "-c", script)
			shell.Dir = dir
			own, err := shell.Output()
			require.NoError(t, err)
			require.Equal(t, string(f2.Failed)+"_5_\x00", string(own), "the shell's own stdout: the Failed marker of the command that changed the guard")
			requireMarkers(t, dir, []marked{{p1, f1.Nonce, "3"}, {p3, f3.Nonce, "6"}})
			out, err := os.ReadFile(p2.Stdout)
			require.NoError(t, err)
			require.Empty(t, string(out), "the stdout of the command that changed the guard")
		})
	}
}

// marked is a command's paths and nonce, and the status its end marker
// says.
type marked struct {
	p      Paths
	n      Nonce
	status string
}

// requireMarkers requires each command's stdout file to hold its end marker
// alone, with its status and the working directory dir, and its stderr
// file nothing.
func requireMarkers(t *testing.T, dir string, ms []marked) {
	t.Helper()
	for _, m := range ms {
		out, _ := os.ReadFile(m.p.Stdout)
		errb, _ := os.ReadFile(m.p.Stderr)
		// The shell's flags ($-) differ from shell to shell.
		require.Regexp(t, "^"+regexp.QuoteMeta(string(m.n.Marker())+"_"+m.status+"_ ")+`\S* `+regexp.QuoteMeta(dir+"\x00")+"$", string(out))
		require.Empty(t, string(errb), "stderr gets no marker")
	}
}

// TestFrameRuns runs a frame's line in real shells for each way it runs the
// command: the text reaches the shell as it was written (quotes, $, a
// backslash, several lines), runs in the shell itself (its assignment
// stays), and its output goes to the command's files.
func TestFrameRuns(t *testing.T) {
	t.Parallel()
	text := "x='it'\\''s $HOME'\necho \"$x\" \\\\ 'a  b'\necho err >&2"
	for _, tt := range []struct {
		sh  string
		run Run
	}{{"sh", RunSource}, {"sh", RunText}, {"bash", RunFile}, {"zsh", RunFile}, {"mksh", RunFile}, {"ksh", RunFile}} {
		t.Run(tt.sh+"/"+strconv.Itoa(int(tt.run)), func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(tt.sh); err != nil {
				t.Skip(tt.sh, " is not installed")
			}
			dir := t.TempDir()
			p := Paths{Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"), Script: filepath.Join(dir, "cmd"), Run: tt.run}
			if tt.run == RunText {
				p.Text = text
			} else {
				require.NoError(t, os.WriteFile(p.Script, []byte(text), 0o600))
			}
			f := New(0, p)
			require.Equal(t, tt.run == RunText, strings.Contains(f.Text, "a  b"), "only RunText carries the text: %s", f.Text)
			own, err := exec.CommandContext(t.Context(), tt.sh, "-c", f.Text+`echo "[$x]"`).Output()
			require.NoError(t, err)
			require.Equal(t, "[it's $HOME]\n", string(own), "the assignment stays in the shell")
			out, _ := os.ReadFile(p.Stdout)
			errb, _ := os.ReadFile(p.Stderr)
			require.Equal(t, "it's $HOME \\ a  b\n", string(out))
			require.Equal(t, "err\n", string(errb))
		})
	}
}

// TestFramesFromFiles runs frames whose text and end lines the shell
// sources from files: each command's markers come once, with its status,
// however often its end line runs; one run late — after the next command's
// frame, its end file removed — writes nothing and leaves the next command
// its markers. The lines the shell reads stay short. Not dash: a "." of a
// file that is gone ends it, interactive or not.
func TestFramesFromFiles(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sh    string
		args  []string
		calls Calls
	}{
		{"bash", []string{"--norc"}, Calls{Source: `\builtin .`, SourceElse: `\.`}},
		{"zsh", []string{"-f"}, Calls{Source: `\builtin .`, SourceElse: `\.`}},
		{"mksh", nil, Calls{Print: []string{`\builtin print`, `\command print`}}},
	} {
		t.Run(tt.sh, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(tt.sh); err != nil {
				t.Skip(tt.sh, " is not installed")
			}
			dir := filepath.Join(t.TempDir(), "a b")
			require.NoError(t, os.Mkdir(dir, 0o700))
			frame := func(name, cmd string) (Paths, Frame) {
				p := Paths{
					Stdout: filepath.Join(dir, name+".out"), Stderr: filepath.Join(dir, name+".err"),
					Script: filepath.Join(dir, name+".cmd"), Calls: tt.calls,
					FrameFile: filepath.Join(dir, name+".f"), EndFile: filepath.Join(dir, name+".e"),
				}
				require.NoError(t, os.WriteFile(p.Script, []byte(cmd), 0o600))
				f := New(0, p)
				require.NoError(t, os.WriteFile(p.FrameFile, []byte(f.FrameText), 0o600))
				require.NoError(t, os.WriteFile(p.EndFile, []byte(f.EndText), 0o600))
				require.Less(t, len(f.Text)+len(f.End), (len(f.FrameText)+len(f.EndText))/2, "the lines the shell reads: %q %q", f.Text, f.End)
				return p, f
			}
			p1, f1 := frame("first", "(exit 3)")
			p2, f2 := frame("second", "(exit 4)")
			script := f1.Text + f1.End + f1.End + "rm " + quote(p1.EndFile) + "\n" + f2.Text + f1.End + "(exit 4)\n" + f2.End
			// Interactive and reading its input, as a session's shell: a
			// "." of a file that is gone fails the line, not the shell.
			shell := exec.CommandContext(t.Context(), tt.sh, append(tt.args, "-i")...)
			shell.Dir = dir
			shell.Env = append(os.Environ(), "ENV=/dev/null", "PS1=", "HISTFILE=/dev/null")
			shell.Stdin = strings.NewReader(script)
			own, _ := shell.Output()
			require.Empty(t, string(own), "the shell's own stdout")
			// The files hold the markers alone: each marker's ">" truncates
			// a regular file (the engine's are FIFOs).
			requireMarkers(t, dir, []marked{{p1, f1.Nonce, "3"}, {p2, f2.Nonce, "4"}})
		})
	}
}

// TestOwnStderr runs frames with OwnStderr in shells whose stdout is
// closed: the start marker and, when a stream cannot be opened, the Failed
// marker with the status come on the shell's stderr, and the command's
// output on its files.
func TestOwnStderr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sh    string
		calls Calls
	}{{"sh", Calls{}}, {"bash", Calls{}}, {"mksh", Calls{Print: []string{`\builtin print`, `\command print`}}}, {"busybox", Calls{}}} {
		t.Run(tt.sh, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(tt.sh); err != nil {
				t.Skip(tt.sh, " is not installed")
			}
			dir := t.TempDir()
			p := Paths{Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"), Script: filepath.Join(dir, "cmd"),
				Announce: true, OwnStderr: true, Calls: tt.calls}
			require.NoError(t, os.WriteFile(p.Script, []byte("echo hi; (exit 3)"), 0o600))
			f := New(0, p)
			// The end line of a command whose stdout cannot be opened.
			gone := p
			gone.Stdout = filepath.Join(dir, "gone", "out")
			stderr := runScript(t, tt.sh, "exec >&-\n"+f.Text+EndLine(f.Nonce, gone))
			out, _ := os.ReadFile(p.Stdout)
			require.Equal(t, "hi\n", string(out))
			require.Contains(t, stderr, string(f.Start))
			require.Contains(t, stderr, string(f.Failed)+"_3_\x00")
		})
	}
}

// TestOwnPath runs frames with OwnPath in shells whose stdout and stderr
// are both closed: the start marker and, when a stream cannot be opened,
// the Failed marker with the status are written by that path, and the
// command's output and errors go to its files. With OwnStderr too, a marker
// whose path cannot be opened goes to the shell's stderr instead.
func TestOwnPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sh    string
		calls Calls
	}{{"sh", Calls{}}, {"bash", Calls{Printf: []string{`\builtin printf`, `\command printf`}}}, {"mksh", Calls{Print: []string{`\builtin print`, `\command print`}}}, {"busybox", Calls{}}} {
		for _, fallback := range []bool{false, true} {
			t.Run(tt.sh+"/"+strconv.FormatBool(fallback), func(t *testing.T) {
				t.Parallel()
				if _, err := exec.LookPath(tt.sh); err != nil {
					t.Skip(tt.sh, " is not installed")
				}
				dir := t.TempDir()
				p := Paths{Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"), Script: filepath.Join(dir, "cmd"),
					Announce: true, OwnPath: filepath.Join(dir, "own"), Calls: tt.calls}
				closed := "exec >&- 2>&-\n"
				if fallback {
					p.OwnPath, p.OwnStderr, closed = filepath.Join(dir, "none", "own"), true, "exec >&-\n"
				}
				require.NoError(t, os.WriteFile(p.Script, []byte("echo hi; echo err >&2; (exit 3)"), 0o600))
				f := New(0, p)
				gone := p
				gone.Stdout = filepath.Join(dir, "gone", "out")
				// The end line of a command whose stdout cannot be opened;
				// own gets the markers alone: each ">" truncates it.
				keep := "s=$?; cat " + p.OwnPath + " >>" + filepath.Join(dir, "start") + "; (exit $s)\n"
				stderr := runScript(t, tt.sh, closed+f.Text+keep+EndLine(f.Nonce, gone))
				out, _ := os.ReadFile(p.Stdout)
				require.Equal(t, "hi\n", string(out))
				errs, _ := os.ReadFile(p.Stderr)
				require.Equal(t, "err\n", string(errs))
				own, _ := os.ReadFile(p.OwnPath)
				if fallback {
					require.Contains(t, stderr, string(f.Start))
					require.Contains(t, stderr, string(f.Failed)+"_3_\x00")
					return
				}
				start, _ := os.ReadFile(filepath.Join(dir, "start"))
				require.Equal(t, string(f.Start), string(start))
				require.Equal(t, string(f.Failed)+"_3_\x00", string(own))
				require.Empty(t, stderr)
			})
		}
	}
}

// TestOwnElse runs frames with OwnElse in shells that lost their own stdout
// and stderr: where no function can take exec (the default calls), the
// first marker that cannot be written puts the stream back by that path
// (the marker is lost) and the next frame's markers go there; with bash's
// calls, each marker is written by the path. The command's output stays
// its own.
func TestOwnElse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sh     string
		stderr bool
		calls  Calls
	}{
		{"sh", false, Calls{}}, {"sh", true, Calls{}}, {"busybox", true, Calls{}},
		{"ksh", false, Calls{Printf: []string{`\command printf`, `\printf`}}},
		{"bash", false, Calls{Printf: []string{`\builtin printf`, `\command printf`}, Exit: `\builtin exit`}},
	} {
		t.Run(tt.sh+"/stderr "+strconv.FormatBool(tt.stderr), func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(tt.sh); err != nil {
				t.Skip(tt.sh, " is not installed")
			}
			dir := t.TempDir()
			p := Paths{Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"), Script: filepath.Join(dir, "cmd"),
				Announce: true, OwnStderr: tt.stderr, OwnElse: filepath.Join(dir, "own"), Calls: tt.calls}
			require.NoError(t, os.WriteFile(p.Script, []byte("echo hi; (exit 3)"), 0o600))
			first, second := New(0, p), New(0, p)
			gone := p
			gone.Stdout = filepath.Join(dir, "gone", "out")
			// Each end line is of a command whose stdout cannot be opened:
			// its Failed marker goes where the start's went.
			runScript(t, tt.sh, "exec >&- 2>&-\n"+first.Text+EndLine(first.Nonce, gone)+second.Text+EndLine(second.Nonce, gone))
			out, _ := os.ReadFile(p.Stdout)
			require.Equal(t, "hi\n", string(out))
			own, _ := os.ReadFile(p.OwnElse)
			if tt.calls.Exit != "" { // by path, each one truncating the file
				require.Equal(t, string(second.Failed)+"_3_\x00", string(own))
				return
			}
			require.Contains(t, string(own), string(first.Failed)+"_3_\x00")
			require.Contains(t, string(own), string(second.Start))
			require.Contains(t, string(own), string(second.Failed)+"_3_\x00")
		})
	}
}

// A Template's frame is New's, nonce for nonce, for every way of framing a
// template serves, and costs a handful of allocations where New's cost
// dozens.
func TestTemplate(t *testing.T) {
	calls := []Calls{
		{},
		{Printf: []string{`\builtin printf`, `\command printf`}, Source: `\builtin .`, Exit: `\builtin exit`, Eval: `\builtin eval`, SourceElse: `\.`},
		{Print: []string{`\builtin print`, `\command print`}},
	}
	for _, c := range calls {
		for _, run := range []Run{RunSource, RunFile} {
			for _, prev := range []int{0, 1, 2, 130} {
				for _, p := range []Paths{
					{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", Calls: c, Run: run},
					{Stdin: "/tmp/in put/3.i", Stdout: "/tmp/o'ut", Stderr: "/tmp/err", Script: "/tmp/s", Calls: c, Run: run,
						Announce: true, OwnStderr: true, Before: "set +x"},
					{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", Calls: c, Run: run, EndInText: true},
					{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", Calls: c, Run: run, EndInText: true,
						GuardInScript: true, OwnPath: "/proc/1/fd/7"},
					{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", Calls: c, Run: run,
						Announce: true, OwnStderr: true, OwnPath: "/proc/1/fd/7"},
				} {
					require.True(t, Templated(p))
					n := NewNonce()
					require.Equal(t, build(n, prev, p), NewTemplate(prev, p).with([]byte(n)), "%+v after %d", p, prev)
				}
			}
		}
	}
	require.False(t, Templated(Paths{Run: RunText}))
	require.False(t, Templated(Paths{EndFile: "/tmp/e1"}))

	p := Paths{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", Calls: calls[1], Run: RunFile}
	tmpl := NewTemplate(0, p)
	framed := testing.AllocsPerRun(100, func() { tmpl.Frame() })
	built := testing.AllocsPerRun(100, func() { New(0, p) })
	t.Logf("allocations per frame: %v from a template, %v built", framed, built)
	want := 1.0 // one allocation holds the nonce, texts and markers
	if racetest.Enabled {
		want = 2 // the race detector's own
	}
	require.Equal(t, want, framed)
}

// The frames of a template, whose nonce, texts and markers share one
// allocation, are each whole and each their own.
func TestTemplateFramesShareNothing(t *testing.T) {
	tpl := NewTemplate(0, Paths{Stdout: "/dev/shm/conch-1/1", Stderr: "/dev/shm/conch-1/2", Script: "/dev/shm/conch-1/cmd", EndInText: true})
	f := tpl.Frame()
	require.NotContains(t, f.Text+f.End, standIn)
	require.Equal(t, []byte("\x1eS"+string(f.Nonce)), f.Start)
	require.Equal(t, []byte("\x1eF"+string(f.Nonce)), f.Failed)
	require.Len(t, string(f.Nonce), len(standIn))
	text, end, start := f.Text, f.End, string(f.Start)
	g := tpl.Frame()
	require.NotEqual(t, f.Nonce, g.Nonce)
	require.Equal(t, strings.ReplaceAll(g.Text, string(g.Nonce), string(f.Nonce)), f.Text)
	require.Equal(t, []string{text, end, start}, []string{f.Text, f.End, string(f.Start)}, "a later frame changed an earlier one")
}

// TestGuardInScript runs a frame whose guard and $? the script sets, on
// bash: a script that runs sets the guard to the nonce and sees the
// previous status; a "." that cannot run it (the script is gone) leaves
// the guard as it was, so that the end line writes the Failed marker.
func TestGuardInScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := Paths{Stdout: filepath.Join(dir, "out"), Stderr: filepath.Join(dir, "err"), Script: filepath.Join(dir, "cmd"),
		GuardInScript: true, EndInText: true, OwnStderr: true}
	f := New(3, p)
	require.NotContains(t, f.Text, guardVar+"="+string(f.Nonce), "the frame's line sets the guard")
	script := string(f.AppendHead(nil)) + `(exit $?)` // the end marker's status is $? as the script found it
	require.True(t, strings.HasPrefix(script, guardVar+"="+string(f.Nonce)+"; "), script)
	require.NoError(t, os.WriteFile(p.Script, []byte(script), 0o600))
	out, err := exec.CommandContext(t.Context(), "bash", "-c", guardVar+"=-\n"+f.Text).CombinedOutput()
	require.NoError(t, err, "%s", out)
	stdout, _ := os.ReadFile(p.Stdout)
	require.True(t, strings.HasPrefix(string(stdout), "\x1eCONCH"+string(f.Nonce)+"_3_ "), "%q", stdout)

	require.NoError(t, os.Remove(p.Script))
	require.NoError(t, os.Remove(p.Stdout))
	f = New(0, p)
	out, _ = exec.CommandContext(t.Context(), "bash", "-c", guardVar+"=-\n"+f.Text).CombinedOutput()
	require.Contains(t, string(out), "\x1eF"+string(f.Nonce), "no Failed marker when the script did not run")
}

// runScript runs script with sh -c (busybox: its sh), wants it to exit 0,
// and returns what it wrote to its stderr.
func runScript(t *testing.T, sh, script string) string {
	t.Helper()
	args := []string{"-c", script}
	if sh == "busybox" {
		args = append([]string{"sh"}, args...)
	}
	cmd := exec.CommandContext(t.Context(), sh, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run())
	return stderr.String()
}

// TestErrexitFrames runs frames under set -e in real shells: the frame
// after a command that exited with a status other than 0 and 1 gives $?
// that status by its status file, and the shell goes on (dash and busybox
// sh ended on the file's plain return); a plain failure still ends it.
func TestErrexitFrames(t *testing.T) {
	t.Parallel()
	for _, sh := range [][]string{{"dash"}, {"bash"}, {"zsh"}, {"mksh"}, {"ksh"}, {"busybox", "sh"}} {
		t.Run(sh[0], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			frame := func(name string, prev int, text string) (Paths, Frame) {
				p := Paths{Stdout: filepath.Join(dir, name+".out"), Stderr: filepath.Join(dir, name+".err"),
					Script: filepath.Join(dir, name+".cmd")}
				if prev != 0 && prev != 1 {
					p.StatusFile = filepath.Join(dir, name+".status")
				}
				require.NoError(t, os.WriteFile(p.Script, []byte(text+"\n"), 0o600))
				f := New(prev, p)
				if p.StatusFile != "" {
					require.NoError(t, os.WriteFile(p.StatusFile, []byte(f.StatusText), 0o600))
				}
				return p, f
			}
			// It ends with 0 only if $? was 2 as the text began (else
			// the shell, under set -e).
			p1, f1 := frame("after", 2, "[ $? = 2 ]")
			_, f2 := frame("plain", 3, "false")
			script := "set -e\n" + f1.Text + f1.End + "\\command \\printf alive\n" + f2.Text + f2.End +
				"\\command \\printf never\n"
			shell := exec.CommandContext(t.Context(), sh[0], append(sh[1:], "-c", script)...)
			shell.Dir = dir
			own, err := shell.Output()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "the plain failure ends the shell; it said %q", own)
			require.Equal(t, 1, ee.ExitCode())
			require.Equal(t, "alive", string(own), "the shell's own stdout")
			requireMarkers(t, dir, []marked{{p1, f1.Nonce, "0"}})
		})
	}
}
