package inputwatch

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pending reports whether output of the processes pids is still on its way:
// bytes in the pipe or FIFO their stdout or stderr is, not read yet by
// whoever reads it (the engine), or in the output queue of their terminal.
// A process that printed a prompt and then blocked reading is not waiting
// for the caller until the prompt is in its log, so that the answer that
// says it waits holds the prompt.
//
// Each is looked at through /proc/PID/fd/N, which opens the same pipe (a
// reader that never reads) or terminal; only a yes of both looks gets here,
// so this costs nothing while a process is busy.
func pending(pids []int) bool {
	for _, pid := range pids {
		for _, fd := range []int{1, 2} {
			if queued(pid, fd) > 0 {
				return true
			}
		}
	}
	return false
}

// queued returns the bytes waiting in the pipe or terminal of the
// process's descriptor fd; zero when it is neither or is gone.
func queued(pid, fd int) int {
	path := "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	req := uint(unix.TIOCINQ) // FIONREAD: bytes a reader of the pipe would get
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
	case unix.S_IFCHR:
		// Bytes in the terminal's output queue. A pseudo-terminal hands
		// what is written to its master at once, so for a PTY this says
		// little: there the quiet time and the second look stand guard.
		req = unix.TIOCOUTQ
	default:
		return 0
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), req)
	})
	return n
}
