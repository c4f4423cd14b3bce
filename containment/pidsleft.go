package containment

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PidsLeft returns how many more tasks (processes and threads) the pids
// cgroups this process is in take, the fewest any of them (its own, in the
// v2 hierarchy or the v1 pids one, or one above it) leaves, and false when
// none it can read has a limit. A container's pids limit is one of them.
func PidsLeft() (int, bool) {
	mounts, own := readMounts(), ownCgroups()
	left, limited := 0, false
	for _, h := range []struct{ mount, path string }{{mounts.v2, own[""]}, {mounts.v1["pids"], own["pids"]}} {
		if h.mount == "" || h.path == "" {
			continue
		}
		for dir := filepath.Join(h.mount, h.path); ; dir = filepath.Dir(dir) {
			if n, ok := pidsLeftIn(dir); ok && (!limited || n < left) {
				left, limited = n, true
			}
			if dir == h.mount || !strings.HasPrefix(dir, h.mount) {
				break
			}
		}
	}
	return left, limited
}

// pidsLeftIn returns pids.max less pids.current of the cgroup at dir;
// false when it has no limit (max), or no such files (a root cgroup).
func pidsLeftIn(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pids.max"))
	if err != nil {
		return 0, false
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil { // "max"
		return 0, false
	}
	cur, err := os.ReadFile(filepath.Join(dir, "pids.current"))
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(cur)))
	if err != nil {
		return 0, false
	}
	return limit - n, true
}
