package codecontext

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An interpreter's PWD names its cwd, and its env cannot change the
// daemon's instance mark, as an exec process's cannot. Node read the
// daemon's PWD, and env's CONCH_DAEMON replaced the daemon's mark, by
// which a later daemon finds what this one left.
func TestEnvPWDAndDaemonMark(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(dir, "real")
	require.NoError(t, os.MkdirAll(filepath.Join(real, "sub"), 0o755))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	mark, ok := os.LookupEnv(proctree.InstanceEnv)
	if !ok {
		mark = "unset"
	}
	for cwd, pwd := range map[string]string{link: link, link + "/sub/..": real} {
		c := newContext(t, Options{Language: JavaScript, Cwd: cwd, Env: map[string]string{proctree.InstanceEnv: "forged"}})
		_, out, _ := run(t, c, `console.log(process.env.PWD); console.log(process.env.`+proctree.InstanceEnv+` ?? "unset")`)
		require.Equal(t, pwd+"\n"+mark+"\n", out, "cwd %s", cwd)
	}
}

// An env that execve cannot pass as asked is refused, as an exec
// process's and a shell session's is. A name holding '=' set another
// variable: {"PATH=/x:/bin": ""} set PATH to "/x:/bin=", and
// {"CONCH_DAEMON=evil": ""} replaced the daemon's instance mark; an empty
// name was passed on, and a NUL failed the start with an error that was
// no ErrInvalidArgument.
func TestEnvRefusedUnlessExecvePassesIt(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"PATH=/x:/bin": ""},
		{proctree.InstanceEnv + "=evil": ""},
		{"": "x"},
		{"A\x00B": "x"},
		{"A": "x\x00y"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		c, err := New(ctx, Options{Language: JavaScript, Env: env})
		cancel()
		if err == nil {
			c.Close()
		}
		assert.ErrorIs(t, err, process.ErrInvalidArgument, "env %q", env)
	}
}

// The id tags the interpreter's environment, which cannot hold NUL: the
// start failed with an error that was no ErrInvalidArgument.
func TestIDWithNULRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	c, err := New(ctx, Options{Language: JavaScript, ID: "a\x00b"})
	if err == nil {
		c.Close()
	}
	require.ErrorIs(t, err, process.ErrInvalidArgument)
}
