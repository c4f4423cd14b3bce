package containment

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/rawcall"
)

// hybrid is a Manager for a host whose v2 hierarchy has no controllers:
// membership, kill and CPU time through v2, limits, memory peak and OOM
// kills through the v1 hierarchies it mounts.
type hybrid struct {
	*cgroup
	v1 []v1dir
	// forker, when the cgroup took its spare: Start forks on its thread,
	// and left is closed once the thread has moved out.
	forker  *forker
	left    <-chan struct{}
	started bool
	// pidsMax, when the cgroup has a v1 pids limit, is its pids.max file,
	// and pids the limit (see Start).
	pidsMax string
	pids    int64
}

// openV1Memory opens the v1 memory files Stats reads, in dir.
func (h *hybrid) openV1Memory(dir string) {
	h.peak, _ = rawcall.OpenFile(filepath.Join(dir, "memory.max_usage_in_bytes"), unix.O_RDWR, 0)
	h.oom, _ = rawcall.OpenFile(filepath.Join(dir, "memory.oom_control"), unix.O_RDONLY, 0)
	h.reset = "0"
}

// setV1 writes the limits l puts on v1 controller c in dir.
func setV1(c, dir string, l Limits) error {
	var files [][2]string
	switch {
	case c == "memory" && l.MemoryBytes > 0:
		v := strconv.FormatInt(l.MemoryBytes, 10)
		files = append(files, [2]string{"memory.limit_in_bytes", v})
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			files = append(files, [2]string{"memory.memsw.limit_in_bytes", v}) // no swap
		}
	case c == "pids" && l.Pids > 0:
		files = append(files, [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
	case c == "cpu" && l.CPUMillis > 0:
		files = append(files, [2]string{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod)},
			[2]string{"cpu.cfs_quota_us", strconv.FormatInt(l.CPUMillis*cpuPeriod/1000, 10)})
	}
	for _, f := range files {
		if err := write(filepath.Join(dir, f[0]), f[1]); err != nil {
			return fmt.Errorf("set %s: %w", f[0], err)
		}
	}
	return nil
}

// Start starts cmd into the v2 cgroup with clone3, from a thread moved into
// the v1 cgroups for the fork (see the package comment).
//
// While the thread is in a v1 pids cgroup it is one of its tasks, and
// moving it back can wait for the kernel's RCU grace period, some
// milliseconds, while the process runs: a shell that forked at once, under
// pids 2, failed to fork one child in half of its starts. The limit is one
// higher while the thread is there, and put back once it has left: a
// process that forks twice between the two may so get one process more, a
// lesser harm than forks that fail at random.
func (h *hybrid) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if h.forker != nil {
		h.started = true
		return h.forker.start(h.cgroup, cmd, start)
	}
	errc := make(chan error, 1)
	go lockedOffLeader(func() bool {
		tid := strconv.Itoa(unix.Gettid())
		var err error
		if h.pidsMax != "" {
			higher := strconv.FormatInt(h.pids+1, 10)
			if h.pids >= MaxPids {
				higher = "max" // the kernel's one above MaxPids
			}
			if err = write(h.pidsMax, higher); err != nil {
				errc <- fmt.Errorf("set pids.max: %w", err)
				return true
			}
		}
		moved := 0
		for _, d := range h.v1 {
			if err = write(filepath.Join(d.dir, "tasks"), tid); err != nil {
				err = fmt.Errorf("enter v1 cgroup: %w", err)
				break
			}
			moved++
		}
		if err == nil {
			err = h.cgroup.Start(cmd, start)
		}
		for _, d := range h.v1[:moved] {
			if back := write(filepath.Join(d.home, "tasks"), tid); back != nil {
				// The thread ends with its goroutine: it counts no more.
				errc <- errors.Join(err, fmt.Errorf("leave v1 cgroup: %w", back), h.putPidsBack())
				return false
			}
		}
		errc <- errors.Join(err, h.putPidsBack())
		return true
	})
	return <-errc
}

// putPidsBack sets the cgroup's pids limit back to what was asked for, once
// the thread that forked has left (see Start).
func (h *hybrid) putPidsBack() error {
	if h.pidsMax == "" {
		return nil
	}
	if err := write(h.pidsMax, strconv.FormatInt(h.pids, 10)); err != nil {
		return fmt.Errorf("set pids.max: %w", err)
	}
	return nil
}

// Destroy ends the v2 cgroup, which holds every process of the v1 ones,
// then removes the v1 cgroups.
func (h *hybrid) Destroy() error {
	if h.forker != nil {
		// The forker's thread leaves the cgroup before it is removed.
		if !h.started {
			h.forker.abandon(h.left)
		}
		<-h.left
	}
	err := h.cgroup.Destroy()
	if err != nil {
		return err
	}
	for _, d := range h.v1 {
		if rerr := unix.Rmdir(d.dir); rerr == nil || errors.Is(rerr, unix.ENOENT) {
			continue
		}
		// Busy: a member just reaped, or a root one that left the v2
		// cgroup alone, which the kill above went through, and is still
		// here.
		killMembers(d.dir)
		err = errors.Join(err, removeTree(d.dir))
	}
	return err
}
