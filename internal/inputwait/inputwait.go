package inputwait

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/procfs"
)

// ErrPermission is returned, wrapped, when /proc does not show this process
// what a thread of the tree is blocked in: reading /proc/PID/syscall and
// /proc/PID/mem needs the right to ptrace it. Use errors.Is.
var ErrPermission = errors.New("no permission to see what a process is blocked in")

// ErrUnsupported is returned, wrapped, when this kernel has no
// /proc/PID/syscall (it is built without CONFIG_HAVE_ARCH_TRACEHOOK) or this
// architecture's system call numbers are not known here. Use errors.Is.
var ErrUnsupported = errors.New("cannot see what processes are blocked in on this system")

// An Input is the stdin pipe or terminal of a process tree, as [Waiting]
// recognises it among the files the tree's processes read. The zero Input
// matches nothing.
type Input struct {
	dev, ino uint64 // a pipe or FIFO
	rdev     uint64 // a terminal (or another character device)
	chr      bool   // rdev is set, dev and ino are not
	valid    bool
	quiet    []uint64 // sockets whose peers' waits only the tree ends (see WithQuietPeers)
	kin      []int    // processes whose files count as the tree's (see WithKin)
}

// WithKin returns in with the files of the processes pids counted as the
// tree's, though their threads are not looked at: a pipe one of them writes,
// or a socket whose peer one of them holds, is no input from outside. A
// code context's interpreter, running a cell, still holds the pipes of a
// child an earlier cell started and left running; that child's output
// wakes the interpreter's event loop, but is nothing the cell waits for.
func (in Input) WithKin(pids []int) Input {
	in.kin = pids
	return in
}

// sameFile reports whether in and o are the same pipe, FIFO or terminal.
func (in Input) sameFile(o Input) bool {
	return in.dev == o.dev && in.ino == o.ino && in.rdev == o.rdev && in.chr == o.chr && in.valid == o.valid
}

// WithQuietPeers returns in with one more thing counted as a wait only the
// tree can end: waiting to read a Unix socket whose peer is one of socks
// (socket inodes, from [SocketInode]). An engine that feeds a driver in the
// tree commands over a socket writes there only to end or interrupt what
// the tree runs, so a driver waiting for its next message is idle, not
// waiting for something from outside. Zeros are skipped.
func (in Input) WithQuietPeers(socks ...uint64) Input {
	in.quiet = nil
	for _, s := range socks {
		if s != 0 {
			in.quiet = append(in.quiet, s)
		}
	}
	return in
}

func (in Input) quietPeer(ino uint64) bool { return slices.Contains(in.quiet, ino) }

// SocketInode returns the inode of the socket (or other file) c.
func SocketInode(c syscall.Conn) (uint64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("socket inode: %w", err)
	}
	var st unix.Stat_t
	var statErr error
	if err := rc.Control(func(fd uintptr) { statErr = unix.Fstat(int(fd), &st) }); err != nil {
		return 0, fmt.Errorf("socket inode: %w", err)
	}
	if statErr != nil {
		return 0, fmt.Errorf("socket inode: %w", statErr)
	}
	return st.Ino, nil
}

// ptySlaveMajor is the major device number of every /dev/pts/N
// (UNIX98_PTY_SLAVE_MAJOR); the minor is N.
const ptySlaveMajor = 136

// InputOf returns the Input that f is: either end of a pipe or FIFO (such as
// the write end the caller feeds a process's stdin through), a terminal, or
// the master side of a pseudo-terminal, which stands for its /dev/pts/N.
func InputOf(f *os.File) (Input, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return Input{}, fmt.Errorf("input: %w", err)
	}
	var st unix.Stat_t
	var ptn int
	var statErr, ptnErr error
	err = rc.Control(func(fd uintptr) {
		statErr = unix.Fstat(int(fd), &st)
		ptn, ptnErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
	})
	if err == nil {
		err = statErr
	}
	if err != nil {
		return Input{}, fmt.Errorf("input: %w", err)
	}
	if ptnErr == nil { // a pseudo-terminal master: the processes read the slave
		return Input{rdev: unix.Mkdev(ptySlaveMajor, uint32(ptn)), chr: true, valid: true}, nil
	}
	return inputOfStat(&st), nil
}

func inputOfStat(st *unix.Stat_t) Input {
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return Input{rdev: st.Rdev, chr: true, valid: true}
	}
	return Input{dev: st.Dev, ino: st.Ino, valid: true}
}

// Waiting reports whether the process tree made of pids waits for input
// from in: a thread of it is blocked reading in and every other thread of
// it is blocked in a wait only the tree could end (see the package
// comment). The caller lists the tree, e.g. a process and its
// [github.com/conchsh/conch/internal/proctree.Descendants]. Pids that are
// gone or zombies are skipped. It fails with [ErrPermission] or
// [ErrUnsupported] when it cannot see what a thread is blocked in, rather
// than guess.
func Waiting(pids []int, in Input) (bool, error) {
	if unknownArch {
		return false, fmt.Errorf("inputwait: %w", ErrUnsupported)
	}
	t := &tree{in: in, pids: pids}
	defer t.peers.close()
	reading := false
	for _, pid := range pids {
		ths, err := threads(pid)
		if err != nil {
			return false, err
		}
		for _, th := range ths {
			v, err := t.thread(pid, th)
			if err != nil {
				return false, err
			}
			switch v {
			case busy:
				return false, nil
			case readingInput:
				reading = true
			}
		}
	}
	return reading, nil
}

// verdict is what one thread is doing, as far as waiting for input goes.
type verdict int

const (
	busy         verdict = iota // runs, or waits for something from outside the tree
	idle                        // blocked in a wait only the tree can end, or gone
	readingInput                // blocked reading the input
)

// task is a thread of a process, and its state when already read.
type task struct {
	tid   int
	state byte // 0: not read yet
}

// threads lists the threads of pid; none when it is gone. Most processes
// have one, which /proc/PID/stat says with its state, and then the task
// directory is not read.
func threads(pid int) ([]task, error) {
	st, n := stat("/proc/" + strconv.Itoa(pid))
	if st == 0 {
		return nil, nil
	}
	if n == 1 {
		return []task{{pid, st}}, nil
	}
	tids, err := tasks(pid)
	ths := make([]task, len(tids))
	for i, tid := range tids {
		ths[i] = task{tid: tid}
	}
	return ths, err
}

// tasks lists the threads in /proc/PID/task.
func tasks(pid int) ([]int, error) {
	names, err := procfs.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inputwait: %w", err)
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
