// Package containment puts each session, one-shot process and code context
// in a cgroup of its own, so that nothing it starts can leave it: a child
// that calls setsid, clears its environment or forks twice stays a member,
// and ending the cgroup ends all of it. It also applies limits (memory,
// pids, CPU) and reads what a cgroup's processes cost.
//
// A [Root] is chosen once, when the daemon starts, from what the host
// mounts: membership, kill and events always go through cgroup v2 (a child
// enters its cgroup as it is created, clone3 with CLONE_INTO_CGROUP, so it
// runs no instruction outside it). Limits go through the v2 controllers the
// hierarchy delegates, and where it delegates none — a hybrid host, whose v2
// hierarchy at /sys/fs/cgroup/unified has no controllers — through the v1
// controllers it mounts. Without a writable v2 hierarchy the Root is
// [ModeNone]: its cgroups start processes as they are, end nothing and
// apply no limits, and the caller keeps ending trees its own way. Each
// cgroup is a [Manager]; callers never ask which kind.
//
// Placing a process in v1 cgroups too: clone3 enters one v2 cgroup only,
// and v1 hierarchies have no such door. A forked child inherits the v1
// cgroups of the thread that forked it, and in v1 a single thread can be
// moved. So the starting goroutine locks its OS thread, moves that thread
// into the cgroup's v1 cgroups, forks (the child is in them before it
// execs, and every process it starts after), and moves the thread back.
// A thread that cannot be moved back is not reused: its goroutine exits
// locked, which ends the thread. A first move after an idle spell waits
// for an RCU grace period, so a cgroup that needs v1 for memory alone, with
// no limit, is started from a thread that waits in it already (see forker).
package containment
