package exec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// TestRelativeProgramAsTheKernelFindsIt: a program named with a relative
// path, or found through a relative PATH entry, is the file the kernel
// finds from the cwd, as execve and env find it. The path was cleaned as
// text first, which named another file: "lnk/.." went back to where the
// link is rather than up from where it leads, and "myprog/" ran the file
// myprog where execve fails with ENOTDIR.
func TestRelativeProgramAsTheKernelFindsIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := func(path, says string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, path), []byte("#!/bin/sh\necho "+says+"\n"), 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub", "inner"), 0o755))
	script("which.sh", "root")
	script("sub/which.sh", "sub")
	script("myprog", "myprog")
	require.NoError(t, os.Symlink("sub/inner", filepath.Join(dir, "lnk")))

	for _, tc := range []struct {
		argv []string
		path string // the process's PATH, when set
		want string // its stdout; empty: refused, not a directory
	}{
		{argv: []string{"./lnk/../which.sh"}, want: "sub\n"},
		{argv: []string{"lnk/../which.sh"}, want: "sub\n"},
		{argv: []string{"which.sh"}, path: "lnk/..", want: "sub\n"},
		{argv: []string{"which.sh"}, path: "/nonexistent:lnk/../", want: "sub\n"},
		{argv: []string{"./which.sh"}, want: "root\n"},
		{argv: []string{"./myprog/"}},
		{argv: []string{"./myprog/."}},
		{argv: []string{"myprog/"}},
		{argv: []string{"sub/../myprog"}, want: "myprog\n"},
	} {
		t.Run(tc.argv[0]+" PATH="+tc.path, func(t *testing.T) {
			t.Parallel()
			opts := Options{Argv: tc.argv, Cwd: dir}
			if tc.path != "" {
				opts.Env = map[string]string{"PATH": tc.path}
			}
			p := start(t, opts)
			got := wait(t, p)
			if tc.want == "" {
				assert.Equal(t, process.Failed, got.Reason, "result %s (output %q)", show(got), logText(p.Log(), 0))
				assert.Contains(t, got.Error, "not a directory", "result %s", show(got))
				return
			}
			assert.True(t, sameResult(got, process.ExitedWith(0)), "result %s (output %q)", show(got), logText(p.Log(), 0))
			assert.Equal(t, tc.want, logText(p.Log(), logstore.Stdout))
		})
	}
}
