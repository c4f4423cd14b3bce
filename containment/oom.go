package containment

import (
	"fmt"
	"strconv"

	"github.com/conchsh/conch/internal/rawcall"
)

// The OOM killer's bias (oom_score_adj, -1000 to 1000) of the daemon and of
// what it starts: when memory runs out it picks a command, never the
// daemon, whose own memory its budgets bound.
const (
	DaemonOOMScoreAdj = -500
	ChildOOMScoreAdj  = 500
)

// ProtectSelf lowers this process's oom_score_adj to DaemonOOMScoreAdj.
// Lowering it needs CAP_SYS_RESOURCE; without it the error says so and the
// value stays.
func ProtectSelf() error {
	if err := write("/proc/self/oom_score_adj", strconv.Itoa(DaemonOOMScoreAdj)); err != nil {
		return fmt.Errorf("lower oom_score_adj (needs CAP_SYS_RESOURCE): %w", err)
	}
	return nil
}

// exposeChild raises a started process's oom_score_adj to
// ChildOOMScoreAdj, which needs no privilege. It runs once the process has
// exec'd: a child it forks before that keeps the daemon's value.
// Made for every process started, and returning at once, its calls are
// raw (see rawcall): through os.OpenFile they were four, each through the
// scheduler. The file is opened neither to be created nor truncated: its
// open, the lookup of a /proc entry new each time, is most of the cost.
func exposeChild(pid int) {
	_ = rawcall.WriteExisting("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", childOOMScore)
}

var childOOMScore = []byte(strconv.Itoa(ChildOOMScoreAdj))
