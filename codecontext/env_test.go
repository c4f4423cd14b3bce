package codecontext

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
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
