package shellsession

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
)

// TestLoginReadsProfiles: login starts a login shell, which reads the
// profile; otherwise no rc or profile file is read, $ENV included.
func TestLoginReadsProfiles(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			rcs := []string{".bashrc", ".zshrc", ".mkshrc", ".kshrc", ".zshenv", "envfile"}
			for _, rc := range rcs {
				require.NoError(t, os.WriteFile(filepath.Join(home, rc), []byte("export FROM_RC=yes\n"), 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte("export FROM_PROFILE=yes\n"), 0o644))
			env := map[string]string{"HOME": home, "ZDOTDIR": home, "ENV": filepath.Join(home, "envfile")}

			plain := newSession(t, Options{Shell: shell, Env: env})
			_, out, _ := run(t, plain, CommandOptions{Cmd: `echo "rc=${FROM_RC-} profile=${FROM_PROFILE-}"`})
			require.Equal(t, "rc= profile=\n", out, "a plain session read an rc or profile file")

			login := newSession(t, Options{Shell: shell, Env: env, Login: true})
			_, out, _ = run(t, login, CommandOptions{Cmd: `echo "profile=${FROM_PROFILE-}"`})
			require.Equal(t, "profile=yes\n", out, "a login session did not read its profile")
		})
	}
}

// TestInheritedTMOUTDropped: a TMOUT in the daemon's environment (a
// hardened login's profile exports one) does not reach a session's shell,
// where an idle interactive bash would log out after that many seconds and
// end the session between two commands; one the session asks for does.
// Not parallel: it sets the process's environment.
func TestInheritedTMOUTDropped(t *testing.T) {
	t.Setenv("TMOUT", "1")
	s := newSession(t, Options{Shell: "bash"})
	_, out, _ := run(t, s, CommandOptions{Cmd: `echo "${TMOUT-unset}"`})
	require.Equal(t, "unset\n", out)
	time.Sleep(2 * time.Second) // twice the TMOUT it would have had
	res, out, _ := run(t, s, CommandOptions{Cmd: "echo alive"})
	require.Equal(t, 0, code(res), "%+v", res)
	require.Equal(t, "alive\n", out)

	asked := newSession(t, Options{Shell: "bash", Env: map[string]string{"TMOUT": "7"}})
	_, out, _ = run(t, asked, CommandOptions{Cmd: `echo "${TMOUT-unset}"`})
	require.Equal(t, "7\n", out)
}

// TestBinaryCommandText: NUL-free bytes that are not UTF-8 are sent as
// they are.
func TestBinaryCommandText(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{})
	res, out, _ := run(t, s, CommandOptions{Cmd: "echo \xff\xfe x\x01y"})
	require.Equal(t, 0, code(res))
	require.Equal(t, "\xff\xfe x\x01y\n", out)
	res, _, stderr := run(t, s, CommandOptions{Cmd: "echo a\x00b"})
	require.Equal(t, 2, code(res))
	require.Contains(t, stderr, "NUL")
}

// A shell that exits before New sends its first command — the queue
// closed with it — is refused as one that exited as it started: New
// returned "queue closed" (seen under the race detector, with the test
// below).
func TestShellExitsBeforeTheFirstCommand(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "sh")
	processtest.WriteExecutable(t, fake, "#!/bin/sh\necho leaving >&2; exit 3\n")
	beforeReady = func(s *Session) { <-s.h.Done() } // ended by itself: its queue closed
	defer func() { beforeReady = nil }()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	s, err := New(ctx, Options{Shell: fake})
	if s != nil {
		s.Close()
	}
	require.ErrorIs(t, err, process.ErrInvalidArgument)
	require.Contains(t, err.Error(), "exited as it started (exit status 3)")
	require.Contains(t, err.Error(), "leaving")
}

// TestShellThatExitsAsItStarts: a session whose shell exits before its
// first command — its profile runs exit, or the "shell" is a program that
// exits at once — is refused as invalid input saying how the shell ended,
// where it was handed out as running (its profile's exit read as the first
// command's) or failed with a write to a broken pipe.
func TestShellThatExitsAsItStarts(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte("echo leaving >&2; exit 3\n"), 0o644))
			fake := filepath.Join(t.TempDir(), filepath.Base(shell))
			processtest.WriteExecutable(t, fake, "#!/bin/sh\necho leaving >&2; exit 3\n")
			for i := range 10 {
				opts := Options{Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true}
				if i%2 == 1 {
					opts = Options{Shell: fake}
				}
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				s, err := New(ctx, opts)
				cancel()
				if s != nil {
					s.Close()
				}
				require.ErrorIs(t, err, process.ErrInvalidArgument, "%+v", opts)
				require.Contains(t, err.Error(), "exited as it started (exit status 3)")
				require.Contains(t, err.Error(), "leaving")
			}
		})
	}
}

// TestLoginProfileThatBlocks: a login shell whose profile never ends
// (sleep 1000) is refused as invalid input once Options.ReadyWithin has
// passed, saying so, naming the profile and with what the shell said, and
// the sleep ends with the shell. New waited for its caller to give up.
func TestLoginProfileThatBlocks(t *testing.T) {
	t.Parallel()
	const within = time.Second
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			opts, sleeper := blockingProfile(t, shell)
			opts.ReadyWithin = within
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			began := time.Now()
			s, err := New(ctx, opts)
			took := time.Since(began)
			if s != nil {
				s.Close()
			}
			require.ErrorIs(t, err, process.ErrInvalidArgument)
			require.Contains(t, err.Error(), "the shell did not become ready within 1s (its login profile may block)")
			require.Contains(t, err.Error(), "profile blocks")
			require.GreaterOrEqual(t, took, within)
			requireSleeperGone(t, sleeper())
		})
	}
}

