package shellsession

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
)

// TestLoginProfileAliases: aliases a login shell's profile defines do not
// take over the engine's start-up line, which unsets MAILPATH among others.
func TestLoginProfileAliases(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			profile := "MAILPATH=/nonexistent/mail; alias unset=: set=: trap=:\n"
			require.NoError(t, os.WriteFile(filepath.Join(home, processtest.LoginProfile[shell]), []byte(profile), 0o644))
			s := newSession(t, Options{Shell: shell, Env: map[string]string{"HOME": home, "ZDOTDIR": home}, Login: true})
			_, out, _ := run(t, s, CommandOptions{Cmd: `echo "${MAILPATH-unset}"`})
			require.Equal(t, "unset\n", out)
		})
	}
}
