package shellsession

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/shells"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestCheckLargeText checks that text too large or too deeply nested for the
// in-process parser is judged by the shell's own -n check: valid text runs,
// invalid text gets the shell's message.
func TestCheckLargeText(t *testing.T) {
	t.Parallel()
	words := "echo " + strings.Repeat("a ", parserMax)
	deep := strings.Repeat("(", 2*parserDepth) + "true" + strings.Repeat(")", 2*parserDepth)
	tests := []struct {
		shell, text, err string
	}{
		{"bash", words, ""},
		{"bash", words + "'", "bash: line 1: unexpected EOF"},
		{"bash", deep, ""},
		{"bash", deep + ")", "syntax error"},
		{"dash", words + `"`, "Unterminated quoted string"},
		{"mksh", deep, ""},
	}
	for _, tt := range tests {
		sh, err := shells.Resolve(tt.shell)
		if err != nil {
			t.Fatal(err)
		}
		r := check(t.Context(), sh, newParser(sh), tt.text)
		if tt.err == "" && r.err != "" || !strings.Contains(r.err, tt.err) || r.empty || strings.Contains(r.err, "conch-check") {
			t.Errorf("%s, %d bytes: %+v, want an error with %q", tt.shell, len(tt.text), r, tt.err)
		}
	}
}

// TestParseMessageNamesTheText: the parser's message for a function's
// declaration left unclosed names the word the text has: code of another
// language sent to a shell (print(x + 1)) was told of a "foo(" it does not
// hold.
func TestParseMessageNamesTheText(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"bash", "dash", "mksh"} {
		sh, err := shells.Resolve(name)
		require.NoError(t, err)
		for text, want := range map[string]string{
			"print(x + 1)":      name + ": line 1: syntax error: `print(` must be followed by `)`",
			"console.log('hi')": name + ": line 1: syntax error: `console.log(` must be followed by `)`",
		} {
			r := check(t.Context(), sh, newParser(sh), text)
			require.Equal(t, want, r.err, "%s: %q", name, text)
		}
	}
	sh, err := shells.Resolve("bash")
	require.NoError(t, err)
	for text, want := range map[string]string{
		"import os\nos.getcwd( )": "bash: line 2: syntax error: `os.getcwd()` must be followed by a statement",
		"function f(":             "bash: line 1: syntax error: `function f(` must be followed by `)`",
	} {
		r := check(t.Context(), sh, newParser(sh), text)
		require.Equal(t, want, r.err, "%q", text)
	}
}

// TestShellCheckTextLikeAnOption: the shell's own -n check takes a text
// that begins with "-" as text, not as an option of the shell's: "-x; echo
// after" parses on every shell, where `zsh -n -c '-x; echo after'` said "bad
// option" and the command was refused as a syntax error.
func TestShellCheckTextLikeAnOption(t *testing.T) {
	t.Parallel()
	for _, name := range testShells {
		sh, err := shells.Resolve(name)
		require.NoError(t, err)
		msg, ok := shellCheck(t.Context(), sh, "-x; echo after")
		require.True(t, ok, "%s: %s", name, msg)
	}
}

// TestCheckLargeTextNoTmpdir: the shell's check of a long text needs no
// temporary directory. It wrote the text to a file in $TMPDIR, and with
// that removed every command over 64 KiB was refused ("the syntax check of
// this 70023-byte command could not run"). Not parallel: it sets TMPDIR.
func TestCheckLargeTextNoTmpdir(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "removed"))
	words := "echo " + strings.Repeat("a ", parserMax)
	for _, shell := range testShells {
		sh, err := shells.Resolve(shell)
		require.NoError(t, err)
		r := check(t.Context(), sh, newParser(sh), words)
		require.Empty(t, r.err, shell)
		r = check(t.Context(), sh, newParser(sh), words+"; fi")
		require.NotEmpty(t, r.err, shell)
		require.NotContains(t, r.err, "could not run", shell)
		require.NotContains(t, r.err, "/dev/fd", shell)
	}
}

// TestCheckMemory pins what a check costs the engine: about the text, for
// text whose syntax tree or nesting would cost the in-process parser 50 to
// 5000 times as much (the parser's stack counts: it shows in the peak RSS).
// It measures the whole process, so it does not run in parallel.
func TestCheckMemory(t *testing.T) {
	sh, err := shells.Resolve("bash")
	if err != nil {
		t.Fatal(err)
	}
	p := newParser(sh)
	for _, text := range []string{
		"echo " + strings.Repeat("a ", 256<<10),
		strings.Repeat("(", 32<<10) + "true" + strings.Repeat(")", 32<<10),
		strings.Repeat("a=1; ", 64<<10),
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rss := statusKiB(t, "VmRSS")
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Skipf("cannot reset the peak RSS: %v", err)
		}
		r := check(t.Context(), sh, p, text)
		peak := statusKiB(t, "VmHWM") - rss
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		if r.err != "" || allocated > uint64(len(text))+256<<10 || peak > 8<<10 {
			t.Errorf("%.20q..., %d bytes: %+v, %d bytes allocated, peak RSS growth %d KiB", text, len(text), r, allocated, peak)
		}
	}
}

