package proctree

import (
	"slices"
	"time"
)

// StartedSince keeps of pids those started at or after since, when the
// caller also read last with [LastPID]: the processes a piece of work
// started, not those that ran before it (background jobs of an earlier
// command or cell), among the children of a long-lived process (see
// [StartedUnder]).
//
// Start times in /proc are in 10 ms ticks, too coarse to tell the work's
// first process from one started just before it, so a process that started
// about when the work did must also have a pid handed out after last (pids
// go up, wrapping at pid_max; the start time rules out a process old enough
// to have been lapped). One that started well after the work did is the
// work's by its start alone: by then pid_max/2 pids may have been handed
// out since last (a long build, a server restarted again and again), and
// its pid would read as older than last. Read last before since is taken.
func StartedSince(pids []int, since time.Time, last int) []int {
	// In the kernel's own unit, ticks after boot (see ticksAt), as the
	// guardian compares them: no time is made of each process's start.
	from, ok := ticksAt(since.Add(-20 * time.Millisecond))
	surely, ok2 := ticksAt(since.Add(surelyAfter))
	if !ok || !ok2 {
		return nil
	}
	var out []int
	for _, pid := range pids {
		if s, ok := readStat(pid); ok && s.Start >= from && (s.Start > surely || PIDAfter(pid, last)) {
			out = append(out, pid)
		}
	}
	return out
}

// surelyAfter is how long after the work's start a process's start time
// alone says it is the work's: far past the error of start times read
// from /proc (10 ms ticks, against a boot time read from /proc/uptime),
// and far short of the time it takes to hand out half of the pids.
const surelyAfter = time.Second

// StartedUnder splits the descendants of root, a long-lived process that
// runs one piece of work after another (a shell, an interpreter), into
// those of the work now at hand and the others. The work's are the
// children of root that keep picks out of them all — those it started,
// say, by [StartedSince] — and every descendant of theirs, whenever it
// started: a server the work started keeps its workers. The others are
// root's other children and their descendants: what an earlier piece left
// running, and whatever that starts later, which is not the work's for
// having started during it. A process whose parent died was reparented out
// of the tree and is in neither, as for [Descendants].
//
// Processes root itself forks for what an earlier piece left running in it
// (a thread, a timer of an interpreter) are its children all the same, and
// keep alone tells them from the work's.
func StartedUnder(root int, keep func(children []int) []int) (work, others []int) {
	children := links()
	kids := withoutGuardian(children(root))
	work = slices.Clone(keep(kids))
	for _, k := range kids {
		if !slices.Contains(work, k) {
			others = append(others, k)
		}
	}
	seen := map[int]bool{root: true}
	for _, k := range kids {
		seen[k] = true
	}
	// One walk each, so that a descendant is found under the child it
	// descends from; seen is shared, as the subtrees are disjoint.
	work = append(work, withoutGuardian(descendantsOf(children, seen, work))...)
	others = append(others, withoutGuardian(descendantsOf(children, seen, others))...)
	return work, others
}
