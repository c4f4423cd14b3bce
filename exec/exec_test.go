package exec

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

func TestResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   Options
		want   process.Result
		stdout string // wanted exactly, when set
		stderr string // wanted as a substring, when set
	}{
		{name: "exit-3", opts: Options{Cmd: "exit 3"}, want: process.ExitedWith(3)},
		{name: "exit-0", opts: Options{Cmd: "true"}, want: process.ExitedWith(0)},
		{name: "missing-program-under-shell", opts: Options{Cmd: "no-such-program-4f2a"},
			want: process.ExitedWith(127), stderr: "no-such-program-4f2a: command not found"},
		{name: "argv", opts: Options{Argv: []string{"sh", "-c", "echo $0 $1; exit 5", "a b"}},
			want: process.ExitedWith(5), stdout: "a b\n"},
		{name: "argv-no-shell", opts: Options{Argv: []string{"echo", "$HOME", "*"}},
			want: process.ExitedWith(0), stdout: "$HOME *\n"},
		{name: "missing-program-argv", opts: Options{Argv: []string{"no-such-program-4f2a"}},
			want: process.Result{Reason: process.Failed, Error: `exec "no-such-program-4f2a": executable file not found in $PATH`}},
		{name: "argv-not-executable", opts: Options{Argv: []string{"/etc/passwd"}},
			want: process.Result{Reason: process.Failed, Error: `exec "/etc/passwd": /etc/passwd: permission denied`}},
		{name: "signal-in-wait-status", opts: Options{Cmd: "kill -USR1 $$"},
			want: process.Result{Reason: process.Signaled, Signal: "USR1", ExitCode: code(138)}},
		{name: "stdout-and-stderr", opts: Options{Cmd: "echo out; echo err >&2"},
			want: process.ExitedWith(0), stdout: "out\n", stderr: "err\n"},
		{name: "no-trailing-newline", opts: Options{Cmd: "printf abc"}, want: process.ExitedWith(0), stdout: "abc"},
		{name: "shell-dash", opts: Options{Cmd: `[ -z "$BASH_VERSION" ] && echo not-bash`, Shell: "dash"},
			want: process.ExitedWith(0), stdout: "not-bash\n"},
		{name: "not-login-shell", opts: Options{Cmd: "shopt -q login_shell || echo plain"},
			want: process.ExitedWith(0), stdout: "plain\n"},
		{name: "env-and-no-token", opts: Options{Cmd: `echo "$FOO ${CONCH_TOKEN-unset}"`, Env: map[string]string{"FOO": "bar"}},
			want: process.ExitedWith(0), stdout: "bar unset\n"},
		{name: "env-path-used-for-argv", opts: Options{Argv: []string{"sh", "-c", "echo ok"}, Env: map[string]string{"PATH": "/nonexistent"}},
			want: process.Result{Reason: process.Failed, Error: `exec "sh": executable file not found in $PATH`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, tc.opts)
			got := wait(t, p)
			if !sameResult(got, tc.want) {
				t.Errorf("result %s, want %s (output %q)", show(got), show(tc.want), logText(p.Log(), 0))
			}
			if out := logText(p.Log(), logstore.Stdout); tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			if errOut := logText(p.Log(), logstore.Stderr); !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr %q, want it to hold %q", errOut, tc.stderr)
			}
			if info := p.Info(); info.State != process.Terminal || info.ExitedAt.IsZero() {
				t.Errorf("info after the end: state %s, exitedAt %v", info.State, info.ExitedAt)
			}
		})
	}
}

