package shells

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		family Family
		prefix []string
	}{
		{"", Bash, nil},
		{"bash", Bash, nil},
		{"dash", Dash, nil},
		{"sh", Dash, nil}, // /bin/sh is dash on Debian
		{"zsh", Zsh, nil},
		{"mksh", Mksh, nil},
		{"ksh", Ksh, nil},
		{"busybox", Busybox, []string{"sh"}},
		{"/bin/bash", Bash, nil},
		{"/usr/bin/mksh", Mksh, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sh, err := Resolve(tt.name)
			require.NoError(t, err)
			require.Equal(t, tt.family, sh.Family)
			require.Equal(t, tt.prefix, sh.Prefix)
			require.True(t, len(sh.Path) > 0 && sh.Path[0] == '/', sh.Path)
			out, err := exec.Command(sh.Path, append(sh.Prefix, "-c", "echo ok")...).Output()
			require.NoError(t, err)
			require.Equal(t, "ok\n", string(out))
		})
	}
}

func TestResolveRefuses(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"python3", "fish", "/usr/bin/python3", "bash; rm -rf /", "../bash", "tcsh", "csh"} {
		_, err := Resolve(name)
		require.ErrorIs(t, err, ErrUnknownShell, name)
	}
	_, err := Resolve("/nonexistent/bash")
	require.ErrorIs(t, err, ErrNotInstalled)
}