// TestStartGivenUp: a caller that gives up on New before the bound (a
// client that went away) gets its context's error, and the shell whose
// profile blocks ends with every process under it, as at the bound.
func TestStartGivenUp(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			opts, sleeper := blockingProfile(t, shell)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			s, err := New(ctx, opts)
			if s != nil {
				s.Close()
			}
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NotErrorIs(t, err, process.ErrInvalidArgument)
			requireSleeperGone(t, sleeper())
		})
	}
}

// blockingProfile returns the options of a login session of shell whose
// profile says "profile blocks" and runs sleep 1000, and how to read the
// sleep's pid once it has started.
func blockingProfile(t *testing.T, shell string) (Options, func() int) {
	t.Helper()
	home := t.TempDir()
	profile := "echo profile blocks >&2; sh -c 'echo $$ >\"$HOME/sleeper\"; exec sleep 1000'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(profile), 0o644))
	opts := Options{Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true}
	return opts, func() int {
		b, err := os.ReadFile(filepath.Join(home, "sleeper"))
		require.NoError(t, err, "the profile's sleep did not start")
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err, "%q", b)
		t.Cleanup(func() {
			if proctree.Alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		return pid
	}
}

// requireSleeperGone fails t unless the process pid has ended (a zombie
// counts) within the deadline.
func requireSleeperGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !proctree.Alive(pid) }, deadline, 10*time.Millisecond,
		"the profile's sleep %d outlived its shell", pid)
}

// TestEnvGivesShellStartupFiles: BASH_ENV and ENV given in a session's env
// reach its commands, for the shells they start (bash -c reads BASH_ENV),
// on every shell. The init script unset them, so that the session's env
// could not set them, as the docs say it may; the session's own shell
// still reads neither (an interactive shell that started with ENV
// /dev/null reads it no more).
func TestEnvGivesShellStartupFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bashEnv, shEnv := filepath.Join(dir, "bashenv"), filepath.Join(dir, "env")
	require.NoError(t, os.WriteFile(bashEnv, []byte("X=from-bash-env\n"), 0o600))
	require.NoError(t, os.WriteFile(shEnv, []byte("Y=from-env\n"), 0o600))
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell, Env: map[string]string{"BASH_ENV": bashEnv, "ENV": shEnv}})
			expectRun(t, s, `echo "$BASH_ENV|$ENV|${X-}|${Y-}"; bash -c 'echo "$X"'; env | grep -c '^ENV='`,
				0, bashEnv+"|"+shEnv+"||\nfrom-bash-env\n1\n")
		})
	}
}

// TestLoginProfileMovesTheShell: a login profile that changes directory
// leaves the session there, on every shell: busybox sh, started in the
// session's directory to read its input link, was moved to the session's
// cwd after its profile had run, where the others keep the profile's.
func TestLoginProfileMovesTheShell(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			home, there := t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte("cd '"+there+"'\n"), 0o644))
			env := map[string]string{"HOME": home, "ZDOTDIR": home}
			s := newSession(t, Options{Shell: shell, Env: env, Login: true})
			_, out, _ := run(t, s, CommandOptions{Cmd: `pwd`})
			require.Equal(t, there+"\n", out)
			// Without a profile that moves it, it starts in its cwd.
			cwd := t.TempDir()
			s = newSession(t, Options{Shell: shell, Env: map[string]string{"HOME": t.TempDir()}, Login: true, Cwd: cwd})
			_, out, _ = run(t, s, CommandOptions{Cmd: `pwd`})
			require.Equal(t, cwd+"\n", out)
		})
	}
}

// TestLoginProfileCdTakesNoMove: a function or an alias named cd that a
// login profile defines does not keep a session from its cwd. busybox sh,
// started in the session's directory, is moved to its cwd by a line it
// reads after its profile: a plain cd there ran the profile's function or
// alias, and every command ran in the engine's directory.
func TestLoginProfileCdTakesNoMove(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		for _, def := range []string{"cd() { :; }", "alias cd=:"} {
			t.Run(shell+"/"+def, func(t *testing.T) {
				t.Parallel()
				home, cwd := t.TempDir(), t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(def+"\n"), 0o644))
				s := newSession(t, Options{Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true, Cwd: cwd})
				expectRun(t, s, "pwd", 0, cwd+"\n")
			})
		}
	}
}

// TestMoveLineTakesNoAlias: the line that moves busybox sh to its cwd
// after its login profile (see linkInput) unsets OLDPWD when the session's
// environment has none; a profile's alias named unset took that over, and
// OLDPWD named the engine's own directory, where cd - went. It runs in a
// shell of its own here, whose environment has no OLDPWD whatever the
// test's has.
func TestMoveLineTakesNoAlias(t *testing.T) {
	t.Parallel()
	dir, cwd := t.TempDir(), t.TempDir()
	line, err := linkInput(dir, cwd, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	sh := exec.CommandContext(ctx, "busybox", "sh", "-c", "alias unset=: cd=:\n"+line+`echo "$PWD|${OLDPWD-unset}"`)
	sh.Dir, sh.Env = dir, []string{}
	out, err := reapertest.CombinedOutput(sh)
	require.NoError(t, err, "%s", out)
	require.Equal(t, cwd+"|unset\n", string(out))
}