// TestLoginShell: a login shell reads the profile of its HOME. The test
// gives it a HOME of its own, so the tester's profile never runs.
func TestLoginShell(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("FROM_PROFILE=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "ENV": "", "BASH_ENV": ""}
	p := start(t, Options{Cmd: "shopt -q login_shell && echo login $FROM_PROFILE", Login: true, Env: env})
	if got := wait(t, p); !sameResult(got, process.ExitedWith(0)) {
		t.Fatalf("result %s (output %q)", show(got), logText(p.Log(), 0))
	}
	if out := logText(p.Log(), logstore.Stdout); out != "login yes\n" {
		t.Errorf("stdout %q, want the profile of the test's own HOME read", out)
	}
}

func sameResult(a, b process.Result) bool {
	if (a.ExitCode == nil) != (b.ExitCode == nil) || a.ExitCode != nil && *a.ExitCode != *b.ExitCode {
		return false
	}
	return a.Reason == b.Reason && a.Signal == b.Signal && a.Error == b.Error
}

func show(r process.Result) string {
	s := string(r.Reason)
	if r.ExitCode != nil {
		s += " code " + strconv.Itoa(*r.ExitCode)
	}
	if r.Signal != "" {
		s += " signal " + r.Signal
	}
	if r.Error != "" {
		s += " error " + r.Error
	}
	return s
}

func TestInfo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, Options{Cmd: "pwd", Cwd: dir, Name: "job", Shell: "sh"})
	wait(t, p)
	info := p.Info()
	if got := logText(p.Log(), logstore.Stdout); got != dir+"\n" {
		t.Errorf("pwd printed %q, want %q", got, dir+"\n")
	}
	if info.Kind != process.KindExec || info.Name != "job" || info.Cwd != dir || info.ShellCommand != "pwd" ||
		info.Shell != "sh" || !filepath.IsAbs(info.ResolvedShell) || info.PID == 0 || info.Stdin != process.StdinClosed ||
		info.KeepLogs != logstore.KeepUntilCleanup || info.StartedAt.IsZero() {
		t.Errorf("info %+v", info)
	}
}

func TestInvalidOptionsStartNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	touch := "touch " + marker
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"missing-cwd", Options{Cmd: touch, Cwd: "/nonexistent/dir"}},
		{"cwd-is-a-file", Options{Cmd: touch, Cwd: "/etc/passwd"}},
		{"relative-cwd", Options{Cmd: touch, Cwd: "tmp"}},
		{"unknown-shell", Options{Cmd: touch, Shell: "python3"}},
		{"neither-cmd-nor-argv", Options{}},
		{"both-cmd-and-argv", Options{Cmd: touch, Argv: []string{"touch", marker}}},
		{"empty-argv", Options{Argv: []string{}}},
		{"terminal-on-exec", Options{Cmd: touch, Terminal: &process.TerminalSize{Cols: 80, Rows: 24}}},
		{"bad-kind", Options{Cmd: touch, Kind: process.KindSession}},
		{"bad-stdin", Options{Cmd: touch, Stdin: "half"}},
		{"bad-keep-logs", Options{Cmd: touch, KeepLogs: "forever"}},
		{"unknown-user", Options{Cmd: touch, User: "no-such-user-4f2a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Start(tc.opts)
			if !errors.Is(err, process.ErrInvalidArgument) || p != nil {
				t.Fatalf("Start: %v, %v; want an error wrapping ErrInvalidArgument", p, err)
			}
		})
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command ran: %v", err)
	}
}

func TestUser(t *testing.T) {
	t.Parallel()
	opts := Options{Cmd: `echo "$(id -u) $HOME $USER"`, User: "nobody", Cwd: "/"}
	if os.Geteuid() != 0 {
		if _, err := Start(opts); !errors.Is(err, process.ErrUnsupported) {
			t.Fatalf("Start as another user, not root: %v, want ErrUnsupported", err)
		}
		return
	}
	p := start(t, opts)
	if r := wait(t, p); !sameResult(r, process.ExitedWith(0)) {
		t.Fatalf("result %s", show(r))
	}
	if got := logText(p.Log(), logstore.Stdout); got != "65534 /nonexistent nobody\n" {
		t.Errorf("as nobody: %q", got)
	}
}
