package shellsession

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// row is one behaviour: setup commands, then cmd, with what it must print,
// exit with and leave as the cwd. per overrides the expectation for shells
// that truly differ (the README's shell matrix says why).
type row struct {
	name   string
	setup  []string
	cmd    string
	stdout string
	stderr string // exact unless stderrHas is set
	has    string // stderr must contain this instead
	exit   int
	cwd    string // "" means not checked; "$T" is the test's temp dir
	per    map[string]want
}

type want struct {
	stdout, stderr, has *string
	exit                *int
}

func str(s string) *string { return &s }

// zshParse is the expectation for zsh, whose parse errors read differently.
func zshParse(has string) map[string]want { return map[string]want{"zsh": {has: &has}} }
func num(n int) *int                      { return &n }

var rows = []row{
	// 1-3: serial commands, state carries over, exit codes and cwd.
	{name: "echo", cmd: "echo hello", stdout: "hello\n"},
	{name: "no trailing newline", cmd: "printf abc", stdout: "abc"},
	{name: "exit code", cmd: "false", exit: 1},
	{name: "exit code 42", cmd: "(exit 42)", exit: 42},
	{name: "status carries over", setup: []string{"(exit 7)"}, cmd: "echo $?", stdout: "7\n"},
	{name: "status 1 carries over", setup: []string{"false"}, cmd: "echo $?", stdout: "1\n"},
	{name: "cd carries over", setup: []string{"cd $T"}, cmd: "pwd", stdout: "$T\n", cwd: "$T"},
	{name: "cwd after cd", cmd: "cd $T/sub", cwd: "$T/sub"},
	{name: "cwd with blanks and non-ASCII", cmd: "mkdir -p \"$T/a b/é\" && cd \"$T/a b/é\"", cwd: "$T/a b/é"},
	{name: "export carries over", setup: []string{"export FOO=bar"}, cmd: "sh -c 'echo $FOO'", stdout: "bar\n"},
	{name: "variable carries over", setup: []string{"x=5"}, cmd: "echo $x", stdout: "5\n"},
	{name: "function carries over", setup: []string{"f() { echo in-f \"$@\"; }"}, cmd: "f a b", stdout: "in-f a b\n"},
	{name: "alias carries over", setup: []string{"alias hi='echo aliased'"}, cmd: "hi", stdout: "aliased\n"},
	{name: "umask carries over", setup: []string{"umask 027"}, cmd: "umask", stdout: "0027\n",
		per: map[string]want{"zsh": {stdout: str("027\n")}, "mksh": {stdout: str("027\n")}, "busybox": {stdout: str("0027\n")}, "ksh": {stdout: str("0027\n")}}},
	{name: "set -o carries over", setup: []string{"set -o noglob"}, cmd: "echo /*", stdout: "/*\n"},
	{name: "trap carries over", setup: []string{"trap 'echo bye' USR1"}, cmd: "kill -USR1 $$", stdout: "bye\n"},
	{name: "declare carries over", setup: []string{"declare -i n=5"}, cmd: "n=n+1; echo $n", stdout: "6\n",
		// declare is bash's and zsh's; the ksh family says typeset; dash and busybox have neither.
		per: map[string]want{"dash": {stdout: str("n+1\n"), stderr: str("")}, "busybox": {stdout: str("n+1\n"), stderr: str("")}, "mksh": {stdout: str("n+1\n"), stderr: str("")}, "ksh": {stdout: str("n+1\n"), stderr: str("")}}},
	{name: "typeset carries over", setup: []string{"typeset -i n=5"}, cmd: "n=n+1; echo $n", stdout: "6\n",
		per: map[string]want{"dash": {stdout: str("n+1\n"), stderr: str("")}, "busybox": {stdout: str("n+1\n"), stderr: str("")}}},
	{name: "shell options carry over", setup: []string{"set -o noclobber", "echo a >$T/f"}, cmd: "echo b >$T/f", exit: 1, has: "f",
		per: map[string]want{"dash": {exit: num(2)}, "busybox": {exit: num(1)}}},
	{name: "ulimit carries over", setup: []string{"ulimit -n 512"}, cmd: "ulimit -n", stdout: "512\n"},

	// 4: exact attribution, no engine line leaks.
	{name: "stderr", cmd: "echo oops >&2", stderr: "oops\n"},
	{name: "interleaved", cmd: "echo a; echo b >&2; echo c", stdout: "a\nc\n", stderr: "b\n"},
	{name: "set -x traces only the command", setup: []string{"set -x"}, cmd: "echo traced", stdout: "traced\n", stderr: "+ echo traced\n",
		// zsh's PS4 names the command's file; mksh traces to the stderr it had at set -x (see README).
		per: map[string]want{"bash": {stderr: str("++ echo traced\n")}, "zsh": {has: str("/cmd:1> echo traced\n")}, "mksh": {stderr: str("")}}},
	{name: "set -v echoes only the command", setup: []string{"set -v"}, cmd: "echo v", stdout: "v\n", stderr: "echo v",
		// bash ends the echoed line with a newline; mksh echoes the one its command file ends with.
		per: map[string]want{"bash": {stderr: str("echo v\n")}, "mksh": {stderr: str("echo v\n")}}},
	{name: "PS4 change", setup: []string{"PS4='>> '", "set -x"}, cmd: "true", stderr: ">> true\n",
		per: map[string]want{"bash": {stderr: str(">>> true\n")}, "mksh": {stderr: str("")}}},
	{name: "DEBUG trap and PROMPT_COMMAND", setup: []string{"trap 'echo dbg' DEBUG 2>/dev/null || true", "PROMPT_COMMAND='echo pc'"}, cmd: "echo x", stdout: "dbg\nx\n",
		per: map[string]want{"bash": {stdout: str("x\n")}, "dash": {stdout: str("x\n")}, "busybox": {stdout: str("x\n")}, "mksh": {stdout: str("x\n")}, "ksh": {stdout: str("dbg\ndbg\nx\n")}, "zsh": {stdout: str("dbg\nx\n")}}},
	{name: "set -x and set -v", setup: []string{"set -x", "set -v"}, cmd: "echo xv", stdout: "xv\n", stderr: "echo xv+ echo xv\n",
		// zsh with both: traces go to the shell's own stderr (see README).
		per: map[string]want{"bash": {stderr: str("echo xv\n++ echo xv\n")}, "zsh": {stderr: str("echo xv")}, "mksh": {stderr: str("echo xv\n")}}},
	{name: "set +x after set -x", setup: []string{"set -x", "set +x"}, cmd: "echo plain", stdout: "plain\n"},
	{name: "PS1 change", setup: []string{"PS1='prompt$ '"}, cmd: "echo p", stdout: "p\n"},
	{name: "output imitating a marker", cmd: `printf '\036CONCH0123456789abcdef01234567 0 /\000'; echo after`, stdout: "\x1eCONCH0123456789abcdef01234567 0 /\x00after\n"},
	{name: "binary output", cmd: `printf '\377\376\001'`, stdout: "\xff\xfe\x01"},

	// 5: stdin closed.
	{name: "stdin closed", cmd: "cat; echo done", stdout: "done\n"},
	{name: "read gets eof", cmd: "read x; echo $?", stdout: "1\n"},

	// 6: any text is safe.
	{name: "unclosed quote", cmd: "echo 'x", exit: 2, has: "syntax error", per: zshParse("unmatched")},
	{name: "if without fi", cmd: "if true; then echo x", exit: 2, has: "syntax error", per: zshParse("parse error")},
	{name: "heredoc without end", cmd: "cat <<EOF\nx", exit: 2, has: "syntax error",
		// ksh -n and zsh -n accept it: like ksh -c and zsh -c, they end the here-document at the end of the text.
		per: map[string]want{"ksh": {exit: num(0), stdout: str("x"), stderr: str("")}, "zsh": {exit: num(0), stdout: str("x"), stderr: str("")}}},
	{name: "lone ;;", cmd: ";;", exit: 2, has: "syntax error", per: zshParse("parse error")},
	{name: "unclosed quote leaves the session unharmed", setup: []string{"x=1", "echo 'x"}, cmd: "echo $x", stdout: "1\n"},
	{name: "syntax error sets $?", setup: []string{"echo 'x"}, cmd: "echo $?", stdout: "2\n"},
	{name: "heredoc", cmd: "cat <<EOF\nline1\n}\nEOF", stdout: "line1\n}\n"},
	{name: "heredoc at end without newline", cmd: "cat <<'EOF'\n$HOME\nEOF", stdout: "$HOME\n"},
	{name: "multi-line script", cmd: "for i in 1 2 3; do\n  echo $i\ndone", stdout: "1\n2\n3\n"},
	{name: "trailing comment", cmd: "echo x # comment", stdout: "x\n"},
	{name: "trailing backslash", cmd: `echo a \`, stdout: "a \\\n",
		per: map[string]want{"zsh": {stdout: str("a \n")}, "mksh": {stdout: str("a\n")}}},
	{name: "close brace as argument", cmd: "echo }", stdout: "}\n",
		// zsh takes a lone } as the end of a block even as an argument.
		per: map[string]want{"zsh": {stdout: str(""), has: str("parse error"), exit: num(2)}}},
	{name: "empty", cmd: "", exit: 0},
	{name: "blanks and comments", cmd: "  \n# nothing\n", exit: 0},
	{name: "empty keeps $?", setup: []string{"false", ""}, cmd: "echo $?", stdout: "0\n"},

	// 9, 11: set -e and set -u.
	{name: "set -u fails the command only", setup: []string{"set -u"}, cmd: "echo $nope", exit: 1, has: "nope",
		per: map[string]want{"dash": {exit: num(2)}, "busybox": {exit: num(2)}, "zsh": {exit: num(126)}}},
	// zsh's . reports 126 for a sourced file an error aborted, where zsh -c gives 1.
	{name: "no glob match", cmd: "echo /nonexistent-dir/*.none", stdout: "/nonexistent-dir/*.none\n",
		per: map[string]want{"zsh": {stdout: str(""), has: str("no matches found"), exit: num(126)}}},
	{name: "set -u then a good command", setup: []string{"set -u", "echo $nope"}, cmd: "echo fine", stdout: "fine\n"},
	{name: "set -e with a status restore", setup: []string{"set -e", "(exit 3) || true"}, cmd: "echo alive", stdout: "alive\n"},

	// 12: permanent redirections do not blind the engine.
	{name: "exec >file", cmd: "exec >$T/out; echo hidden; echo shown >&2", stderr: "shown\n"},
	{name: "exec 2>&1", cmd: "exec 2>&1; echo e >&2", stdout: "e\n"},
	{name: "closed stdout", cmd: "exec >&-; echo still", exit: 1, has: ""},
	{name: "after exec >file", setup: []string{"exec >$T/out2"}, cmd: "echo visible", stdout: "visible\n"},

	// 13: background jobs, SIGPIPE.
	{name: "background job does not delay", cmd: "sleep 30 & echo started", stdout: "started\n",
		// Interactive mksh and ksh93 announce jobs on stderr even in a sourced file.
		per: map[string]want{"mksh": {has: str("[1] ")}, "ksh": {has: str("[1]\t")}}},
	{name: "background output is not attributed later", setup: []string{"(sleep 0.3; echo late) &"}, cmd: "sleep 0.6; echo mine", stdout: "mine\n"},
	{name: "yes | head is quiet", cmd: "yes | head -1", stdout: "y\n",
		// ksh93 makes pipelines of socketpairs: the writer gets ECONNRESET, not SIGPIPE.
		// Which the writer sees first is a race; stdout is exact either way.
		per: map[string]want{"ksh": {has: str("")}}},
	{name: "cwd removed", setup: []string{"mkdir $T/gone", "cd $T/gone", "rmdir $T/gone"}, cmd: "echo ok", stdout: "ok\n"},
}

// TestBehaviour runs every row on every shell.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			for _, r := range rows {
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					runRow(t, shell, r)
				})
			}
		})
	}
}

func runRow(t *testing.T, shell string, r row) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	sub := func(s string) string { return strings.ReplaceAll(s, "$T", dir) }
	s := newSession(t, Options{Shell: shell, Cwd: dir})
	for _, c := range r.setup {
		run(t, s, CommandOptions{Cmd: sub(c)})
	}
	res, stdout, stderr := run(t, s, CommandOptions{Cmd: sub(r.cmd)})
	w := want{stdout: &r.stdout, exit: &r.exit}
	if r.has != "" || r.name == "closed stdout" {
		w.has = &r.has
	} else {
		w.stderr = &r.stderr
	}
	if p, ok := r.per[shell]; ok {
		if p.stdout != nil {
			w.stdout = p.stdout
		}
		if p.stderr != nil {
			w.stderr, w.has = p.stderr, nil
		}
		if p.has != nil {
			w.has, w.stderr = p.has, nil
		}
		if p.exit != nil {
			w.exit = p.exit
		}
	}
	require.Equal(t, process.Exited, res.Reason, "reason (stderr %q)", stderr)
	require.Equal(t, sub(*w.stdout), stdout, "stdout")
	if w.stderr != nil {
		require.Equal(t, sub(*w.stderr), stderr, "stderr")
	} else {
		require.Contains(t, stderr, *w.has, "stderr")
	}
	if r.name != "closed stdout" {
		require.Equal(t, *w.exit, code(res), "exit code (stderr %q)", stderr)
	}
	if r.cwd != "" {
		require.Equal(t, sub(r.cwd), s.Cwd(), "cwd")
	}
	// The session is unharmed: one more command runs and reports.
	res, stdout, _ = run(t, s, CommandOptions{Cmd: "echo still-alive"})
	require.True(t, strings.HasSuffix(stdout, "still-alive\n"), fmt.Sprintf("%+v %q", res, stdout))
}
