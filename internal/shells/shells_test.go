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

// TestArgvTextLikeAnOption: a text that begins with "-" is a command, as it
// is in a session, not an option of the shell's: `-x` is not found (127),
// where `bash -c -x` refused the option ("-c: option requires an argument",
// 2) and `bash -c --version` printed bash's usage.
func TestArgvTextLikeAnOption(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"bash", "dash", "zsh", "mksh", "ksh", "busybox"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sh, err := Resolve(name)
			require.NoError(t, err)
			for _, login := range []bool{false, true} {
				for _, text := range []string{"-x", "--version"} {
					argv := sh.Argv(login, text)
					err := exec.Command(argv[0], argv[1:]...).Run()
					var exit *exec.ExitError
					require.ErrorAs(t, err, &exit, "%q", argv)
					require.Equal(t, 127, exit.ExitCode(), "%q: a command not found", argv)
				}
				argv := sh.Argv(login, "echo ok")
				out, err := exec.Command(argv[0], argv[1:]...).Output()
				require.NoError(t, err, "%q", argv)
				require.Equal(t, "ok\n", string(out))
			}
		})
	}
}
