package containment

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lockedOffLeader runs fn on the calling goroutine locked to an OS thread
// that is not the process's first one, the thread group leader. fn reports
// whether the thread may serve again: when it may not (it is left in a
// cgroup it could not leave), the goroutine that ran fn ends locked, which
// ends the thread.
//
// Not the leader, since a thread is moved into a process's v1 cgroups to
// fork it: in a v1 memory hierarchy the kernel charges a process's memory
// to the cgroup of its memory's owner, the leader, so the daemon's memory
// would be charged to the process's cgroup while the leader was there.
func lockedOffLeader(fn func() (reusable bool)) {
	runtime.LockOSThread()
	if isLeader() {
		// This goroutine keeps the leader while another, which cannot
		// run there then, locks a thread of its own for fn.
		done := make(chan struct{})
		go func() {
			defer close(done)
			lockedOffLeader(fn)
		}()
		<-done
		runtime.UnlockOSThread()
		return
	}
	if fn() {
		runtime.UnlockOSThread()
	}
}

// isLeader reports whether the calling thread is the process's first.
var isLeader = func() bool { return unix.Gettid() == unix.Getpid() }
