package shellsession

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			require.NoError(t, os.WriteFile(filepath.Join(home, loginProfile[shell]), []byte("export FROM_PROFILE=yes\n"), 0o644))
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
			require.NoError(t, os.WriteFile(filepath.Join(home, loginProfile[shell]), []byte("echo leaving >&2; exit 3\n"), 0o644))
			fake := filepath.Join(t.TempDir(), filepath.Base(shell))
			require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho leaving >&2; exit 3\n"), 0o755))
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