// statusKiB reads a field in kB of /proc/self/status.
func statusKiB(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// Plain commands skip the parser: every shell's check passes them, and the
// texts the parser is there for are not plain.
func TestPlainCommands(t *testing.T) {
	t.Parallel()
	plain := []string{"true", "ls -la", "git status", "make -C src test", "a=1 b=2 env", "cd /tmp", "x+=1", "%1", "echo a,b @c 1:2", "=true"}
	// Every pair of these words is plain, or left to the parser.
	tokens := []string{"a=b", "=", "-", "+", "%", "@", ".", ":", "a+=b", "1=2", "-x", "--", "%1", "x=", "=x", "a.b=c", "_", "a,b", "1a=2", "in", "time", "end", "true"}
	for _, a := range tokens {
		for _, b := range tokens {
			if text := a + " " + b; plainCommand(text) {
				plain = append(plain, text)
			}
		}
	}
	notPlain := []string{"", "  ", "echo 'a b'", "a | b", "a; b", "echo $x", "fi", "done", "if", "echo hi # c", "let 1+", "a\nb", "f() { :; }", "echo *", "[[ x ]]", "select", "function", "echo ~"}
	for _, text := range plain {
		if !plainCommand(text) {
			t.Errorf("%q is not plain", text)
		}
	}
	for _, text := range notPlain {
		if plainCommand(text) {
			t.Errorf("%q is plain", text)
		}
	}
	for _, name := range testShells {
		sh, err := shells.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		p := newParser(sh)
		for _, text := range plain {
			if r := check(t.Context(), sh, p, text); r.err != "" || r.empty {
				t.Errorf("%s: plain %q: %+v", name, text, r)
			}
		}
	}
}

// TestKshHeredocNotUTF8: ksh93, in a UTF-8 locale, loops for ever on a
// here-document that holds bytes that are not UTF-8 (closed or not), deaf
// to interrupts; such a command is refused, as text that does not parse
// is, rather than sent to hang the session until its timeout kills it.
// Bytes that are not UTF-8 elsewhere run as usual.
func TestKshHeredocNotUTF8(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "ksh", Cwd: t.TempDir()})
	long := "cat <<0\nx\xff\n0\n#" + strings.Repeat("x", parserMax) // checked by ksh93 -n, not the parser
	for _, text := range []string{"cat <<0\nx\xff\n0", "cat <<'E'\na\xe2\x82\nE\necho after", "<<0\n00\xff\xff000", long} {
		c, err := s.Submit(CommandOptions{Cmd: text, ExecutionTimeout: 2 * time.Second})
		require.NoError(t, err)
		r := wait(t, c)
		require.Equal(t, 2, code(r), "%.40q: %+v", text, r)
		_, stderr := output(c)
		require.Contains(t, stderr, "not UTF-8", "%.40q", text)
	}
	expectRun(t, s, "echo \xff; cat <<0\nok\n0\necho \xfe", 0, "\xff\nok\n\xfe\n")
}

// TestBashRefusesWhatTheParserTakes: text the parser takes and bash refuses
// when it reads it — an extended glob with extglob off, a group with no
// command in it — ends the command with exit code 2 and bash's message,
// as any syntax error does, and nothing of the frame's: it was reported
// failed, bash's message quoting the command file's path and the guard's
// words. With extglob on (an earlier command's shopt), the glob runs.
func TestBashRefusesWhatTheParserTakes(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash", Cwd: t.TempDir()})
	for _, cmd := range []string{"echo @(a|b)", "rm -rf !(keep)", "f() {}", "{ # nothing\n}", "echo before; ls ?(a|b)"} {
		r, out, errOut := run(t, s, CommandOptions{Cmd: cmd})
		require.Equal(t, process.Exited, r.Reason, "%q: %+v, stderr %q", cmd, r, errOut)
		require.Equal(t, 2, code(r), "%q: stderr %q", cmd, errOut)
		require.Contains(t, errOut, "syntax error", cmd)
		require.NotContains(t, errOut, "conch", cmd)
		require.Empty(t, out, "%q: nothing of it ran", cmd)
	}
	expectRun(t, s, "shopt -s extglob; touch a b c", 0, "")
	expectRun(t, s, "echo @(a|b)", 0, "a b\n")
	expectRun(t, s, "echo !(a|b)", 0, "c\n")
	expectRun(t, s, "echo $?; f() { echo f; }; f", 0, "0\nf\n")
}

// TestBashRunsWhatTheParserRefuses: text bash runs, which the parser
// refuses since it checks more before the text runs than bash does, runs:
// it was refused with exit code 2 and nothing of it run.
func TestBashRunsWhatTheParserRefuses(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash"})
	expectRun(t, s, "echo $(( ))", 0, "0\n")
	expectRun(t, s, "! ! true", 0, "")
	expectRun(t, s, "if false; then echo $((1+)); fi; echo ran", 0, "ran\n")
	expectRun(t, s, "true || let x=1+; echo ran", 0, "ran\n")
	expectRun(t, s, "cat <<EOF\nbody", 0, "body\n")
	// What bash refuses is still refused, in bash's words.
	r, out, errOut := run(t, s, CommandOptions{Cmd: "echo ok; if true; then"})
	require.Equal(t, 2, code(r), "%+v", r)
	require.Empty(t, out)
	require.Contains(t, errOut, "bash: ")
	require.Contains(t, errOut, "syntax error")
}
