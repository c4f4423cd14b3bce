package proctree

import (
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/rawcall"
)

// The guardian ends what this process started in sessions of their own
// (Setsid) once this process has ended, however it ended: SIGKILL, the OOM
// killer, a crash, or a main that returned with processes still running.
// Without it a session's shell, or a program a one-shot process ran, lived
// on as an orphan (a loop of a session's command ran for ever).
//
// It is a shell (/bin/sh, which may be dash or busybox: the script is
// POSIX) started once, in a session of its own, that ignores every signal
// it can and reads lines from a pipe whose only write end this process
// holds (close-on-exec, so no child inherits it): "+ PID TICKS" when
// [Start] started a process group leader, "- PID TICKS" when [Wait] reaped
// it, TICKS being the boot-time clock then, as the kernel counts a
// process's start (field 22 of /proc/PID/stat). At end-of-file, which
// comes when this process is gone, it sends SIGKILL to every group still
// listed that it can prove is still the one it was told of, and exits. A
// group outlives its leader while others are in it (a job a command left
// running with &): a group whose leader was reaped here stays listed while
// it has members, which each later "-" line looks for (kill -0).
//
// The proof rests on this: Linux hands a number out again only once no
// process has it as its pid, group or session, so a group of that number
// made later has only members that started after the group listed emptied,
// and after its leader was reaped. So a group is killed only when one of
// its members, in the session of the same number, started no later than
// the listed group's bound:
//
//   - for a group whose leader was reaped, the tick of the reap. A group
//     that emptied without another "-" line to unlist it, its number then
//     handed to another program (another daemon's one-shot, a `setsid`
//     child), has none, and is spared;
//   - for a group whose leader was not reaped here, the tick of this
//     process's end, read as the guardian reads end-of-file: until then
//     the leader, alive or a zombie, held the number. Its leader may end
//     just before the guardian acts (a session's shell hung up with its
//     terminal) and its jobs are still killed.
//
// A member that started in the same 10 ms tick as the bound counts as
// proof: a job a one-shot started with & in the tick its leader exited in
// ("cmd & exit 0") must die, and a group made of the number within that
// tick would need it handed out again within 10 ms of its release (or of
// this process's end, plus the guardian's wake-up).
//
// The lines are written without blocking: a guardian stopped or killed
// does not hold up a start, and a line that does not fit in the pipe is
// lost (the pipe holds thousands). A lost "-" line would leave a group
// listed as led by a leader long reaped, whose number may since name
// another program's group; so the first loss is written, with its tick,
// to a second pipe the guardian reads at the end, and from then on a
// group whose leader was not reaped here is bounded by the later of that
// tick and its start's. What left its group (setsid) is not reached; nor
// is anything once the guardian itself is killed (only SIGKILL and
// SIGSTOP reach it).
//
// The script keeps two lists, g of groups whose leader runs and r of those
// whose leader was reaped, of "PID:TICKS" words. A "+" line drops what
// either lists of the number first: this process was just given it for a
// new leader, so an entry of it left by a lost line is stale. A number of 0
// or 1 is never taken: kill -9 -1 would reach every process it may signal.
// The shell reads the end's tick from /proc/uptime (the same clock, in
// hundredths of a second), and each process's group, session and start
// from its stat, counting from the last ')' as the command name before it
// may hold spaces and parentheses; a member must be in the session of the
// group's number, since a group of that number in another session was
// made later, by setpgid. Its stderr is /dev/null (startGuardian): what a
// probe of a group gone says goes there with no redirection, which cost
// the shell eight calls on every "-" line, a fifth of a one-shot's.
const guardianScript = `trap '' HUP INT QUIT TERM TSTP TTIN TTOU USR1 USR2 PIPE ALRM
g=' '
r=' '
while read -r op p t; do
	case $p in ''|*[!0-9]*|0|1) continue ;; esac
	l=
	case $g in *" $p:"*) l=1; h=${g%% $p:*}; g=${g#* $p:}; g="$h ${g#* }" ;; esac
	case $r in *" $p:"*) h=${r%% $p:*}; r=${r#* $p:}; r="$h ${r#* }" ;; esac
	case $op in
	+) g="$g$p:$t " ;;
	-)
		[ -n "$l" ] && r="$r$p:$t "
		k=' '
		for e in $r; do kill -0 "-${e%:*}" && k="$k$e "; done
		r=$k ;;
	esac
done
read -r now x </proc/uptime
now=${now%.*}${now#*.}
now=${now#"${now%%[!0]*}"}
read -r lost <&3 || lost=
b=${lost:-$now}
c=' '
for e in $g; do t=${e#*:}; [ "$t" -gt "$b" ] 2>/dev/null || t=$b; c="$c${e%:*}:$t "; done
c="$c${r# }"
[ "$c" = ' ' ] && exit
for f in /proc/[0-9]*/stat; do
	read -r l 2>/dev/null <"$f" || continue
	set -- ${l##*)}
	case $c in *" $3:"*) ;; *) continue ;; esac
	t=${c#* $3:}; t=${t%% *}
	[ "$4" = "$3" ] && [ "${20}" -le "$t" ] 2>/dev/null || continue
	kill -9 "-$3" 2>/dev/null
	h=${c%% $3:*}; c=${c#* $3:}; c="$h ${c#* }"
done
`

