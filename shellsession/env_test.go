package shellsession

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
)

// A session keeps none of the environment it was started with: up to the
// kernel's ~2 MB a session, it would be held for the session's life. Not
// parallel: it reads the heap.
func TestSessionKeepsNoEnv(t *testing.T) {
	before := heaptest.Live()
	for range 4 {
		s := newSession(t, Options{Env: processtest.BigEnv()})
		if _, out, _ := run(t, s, CommandOptions{Cmd: "echo ${#BIG11}"}); out != "120000\n" {
			t.Fatalf("the session's environment: %q", out)
		}
	}
	// Four environments of 1.4 MB: 5.8 MB if they were kept, twice over
	// (the shell's command and the session's options).
	if held := heaptest.Live() - before; held > 3<<20 {
		t.Fatalf("the heap grew by %d bytes with 4 sessions", held)
	}
}

// A session's env cannot change the daemon's instance mark, by which a
// later daemon finds what this one left, as an exec process's cannot: it
// replaced the daemon's.
func TestEnvKeepsTheDaemonMark(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Env: map[string]string{proctree.InstanceEnv: "forged"}})
	want, ok := os.LookupEnv(proctree.InstanceEnv)
	if !ok {
		want = "unset"
	}
	want += "\n"
	if _, out, _ := run(t, s, CommandOptions{Cmd: `echo "${` + proctree.InstanceEnv + `-unset}"`}); out != want {
		t.Fatalf("%s in the session: %q, want %q", proctree.InstanceEnv, out, want)
	}
}

// TestPromptAndHistoryVariablesLeftOut: PS1, HISTFILE and PROMPT_COMMAND
// given in a session's env, or exported by a login profile, do not reach
// its commands, as docs/behaviour.md says, and ENV reaches the commands of
// a login shell only, on every shell. The init
// script emptied PS1 and HISTFILE without unexporting them, so commands
// saw "PS1=", and on dash, ksh, mksh and busybox "HISTFILE=" (empty) even
// when env gave none; zsh's commands saw the ENV=/dev/null the engine
// starts an interactive shell with, and the other shells unset a login
// shell's ENV, the daemon's or its profile's, from under its commands.
// ksh93 and mksh, started with the HISTFILE env gave, wrote the engine's
// first line there.
func TestPromptAndHistoryVariablesLeftOut(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, login := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/login=%v", shell, login), func(t *testing.T) {
				t.Parallel()
				home := t.TempDir()
				envFile := filepath.Join(home, "envfile")
				require.NoError(t, os.WriteFile(envFile, nil, 0o600))
				profile := "ENV='" + envFile + "' PS1='p> ' PS2='> ' PROMPT_COMMAND='echo prompt'; export ENV PS1 PS2 PROMPT_COMMAND\n"
				require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(profile), 0o644))
				history := filepath.Join(home, "history")
				s := newSession(t, Options{Shell: shell, Login: login, Env: map[string]string{
					"HOME": home, "ZDOTDIR": home,
					"PS1": "p> ", "HISTFILE": history, "PROMPT_COMMAND": "echo prompt",
				}})
				want := ""
				if login {
					want = "ENV=" + envFile + "\n"
				}
				expectRun(t, s, `env | grep -E '^(PS[12]|HISTFILE|PROMPT_COMMAND|ENV)=' || true`, 0, want)
				expectRun(t, s, `fc -l >/dev/null 2>&1; history >/dev/null 2>&1; true`, 0, "")
				require.NoFileExists(t, history, "the shell kept a history in the file env named")
			})
		}
	}
}

// TestReadOnlyPromptAndHistoryVariables: a login profile that makes PS1,
// PS2, PS3, HISTFILE, PROMPT_COMMAND, ENV, MAIL or MAILPATH read-only, as
// hardened images do, does not keep the session from starting, on any
// shell, and commands see the variable as docs/behaviour.md says. The init
// script assigned or unset them on a line that a read-only variable cut
// short (dash and busybox dropped the rest of their input too): the shell
// never told the engine it was ready, and the session was refused after
// 30 s. ksh93 and mksh keep their history in the file a read-only
// HISTFILE names, which the docs say.
func TestReadOnlyPromptAndHistoryVariables(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, name := range []string{"PS1", "PS2", "PS3", "HISTFILE", "PROMPT_COMMAND", "ENV", "MAIL", "MAILPATH"} {
			t.Run(shell+"/"+name, func(t *testing.T) {
				t.Parallel()
				home, dir := t.TempDir(), t.TempDir()
				profile := "export " + name + "=profval; readonly " + name + "\n"
				require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(profile), 0o644))
				// Well under the 30 s the shell has to come up: a shell
				// that lost the engine's readiness line waits all of it.
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				s, err := New(ctx, Options{Shell: shell, Login: true, Cwd: dir, Env: map[string]string{"HOME": home, "ZDOTDIR": home}})
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				want := ""
				switch {
				case name == "ENV":
					want = "ENV=profval\n" // a login shell's ENV is its commands'
				case readOnlyStaysExported(shell):
					want = name + "=profval\n"
				}
				expectRun(t, s, `env | grep -E '^(PS[123]|HISTFILE|PROMPT_COMMAND|ENV|MAIL|MAILPATH)=' || true`, 0, want)
				expectRun(t, s, "echo ok", 0, "ok\n")
				if name == "HISTFILE" && (shell == "ksh" || shell == "mksh") {
					// They open it as the profile names it, and nothing
					// but another name closes it: as the docs say, the
					// engine's lines go there.
					require.FileExists(t, filepath.Join(dir, "profval"))
				} else {
					require.NoFileExists(t, filepath.Join(dir, "profval"), "the shell kept a history in the file the profile named")
				}
				require.NoFileExists(t, filepath.Join(home, "profval"), "the shell kept a history in the file the profile named")
			})
		}
	}
}

// readOnlyStaysExported reports whether commands of shell see a variable
// that the init script takes out of their environment when a login
// profile exported it and made it read-only: bash and zsh unexport a
// read-only variable, the other shells can neither unexport nor unset it.
func readOnlyStaysExported(shell string) bool {
	return shell != "bash" && shell != "zsh"
}
