package containment

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// The forker: on a hybrid host, a thread that waits in a v1 memory cgroup
// made ahead of need.
//
// A thread's first move between cgroups after an idle spell waits in the
// kernel for an RCU grace period (see the package comment), about 10 ms
// here, and every process started after a pause — as an agent's commands
// come — paid it before it could fork. The root's forker is a goroutine
// locked to its OS thread, kept in a spare v1 memory cgroup: a cgroup made
// with no memory limit takes the spare, renamed to its name (a v1 cgroup
// can be renamed with a thread in it; nothing moves), and its Start forks
// on the forker's thread, which is in place already. The forker then
// moves on into a new spare, off the start's path: the grace period, if
// any, is waited for there, holding the kernel's cgroup mutex, which a
// cgroup made or removed meanwhile waits for. A cgroup that finds no spare ready (another
// took it, or the forker is still moving) is made and started as before.
//
// A cgroup with a memory limit never takes the spare: the forker's thread
// stays in a taken cgroup for as long as its move out takes, and a thread
// of the daemon in a cgroup whose memory runs out can make the daemon a
// candidate for that cgroup's OOM kill (kernels that look at every thread
// of the cgroup for it). Nor does one that needs another v1 controller (a
// pids or CPU limit): the spare holds memory only.
type forker struct {
	memory v1dir // the root's v1 memory cgroup, and the daemon's own there
	reqs   chan forkReq
	done   chan struct{} // closed when the goroutine has ended

	mu      sync.Mutex
	spare   string        // the ready spare's directory; "" when none is ready
	left    chan struct{} // closed once the thread has left the spare taken last
	stopped bool
	seq     int
}

// forkReq is what the forker is asked to do: start cmd into cg, leave a
// spare that was taken and will not be started in (cmd nil), or end.
type forkReq struct {
	cg    *cgroup
	cmd   *exec.Cmd
	start func(*exec.Cmd) error
	stop  bool
	reply chan error
}

// newForker starts the forker of a root whose v1 memory cgroup is memory.
// Its first spare is made in the background.
func newForker(memory v1dir) *forker {
	f := &forker{memory: memory, reqs: make(chan forkReq), done: make(chan struct{})}
	go f.run()
	return f
}

// take renames the ready spare to dir, and returns the channel that is
// closed once the forker's thread has left it; false when no spare is
// ready (or the rename failed, and the spare stays).
func (f *forker) take(dir string) (<-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spare == "" || f.stopped {
		return nil, false
	}
	if err := os.Rename(f.spare, dir); err != nil {
		return nil, false
	}
	f.spare = ""
	f.left = make(chan struct{})
	return f.left, true
}

// start starts cmd into cg from the forker's thread, in the spare taken
// for cg (see take).
func (f *forker) start(cg *cgroup, cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	reply := make(chan error, 1)
	select {
	case f.reqs <- forkReq{cg: cg, cmd: cmd, start: start, reply: reply}:
		return <-reply
	case <-f.done:
		return errors.New("start in cgroup: the root is destroyed")
	}
}

// abandon has the forker's thread leave a taken spare that will not be
// started in, and returns once it has.
func (f *forker) abandon(left <-chan struct{}) {
	reply := make(chan error, 1)
	select {
	case f.reqs <- forkReq{reply: reply}:
		<-reply
	case <-f.done:
	}
	<-left
}

// stop ends the forker: its thread goes back to the daemon's own cgroup,
// and the spare it held is removed.
func (f *forker) stop() error {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	reply := make(chan error, 1)
	select {
	case f.reqs <- forkReq{stop: true, reply: reply}:
		return <-reply
	case <-f.done:
		return nil
	}
}

// run is the forker's goroutine. Its thread (never the leader, see
// lockedOffLeader) moves from spare to spare; one that cannot move ends
// the forker, and the thread with it (as a hybrid Start's thread that
// cannot move back).
func (f *forker) run() {
	defer close(f.done)
	defer func() {
		// A cgroup that took the spare last no longer waits for the
		// thread: it went home, or ended.
		f.mu.Lock()
		if f.left != nil {
			close(f.left)
			f.left = nil
		}
		f.mu.Unlock()
	}()
	lockedOffLeader(f.serve)
}

// serve is run's work, on its locked thread; it reports whether the thread
// went home.
func (f *forker) serve() bool {
	tid := strconv.Itoa(unix.Gettid())
	if f.next(tid) != nil {
		return false
	}
	for req := range f.reqs {
		switch {
		case req.stop:
			err := f.leave(tid)
			req.reply <- err
			return err == nil
		case req.cmd != nil:
			req.reply <- req.cg.Start(req.cmd, req.start)
		default:
			req.reply <- nil
		}
		if f.next(tid) != nil {
			return false
		}
	}
	return false
}

// next moves the thread out of the spare taken last, makes a new spare and
// moves the thread into it, and offers it to take. The thread makes the
// spare from the daemon's own cgroup: in the taken one it would have that
// cgroup charged for the new cgroup's memory. After an idle spell its
// first move waits for the grace period; the second does not.
func (f *forker) next(tid string) error {
	f.mu.Lock()
	f.seq++
	dir := filepath.Join(f.memory.dir, ".spare-"+strconv.Itoa(f.seq))
	left := f.left
	f.mu.Unlock()
	err := write(filepath.Join(f.memory.home, "tasks"), tid)
	if err == nil {
		err = os.Mkdir(dir, 0o755)
	}
	if err == nil {
		if err = write(filepath.Join(dir, "tasks"), tid); err != nil {
			_ = unix.Rmdir(dir)
		}
	}
	if err != nil {
		err = errors.Join(fmt.Errorf("make a spare cgroup: %w", err), f.leave(tid))
	}
	f.mu.Lock()
	if left != nil {
		close(left)
		f.left = nil
	}
	if err == nil && !f.stopped {
		f.spare = dir
	}
	f.mu.Unlock()
	return err
}

// leave moves the thread back to the daemon's own memory cgroup and
// removes the spare it held, when no cgroup took it.
func (f *forker) leave(tid string) error {
	err := write(filepath.Join(f.memory.home, "tasks"), tid)
	f.mu.Lock()
	spare := f.spare
	f.spare = ""
	f.mu.Unlock()
	if err == nil && spare != "" {
		err = rmdir(spare)
	}
	return err
}
