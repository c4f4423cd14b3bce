package proctree

import "time"

// StartedSince keeps of pids those started at or after since, when the
// caller also read last with [LastPID]: the processes a piece of work
// started, not those that ran before it (background jobs of an earlier
// command or cell), among the descendants of a long-lived process.
//
// Start times in /proc are in 10 ms ticks, too coarse to tell the work's
// first process from one started just before it, so a process must also
// have a pid handed out after last (pids go up, wrapping at pid_max; the
// start time rules out a process old enough to have been lapped). Read last
// before since is taken.
func StartedSince(pids []int, since time.Time, last int) []int {
	since = since.Add(-20 * time.Millisecond)
	boot := BootTime()
	var out []int
	for _, pid := range pids {
		if st, ok := StartedAt(pid, boot); ok && !st.Before(since) && PIDAfter(pid, last) {
			out = append(out, pid)
		}
	}
	return out
}
