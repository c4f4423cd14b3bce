package proctree

import (
	"errors"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnableSubreaper makes this process the child subreaper of its descendants
// (prctl PR_SET_CHILD_SUBREAPER): an orphan among them is reparented to this
// process rather than to init, so that [StartReaper] reaps it and [Tagged]
// still finds it among this process's processes. PID 1 is a subreaper by
// nature and needs no call.
func EnableSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl PR_SET_CHILD_SUBREAPER", Err: err}
	}
	return nil
}

var (
	// startMu is held shared around cmd.Start and exclusively by a reaper
	// scan, so that no child exists unregistered while the reaper looks.
	startMu sync.RWMutex

	ownedMu sync.Mutex // guards owned and ownedEnv
	owned   = make(map[int]bool)
	// ownedEnv is what each owned process was started with of its
	// environment that [Tagged] looks for (its tags), when its command
	// set one: not the rest, which may be megabytes a process that no
	// one would read again. An entry goes with its
	// process's owned one: a pid is handed out again only once the pids
	// have wrapped around, long after.
	ownedEnv = make(map[int][]string)
)

// tagsOf returns the tag entries of env, in a slice of their own.
func tagsOf(env []string) []string {
	tags := []string{}
	for _, e := range env {
		if strings.HasPrefix(e, TagEnv+"=") {
			tags = append(tags, strings.Clone(e))
		}
	}
	return tags
}

// knownEnvs returns the tag entries of the environments the owned
// processes were started with.
func knownEnvs() map[int][]string {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	return maps.Clone(ownedEnv)
}

// Start starts cmd like cmd.Start and registers its process as owned, so
// that the reaper leaves its exit status to [Wait]. Every child started while
// a reaper runs must be started through Start (or run its own reaping). A
// process started in a session of its own (Setsid) is also given to the
// guardian, which kills its group should this process end before [Wait]
// reaped it (see guardianScript). Every child starts with SIGINT, SIGHUP,
// SIGPIPE and SIGQUIT at their default disposition, however this process
// was started (see resetChildSignals): each package that started children
// had to ask for it, and package exec did not.
func Start(cmd *exec.Cmd) error {
	resetChildSignals()
	startMu.RLock()
	defer startMu.RUnlock()
	closeOnExec()
	leader := leadsSession(cmd)
	if leader {
		ensureGuardian()
	}
	if err := cmd.Start(); err != nil {
		return pastLimit(cmd, err)
	}
	ownedMu.Lock()
	owned[cmd.Process.Pid] = true
	if cmd.Env != nil {
		ownedEnv[cmd.Process.Pid] = tagsOf(cmd.Env)
	}
	ownedMu.Unlock()
	if leader {
		tellGuardian('+', cmd.Process.Pid)
	}
	return nil
}

// pastLimit returns err, cmd's failed start, as the shortage of open files
// it is when Go's fork reports a bad descriptor while every descriptor of
// cmd's is open. Before its exec the child moves its descriptors by way of
// the number above the highest one it is handed (see forkAndExecInChild in
// package syscall), and dup3 refuses a number at or past the limit of open
// files with EBADF: a process whose descriptors reach the top of its
// limit could not start the child, which callers answer as EMFILE (the
// daemon's 429) but took for a program that cannot run. A descriptor of
// cmd's that is closed, a bug, still reports EBADF.
func pastLimit(cmd *exec.Cmd, err error) error {
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "fork/exec" || pe.Err != syscall.EBADF {
		return err
	}
	files := slices.Clone(cmd.ExtraFiles)
	for _, std := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if f, ok := std.(*os.File); ok {
			files = append(files, f)
		}
	}
	open := func(fd uintptr) bool {
		_, e := unix.FcntlInt(fd, unix.F_GETFD, 0)
		return e == nil
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		// Not f.Fd, which would put a file of the caller's in blocking
		// mode: a closed file's Control fails.
		ok := false
		if rc, rerr := f.SyscallConn(); rerr == nil {
			rc.Control(func(fd uintptr) { ok = open(fd) })
		}
		if !ok {
			return err
		}
	}
	if a := cmd.SysProcAttr; a != nil && a.UseCgroupFD && !open(uintptr(a.CgroupFD)) {
		return err
	}
	return &os.PathError{Op: pe.Op, Path: pe.Path, Err: syscall.EMFILE}
}

// closeRangeCloexec is close_range's CLOSE_RANGE_CLOEXEC
// (linux/close_range.h), which golang.org/x/sys does not name.
const closeRangeCloexec = 1 << 2

// closeOnExec marks every descriptor of this process from 3 up
// close-on-exec, so that a child gets those its command hands it (stdin,
// stdout, stderr, ExtraFiles) and no other. Go opens its own so; one this
// process inherited without (from a supervisor, a test harness) or that C
// code opened would reach every command a session runs, which could write
// to it. One call before each start, raw as it returns at once (see
// internal/rawcall), on Linux 5.11 and later; where the kernel lacks it,
// the descriptors open now are marked once, by a walk of /proc/self/fd.
func closeOnExec() {
	_, _, e := unix.RawSyscall(unix.SYS_CLOSE_RANGE, 3, math.MaxUint32, closeRangeCloexec)
	if e != 0 {
		closeOnExecOnce()
	}
}

var closeOnExecOnce = sync.OnceFunc(closeOnExecByWalk)

