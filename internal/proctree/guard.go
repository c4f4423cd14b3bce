package proctree

import (
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/conchsh/conch/internal/rawcall"
)

// The guardian ends what this process started in sessions of their own
// (Setsid) once this process has ended, however it ended: SIGKILL, the OOM
// killer, a crash, or a main that returned with processes still running.
// Without it a session's shell, or a program a one-shot process ran, lived
// on as an orphan (a loop of a session's command ran for ever).
//
// It is a shell (/bin/sh) started once, in a session of its own, that
// ignores every signal it can and reads lines from a pipe whose only write
// end this process holds (close-on-exec, so no child inherits it): "+PID"
// when [Start] started a process group leader, "-PID" when [Wait] reaped it.
// At end-of-file, which comes when this process is gone, it sends SIGKILL to
// every group still listed, and exits. A group outlives its leader while
// others are in it (a job a command left running with &), so its id names
// no other group until all of them are gone: a group whose leader was
// reaped here stays listed while it has members, which each later "-" line
// looks for (kill -0), and is killed at the end unless its id is a live
// process's again. What left its group (setsid) is not reached; nor is
// anything once the guardian itself is killed (only SIGKILL and SIGSTOP
// reach it).
//
// The lines are written without blocking: a guardian stopped or killed
// does not hold up a start, and a line that does not fit in the pipe is
// lost (the pipe holds thousands).
const guardianScript = `trap '' HUP INT QUIT TERM TSTP TTIN TTOU USR1 USR2 PIPE ALRM
g=' '
r=' '
while read -r l; do
	case $l in
	+*) g="$g${l#+} " ;;
	-*)
		case $g in *" ${l#-} "*) g="${g%% ${l#-} *} ${g#* ${l#-} }"; r="$r${l#-} " ;; esac
		k=' '
		for p in $r; do kill -0 "-$p" 2>/dev/null && k="$k$p "; done
		r=$k ;;
	esac
done
for p in $g; do kill -9 "-$p" 2>/dev/null; done
for p in $r; do kill -0 "$p" 2>/dev/null || kill -9 "-$p" 2>/dev/null; done
`

// guardianShell runs the guardian.
const guardianShell = "/bin/sh"

var (
	guardianOnce  sync.Once
	guardianTried atomic.Bool  // startGuardian has run
	guardianFD    atomic.Int32 // the pipe's write end plus 1: 0 while there is no guardian
	guardianPID   atomic.Int32
)

// ensureGuardian starts the guardian unless it was tried already. It forks
// from a goroutine of its own: the caller may be the thread that moved
// itself into a process's cgroups to fork it (see containment), where the
// guardian would be counted in that process's limits and killed with it.
func ensureGuardian() {
	if guardianTried.Load() {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		startGuardian()
	}()
	<-done
}

// startGuardian starts the guardian, once; without /bin/sh, or when it
// cannot start, there is none.
func startGuardian() {
	guardianOnce.Do(func() {
		defer guardianTried.Store(true)
		var p [2]int
		if syscall.Pipe2(p[:], syscall.O_CLOEXEC) != nil {
			return
		}
		r := os.NewFile(uintptr(p[0]), "guardian")
		defer r.Close()
		null, err := os.Open(os.DevNull)
		if err != nil {
			syscall.Close(p[1])
			return
		}
		defer null.Close()
		proc, err := os.StartProcess(guardianShell, []string{"conch-guardian", "-c", guardianScript}, &os.ProcAttr{
			Dir:   "/",
			Env:   []string{"PATH=/usr/bin:/bin"},
			Files: []*os.File{r, null, null},
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
		if err != nil {
			syscall.Close(p[1])
			return
		}
		guardianPID.Store(int32(proc.Pid))
		proc.Release() // never waited for: the reaper, where one runs, reaps it
		// The write end stays open for this process's life, without
		// blocking (see guardianScript).
		if syscall.SetNonblock(p[1], true) != nil {
			syscall.Close(p[1])
			return
		}
		guardianFD.Store(int32(p[1]) + 1)
	})
}

// GuardianPID returns the guardian's pid, or 0 when none runs: a child of
// this process that is none of its trees'.
func GuardianPID() int {
	if guardianFD.Load() == 0 {
		return 0
	}
	return int(guardianPID.Load())
}

// leadsSession reports whether cmd starts in a session of its own, as the
// leader of its process group: one the guardian is told of.
func leadsSession(cmd *exec.Cmd) bool { return cmd.SysProcAttr != nil && cmd.SysProcAttr.Setsid }

// tellGuardian writes the line sign+pid to the guardian, if there is one.
func tellGuardian(sign byte, pid int) {
	fd := int(guardianFD.Load()) - 1
	if fd < 0 {
		return
	}
	var buf [24]byte
	b := strconv.AppendInt(append(buf[:0], sign), int64(pid), 10)
	rawcall.Write(fd, append(b, '\n'))
}