// guardianShell runs the guardian.
const guardianShell = "/bin/sh"

var (
	guardianOnce  sync.Once
	guardianTried atomic.Bool  // startGuardian has run
	guardianFD    atomic.Int32 // the pipe's write end plus 1: 0 while there is no guardian
	guardianPID   atomic.Int32
	guardianLoss  int         // the write end of the pipe that tells of the first lost line
	guardianLost  atomic.Bool // a line was lost, and the guardian told so
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
		var p, loss [2]int
		if syscall.Pipe2(p[:], syscall.O_CLOEXEC) != nil {
			return
		}
		if syscall.Pipe2(loss[:], syscall.O_CLOEXEC) != nil {
			syscall.Close(p[0])
			syscall.Close(p[1])
			return
		}
		r := os.NewFile(uintptr(p[0]), "guardian")
		defer r.Close()
		lossR := os.NewFile(uintptr(loss[0]), "guardian-loss")
		defer lossR.Close()
		fail := func() {
			syscall.Close(p[1])
			syscall.Close(loss[1])
		}
		null, err := os.Open(os.DevNull)
		if err != nil {
			fail()
			return
		}
		defer null.Close()
		proc, err := os.StartProcess(guardianShell, []string{"conch-guardian", "-c", guardianScript}, &os.ProcAttr{
			Dir:   "/",
			Env:   []string{"PATH=/usr/bin:/bin"},
			Files: []*os.File{r, null, null, lossR},
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
		if err != nil {
			fail()
			return
		}
		guardianPID.Store(int32(proc.Pid))
		proc.Release() // never waited for: the reaper, where one runs, reaps it
		// The write end stays open for this process's life, without
		// blocking (see guardianScript).
		if syscall.SetNonblock(p[1], true) != nil || syscall.SetNonblock(loss[1], true) != nil {
			fail()
			return
		}
		guardianLoss = loss[1]
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

// tellGuardian writes the line "sign pid ticks" to the guardian, if there
// is one, ticks being the boot-time clock now (see guardianScript); the
// first line that does not fit is told of on the other pipe.
func tellGuardian(sign byte, pid int) {
	fd := int(guardianFD.Load()) - 1
	if fd < 0 {
		return
	}
	ticks, _ := ticksAt(time.Now()) // 0, which proves no group, when unread
	var buf [48]byte
	b := strconv.AppendInt(append(buf[:0], sign, ' '), int64(pid), 10)
	b = strconv.AppendUint(append(b, ' '), ticks, 10)
	if n, _ := rawcall.Write(fd, append(b, '\n')); n == 0 && guardianLost.CompareAndSwap(false, true) {
		rawcall.Write(guardianLoss, append(strconv.AppendUint(buf[:0], ticks, 10), '\n'))
	}
}