// closeOnExecByWalk marks close-on-exec every descriptor from 3 up that
// /proc/self/fd lists now: close_range's work, for kernels without it.
func closeOnExecByWalk() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// Wait waits for a command started with [Start], like cmd.Wait, and then
// releases its pid for reuse. A command waited with cmd.Wait directly is
// released at the reaper's next scan instead.
func Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	if cmd.Process != nil {
		ownedMu.Lock()
		delete(owned, cmd.Process.Pid)
		delete(ownedEnv, cmd.Process.Pid)
		ownedMu.Unlock()
		if leadsSession(cmd) {
			tellGuardian('-', cmd.Process.Pid)
		}
	}
	// The reaper may have found this zombie first and left it; zombies
	// behind it are visible now.
	select {
	case nudge <- struct{}{}:
	default:
	}
	return err
}

// nudge asks the reaper to look again without a SIGCHLD.
var nudge = make(chan struct{}, 1)

var (
	reaperMu      sync.Mutex // guards reaperRunning
	reaperRunning bool
)

// ErrReaperRunning is returned by StartReaper when a reaper runs already.
var ErrReaperRunning = errors.New("a reaper runs already")

// StartReaper starts a goroutine that reaps, on every SIGCHLD, every zombie
// child of this process that was not started with [Start]: the orphans this
// process inherits as a subreaper or as PID 1. It does not poll: it wakes on
// SIGCHLD, on a [Wait], and 50 ms after it found an owned zombie that is not
// waited for yet in front of the others, to look behind it. Only one reaper
// runs per process. stop ends the goroutine and returns once it has.
func StartReaper() (stop func(), err error) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if reaperRunning {
		return nil, ErrReaperRunning
	}
	reaperRunning = true
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		scan := time.NewTimer(0) // orphans inherited before the reaper started
		defer scan.Stop()
		scanning := true // scan is armed
		for {
			select {
			case <-sigs:
			case <-nudge:
			case <-scan.C:
				scanning = false
				startMu.Lock()
				reapAll()
				startMu.Unlock()
				continue
			case <-quit:
				return
			}
			if reap() && !scanning {
				scan.Reset(scanDelay)
				scanning = true
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			<-done
			reaperMu.Lock()
			reaperRunning = false
			reaperMu.Unlock()
		})
	}, nil
}

// scanDelay is how long the reaper leaves orphans that may hide behind an
// owned zombie before it looks at every child.
const scanDelay = 50 * time.Millisecond

// reap reaps zombie children that are not owned, peeking at the first
// zombie rather than reading /proc: most SIGCHLDs are an owned child's exit,
// which its Wait reaps (often before the peek) and then nudges the reaper
// to look past it. It reports whether it stopped at an owned zombie, which
// may hide orphans behind it if no Wait comes; the caller then scans every
// child scanDelay later. SIGCHLD coalesces, so one call reaps every orphan
// it sees rather than one.
func reap() (blocked bool) {
	for {
		pid := firstZombie()
		if pid <= 0 {
			return false
		}
		startMu.Lock()
		ownedMu.Lock()
		mine := owned[pid]
		ownedMu.Unlock()
		if !mine {
			// With startMu held no Start is between fork and registration,
			// so a zombie that is not owned is an orphan.
			wait4(pid)
		}
		startMu.Unlock()
		if mine {
			return true
		}
	}
}

// siginfo is the start of the kernel's siginfo_t for SIGCHLD, padded to its
// full 128 bytes; x/sys/unix does not expose si_pid.
type siginfo struct {
	signo, errno, code, _ int32
	pid, uid, status      int32
	_                     [128 - 7*4]byte
}

// firstZombie returns the pid of a zombie child without reaping it, 0 when
// there is none, or -1 when there are no children.
func firstZombie() int {
	var si siginfo
	for {
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_ALL, 0, uintptr(unsafe.Pointer(&si)),
			unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
		switch e {
		case 0:
			return int(si.pid)
		case unix.EINTR:
			continue
		}
		return -1
	}
}

func wait4(pid int) bool {
	var ws syscall.WaitStatus
	for {
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		return got == pid
	}
}

// reapAll reaps every zombie child that is not owned, looking at every
// child. startMu must be held.
func reapAll() {
	kids := children()
	ownedMu.Lock()
	for pid := range owned {
		// An owned pid no longer our child was waited for with cmd.Wait
		// rather than Wait. Absence from kids alone does not prove it: the
		// children files may miss an entry while the list changes.
		if !kids[pid] {
			if s, ok := readStat(pid); !ok || s.PPID != self {
				delete(owned, pid)
				delete(ownedEnv, pid)
			}
		}
	}
	var orphans []int
	for pid := range kids {
		if !owned[pid] {
			orphans = append(orphans, pid)
		}
	}
	ownedMu.Unlock()
	for _, pid := range orphans {
		wait4(pid)
	}
}

var self = os.Getpid()

// children returns the pids of this process's children, zombies included,
// from the kernel's children lists of its threads (see [childrenOf]), or on
// a kernel without them a scan of every /proc/PID/stat.
func children() map[int]bool {
	if !childLists() {
		return childrenByStat()
	}
	kids := make(map[int]bool)
	for _, c := range childrenOf(self) {
		kids[c] = true
	}
	return kids
}

func childrenByStat() map[int]bool {
	kids := make(map[int]bool)
	for _, p := range pids() {
		if s, ok := readStat(p); ok && s.PPID == self {
			kids[p] = true
		}
	}
	return kids
}
