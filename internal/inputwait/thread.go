package inputwait

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/procfs"
)

// call is a kind of system call a thread can be blocked in.
type call int

const (
	callOther       call = iota // anything else: the thread is busy
	callRead                    // read(fd, ...) and its vector and positional forms
	callIdle                    // a wait only the tree can end: a child, a signal, a futex
	callPoll                    // poll(fds, nfds, int timeout)
	callPpoll                   // ppoll(fds, nfds, *timespec, ...)
	callSelect                  // select(nfds, r, w, e, *timeval)
	callPselect                 // pselect6(nfds, r, w, e, *timespec, ...)
	callEpollWait               // epoll_wait, epoll_pwait(epfd, events, max, int timeout, ...)
	callEpollPwait2             // epoll_pwait2(epfd, events, max, *timespec, ...)
)

// calls are the system calls every architecture has; legacyCalls (one file
// per architecture) adds the older ones some have kept.
var calls = map[int]call{
	unix.SYS_READ:          callRead,
	unix.SYS_READV:         callRead,
	unix.SYS_PREAD64:       callRead,
	unix.SYS_PREADV:        callRead,
	unix.SYS_PREADV2:       callRead,
	unix.SYS_WAIT4:         callIdle,
	unix.SYS_WAITID:        callIdle,
	unix.SYS_FUTEX:         callIdle,
	unix.SYS_RT_SIGSUSPEND: callIdle,
	unix.SYS_PPOLL:         callPpoll,
	unix.SYS_PSELECT6:      callPselect,
	unix.SYS_EPOLL_PWAIT:   callEpollWait,
	unix.SYS_EPOLL_PWAIT2:  callEpollPwait2,
}

func callOf(nr int) call {
	if c, ok := calls[nr]; ok {
		return c
	}
	return legacyCalls[nr]
}

// tree is one look at a process tree.
type tree struct {
	in      Input
	pids    []int
	writers map[string]bool // fd links of the pipes and FIFOs the tree may write; nil until scanned
	sockets map[uint64]bool // inodes of the sockets the tree holds; nil until scanned
	peers   unixPeers
}

// thread tells what the thread tid of pid is doing. A futex wait counts as
// idle whatever its timeout: runtimes park their helper threads on futexes
// with long timeouts (Go's sysmon, 60 s) and go back to sleep when one runs
// out with nothing to do.
func (t *tree) thread(pid int, th task) (verdict, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(th.tid)
	st := th.state
	if st == 0 {
		st, _ = stat(dir)
	}
	switch st {
	case 0, 'Z', 'X', 'x': // gone or dead: it does nothing
		return idle, nil
	case 'T':
		// Stopped by a signal (Ctrl-Z's TSTP, STOP, a background job's
		// TTIN): it goes on only when continued — at a terminal, by the
		// user at the prompt (fg) — so it waits as the reader does. A
		// traced thread ('t') is run by its tracer, from outside.
		return idle, nil
	case 'S':
	default: // running, in uninterruptible I/O, or traced
		return busy, nil
	}
	sc, err := readSyscall(dir)
	if err != nil || !sc.blocked {
		return busy, err
	}
	a := sc.args
	switch callOf(sc.nr) {
	case callRead:
		switch t.fdKind(dir, int(int32(a[0]))) {
		case fdInput:
			return readingInput, nil
		case fdInternal:
			return idle, nil
		}
		return busy, nil
	case callIdle:
		return idle, nil
	case callPoll:
		return t.poll(pid, dir, a[0], a[1], int32(a[2]) < 0)
	case callPpoll:
		return t.poll(pid, dir, a[0], a[1], a[2] == 0)
	case callSelect, callPselect:
		return t.selectSets(pid, dir, a[0], a[1], a[2], a[4] == 0)
	case callEpollWait:
		return t.epoll(dir, int(int32(a[0])), int32(a[3]) < 0)
	case callEpollPwait2:
		return t.epoll(dir, int(int32(a[0])), a[3] == 0)
	}
	return busy, nil
}

// stat returns the state letter of the process or thread at dir (R, S, D,
// Z, T...) and its process's number of threads, or 0 when it is gone.
func stat(dir string) (state byte, threads int) {
	b, err := procfs.ReadFile(dir+"/stat", make([]byte, 0, 512))
	if err != nil {
		return 0, 0
	}
	// The command name is in parentheses and may hold anything: count
	// from the last ')'. Then come state (field 3) ... num_threads (20).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 18 || len(f[0]) != 1 {
		return 0, 0
	}
	threads, _ = strconv.Atoi(string(f[17]))
	return f[0][0], threads
}

// syscallState is what /proc/PID/task/TID/syscall says.
type syscallState struct {
	blocked bool // in a system call, not running nor blocked outside one
	nr      int
	args    [6]uint64
}

// readSyscall reads dir/syscall: "NR ARG1 ... ARG6 SP PC" in hex while the
// thread is blocked in a system call, "-1 SP PC" when it is blocked outside
// one (a page fault), "running" when it runs.
func readSyscall(dir string) (syscallState, error) {
	b, err := procfs.ReadFile(dir+"/syscall", make([]byte, 0, 256))
	if err != nil {
		return syscallState{}, syscallFileError(dir, err)
	}
	f := bytes.Fields(b)
	if len(f) < 7 {
		return syscallState{}, nil
	}
	nr, err := strconv.Atoi(string(f[0]))
	if err != nil || nr < 0 {
		return syscallState{}, nil
	}
	sc := syscallState{blocked: true, nr: nr}
	for i := range sc.args {
		v, err := strconv.ParseUint(string(bytes.TrimPrefix(f[i+1], []byte("0x"))), 16, 64)
		if err != nil {
			return syscallState{}, fmt.Errorf("inputwait: %s/syscall: bad argument %q", dir, f[i+1])
		}
		sc.args[i] = v
	}
	return sc, nil
}

// syscallFileError turns the error of reading dir/syscall into what it
// means: no permission, no such file on this kernel, or (nil) a thread that
// exited meanwhile.
func syscallFileError(dir string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("inputwait: %s: %w", dir, ErrPermission)
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(dir); serr == nil {
			return fmt.Errorf("inputwait: %s/syscall: %w", dir, ErrUnsupported)
		}
		return nil
	case errors.Is(err, syscall.ESRCH):
		return nil
	}
	return fmt.Errorf("inputwait: %w", err)
}
