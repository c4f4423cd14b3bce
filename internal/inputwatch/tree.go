package inputwatch

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/conchsh/conch/internal/proctree"
)

// Descendants returns the descendants of pid, as proctree.Descendants
// does, but from the children lists of pid's tree
// (/proc/PID/task/TID/children) when the kernel has them: a look then
// reads a few files of the tree rather than the stat of every process on
// the machine, which a watcher looking every 100 ms cannot afford.
func Descendants(pid int) []int {
	if !haveChildren() {
		return proctree.Descendants(pid)
	}
	var out []int
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children(p) {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// children returns the children of every thread of pid; none when it is
// gone.
func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids := []string{strconv.Itoa(pid)}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 1 {
		tids = tids[:0]
		for _, e := range ents {
			tids = append(tids, e.Name())
		}
	}
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

var haveChildren = sync.OnceValue(func() bool {
	self := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + self + "/task/" + self + "/children")
	return err == nil
})
