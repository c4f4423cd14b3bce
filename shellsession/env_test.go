package shellsession

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
				profile := "ENV='" + envFile + "' PS1='p> ' PROMPT_COMMAND='echo prompt'; export ENV PS1 PROMPT_COMMAND\n"
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
				expectRun(t, s, `env | grep -E '^(PS1|HISTFILE|PROMPT_COMMAND|ENV)=' || true`, 0, want)
				expectRun(t, s, `fc -l >/dev/null 2>&1; history >/dev/null 2>&1; true`, 0, "")
				require.NoFileExists(t, history, "the shell kept a history in the file env named")
			})
		}
	}
}
