package shellsession

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

// startHostile starts a login session of shell whose profile is profile,
// within a readiness bound of within, and returns the session (nil when
// refused), New's error and the session's id.
func startHostile(t *testing.T, shell, profile string, within time.Duration) (*Session, error, string) {
	t.Helper()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(profile), 0o644))
	id := process.NewID()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	s, err := New(ctx, Options{ID: id, Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true, ReadyWithin: within})
	if s != nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err, id
}

// requireNothingLeft fails t unless every process of the session id has
// ended within the deadline.
func requireNothingLeft(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(proctree.Tagged(id)) == 0 }, deadline, 20*time.Millisecond,
		"processes of the refused session live on")
}

// TestLoginProfileReadsInput: a login profile that reads its stdin (read
// x) reads the session's own input, the lines the engine sent the shell
// before its first command, which then never ran: SIGTERM no longer ended
// the shell (kill $$ went on), PROMPT_COMMAND and history stayed on, and
// busybox sh stayed in the engine's directory, every command reporting
// that cwd. Such a session is refused at once, saying why, and nothing of
// it is left.
func TestLoginProfileReadsInput(t *testing.T) {
	t.Parallel()
	const within = 20 * time.Second
	for _, shell := range testShells {
		for _, profile := range []string{"read x\n", "read a; read b\n"} {
			t.Run(shell+"/"+profile, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				s, err, id := startHostile(t, shell, profile, within)
				if err == nil {
					_, out, _ := run(t, s, CommandOptions{Cmd: "pwd; kill $$; echo still here"})
					t.Fatalf("the session was handed out; its first command said %q", out)
				}
				require.ErrorIs(t, err, process.ErrInvalidArgument)
				require.Contains(t, err.Error(), "its login profile reads its standard input")
				require.Less(t, time.Since(began), within, "refused only at the readiness bound")
				requireNothingLeft(t, id)
			})
		}
	}
}

// TestLoginProfileExecsAnotherShell: a login profile that replaces the
// shell with another (exec zsh) is refused, naming the program, rather
// than handed out as the shell asked for while another one ran its
// commands (bash took dash's frames and ran every command), or refused at
// the readiness bound as a profile that may block (mksh's frames in bash).
func TestLoginProfileExecsAnotherShell(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			// zsh exits on bash's init script, as it starts: that
			// refusal says so already.
			other := map[string]string{"bash": "dash", "zsh": "bash", "mksh": "bash"}[shell]
			if other == "" {
				other = "zsh"
			}
			path, err := exec.LookPath(other)
			require.NoError(t, err)
			path, err = filepath.EvalSymlinks(path)
			require.NoError(t, err)
			s, err, id := startHostile(t, shell, "exec "+other+"\n", 3*time.Second)
			if err == nil {
				_, out, _ := run(t, s, CommandOptions{Cmd: "readlink /proc/$$/exe"})
				t.Fatalf("the session was handed out running %q", out)
			}
			require.ErrorIs(t, err, process.ErrInvalidArgument)
			require.Contains(t, err.Error(), path)
			require.Contains(t, err.Error(), "exec")
			requireNothingLeft(t, id)
		})
	}
}

// TestLoginProfileFunctionsTakeNoInitWord: functions a login profile
// defines do not take over the engine's start-up line, where bash and zsh
// let a function take trap, unset and set: kill $$ went on (no TERM trap)
// and MAILPATH stayed set. The other shells run their special builtins
// over such functions; but typeset is none in mksh, where a function of
// its name kept the profile's PS2 in the commands' environment. (ksh93
// refuses the name: the profile's last line.)
func TestLoginProfileFunctionsTakeNoInitWord(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			profile := "MAILPATH=/nonexistent/mail\nexport PS2=x\ntrap() { :; }\nunset() { :; }\nset() { :; }\ntypeset() { :; }\n"
			s, err, _ := startHostile(t, shell, profile, 0)
			require.NoError(t, err)
			expectRun(t, s, `echo "${MAILPATH-unset}"`, 0, "unset\n")
			expectRun(t, s, `printenv PS2 || echo unexported`, 0, "unexported\n")
			res, _, _ := run(t, s, CommandOptions{Cmd: "kill $$"})
			require.Equal(t, 143, code(res), "%+v", res)
			requireEnds(t, s, "kill $$")
		})
	}
}

// TestLoginProfileBuiltinFunctionTakesNoInitWord: mksh's start-up line
// unexports the prompts and HISTFILE by \builtin \typeset, typeset being
// no special builtin there; but mksh lets a function take "builtin" too,
// and one that fails left what the line set, and the profile exported, in
// every command's environment. The line falls back to \typeset. (bash
// and zsh call every word of the line through builtin: there a profile's
// function of that name is beyond what the engine can start under.)
func TestLoginProfileBuiltinFunctionTakesNoInitWord(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		if shell == "bash" || shell == "zsh" {
			continue
		}
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s, err, _ := startHostile(t, shell, "export PS2=x\nbuiltin() { return 1; }\n", 0)
			require.NoError(t, err)
			expectRun(t, s, `env | grep -E '^(PS[123]|HISTFILE)=' || echo unexported`, 0, "unexported\n")
		})
	}
}
