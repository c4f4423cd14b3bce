package containment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cgroup's room is pids.max less pids.current; one without a limit
// ("max", or no such files, as the root) has none to say.
func TestPidsLeftIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, ok := pidsLeftIn(dir)
	require.False(t, ok, "no files")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.max"), []byte("max\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.current"), []byte("12\n"), 0o644))
	_, ok = pidsLeftIn(dir)
	require.False(t, ok, "no limit")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.max"), []byte("40\n"), 0o644))
	left, ok := pidsLeftIn(dir)
	require.True(t, ok)
	require.Equal(t, 28, left)
}
