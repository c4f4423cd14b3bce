package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/procfs"
)

// The daemon holds an OS thread for each process it runs (a session's
// shell, a one-shot, a code context's interpreter), blocked in the wait for
// its end, and the Go runtime makes a new thread whenever every thread it
// has is busy. A thread is a task, as a process is, under the user's
// RLIMIT_NPROC and a pids cgroup's limit; and when one of them refuses a
// thread, the runtime aborts the daemon, every session lost: a start that
// took the last process the limit allows left none for its wait, and a
// command that forked until refused left none for whatever the daemon
// did next.
//
// The runtime keeps a thread it made, idle, once what held it is done, and
// never makes one while an idle one is there. So the daemon makes idle
// threads at its start, while the limits leave room: enough for as many
// processes as it could start with what room is left after them, and for
// the Go code that runs meanwhile. Each process it starts takes a task of
// that room and an idle thread; a process its commands start takes room
// only. Past the reserve (more processes at once than maxThreadReserve),
// the runtime makes threads as before, and aborts if the limit is reached
// just then.

// maxThreadReserve bounds the reserve: each idle thread costs about 32 KiB
// resident (its stack and the kernel's), and the room of a user who is not
// limited is vast.
const maxThreadReserve = 64

// taskRoom returns how many more tasks the limits that apply to this
// process allow it: RLIMIT_NPROC less the tasks of its real user, and
// what its pids cgroups leave; and which limit that is ("" when none is
// known to apply).
func taskRoom() (room int, limit string) {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY && !rootUser() {
		if n, err := procfs.TasksOf(os.Getuid()); err == nil {
			room, limit = int(min(rl.Cur, 1<<31))-n, fmt.Sprintf("RLIMIT_NPROC %d, %d tasks of uid %d", rl.Cur, n, os.Getuid())
		}
	}
	if left, ok := containment.PidsLeft(); ok && (limit == "" || left < room) {
		room, limit = left, "pids cgroup"
	}
	return max(room, 0), limit
}

// rootUser reports whether this process's real user is the machine's root
// (uid 0 in the first user namespace), whom RLIMIT_NPROC does not bound.
func rootUser() bool {
	f, err := os.Open("/proc/self/uid_map")
	if err != nil {
		return os.Getuid() == 0
	}
	defer f.Close()
	uid := os.Getuid()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// inside outside count
		var in, out, n int
		if _, err := fmt.Sscan(sc.Text(), &in, &out, &n); err == nil && in <= uid && uid < in+n {
			return out+uid-in == 0
		}
	}
	return false
}

// threadReserve is how many idle threads to make for room tasks: r of
// them leave room−r for processes, each of which takes a thread, and the
// Go code (GOMAXPROCS threads) and a few short system calls take some
// more: r = (room + margin) / 2. Never more than three quarters of the
// room, so that some processes can start where it is small.
func threadReserve(room int) int {
	margin := runtime.GOMAXPROCS(0) + 4
	return min(maxThreadReserve, (room+margin)/2, room*3/4)
}

// reserveThreads has the runtime make n threads and keep them idle: n
// goroutines each hold a thread of their own at once (locked to it and
// blocked), then each lets it go and ends, which leaves the thread idle
// (a goroutine that ended locked would end its thread).
func reserveThreads(n int) {
	release := make(chan struct{})
	var held, done sync.WaitGroup
	held.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			held.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	held.Wait()
	close(release)
	done.Wait()
}

// reserveDaemonThreads makes the daemon's reserve of threads and says so
// when a limit bounds it.
func reserveDaemonThreads(logger *slog.Logger) {
	room, limit := taskRoom()
	if limit == "" {
		room = 1 << 20 // none known: the reserve is its most
	}
	n := threadReserve(room)
	reserveThreads(n)
	if limit != "" {
		logger.Info("threads reserved", "threads", n, "tasksLeft", room, "limit", limit)
	}
}
