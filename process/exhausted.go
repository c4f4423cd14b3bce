package process

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Exhausted reports whether err is the system's refusal of what a start
// needs, rather than a fault of the request or the daemon: open files
// (EMFILE, the daemon's RLIMIT_NOFILE; ENFILE, the system's table), a new
// process (fork's EAGAIN under a limit of processes, ENOMEM when memory is
// short) or room for a file (ENOSPC, EDQUOT: a session's FIFOs and a code
// context's driver are made in /dev/shm, which commands can fill). It returns what to tell the client, saying which limit and what
// to do. Another try may work once other work has ended, so the APIs answer
// it as their limits (HTTP 429 resource_exhausted, gRPC RESOURCE_EXHAUSTED).
func Exhausted(err error) (string, bool) {
	switch {
	case OutOfFiles(err):
		return fmt.Sprintf("%s (%v)", OutOfFilesWhy(err), err), true
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("no room for the files a start makes (%v): the file system is full, of bytes or of inodes, or at a quota: free some room there (what commands left in /dev/shm), then retry", err), true
	case forkRefused(err):
		return fmt.Sprintf("no new process could be started (%v): a limit of processes is reached (a pids cgroup, the machine's), or memory is short: end some sessions or processes, then retry", err), true
	}
	return "", false
}

// OutOfFilesWhy says which limit of open files err (see OutOfFiles) is
// of, with its value, and what to do, in words for a client.
func OutOfFilesWhy(err error) string {
	if errors.Is(err, syscall.ENFILE) {
		return "the system's table of open files is full: end some sessions or processes"
	}
	var lim syscall.Rlimit
	n := "?"
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		n = strconv.FormatUint(lim.Cur, 10)
	}
	return fmt.Sprintf("the daemon is at its limit of open files (%s, RLIMIT_NOFILE): end some sessions or processes, or start it with a higher limit", n)
}

// OutOfFiles reports whether err is the want of a descriptor: the
// daemon's RLIMIT_NOFILE (EMFILE) or the system's table (ENFILE).
func OutOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// forkRefused reports whether err is the kernel's refusal of a fork: EAGAIN
// when a limit of processes is reached, ENOMEM when memory is short. Only a
// fork's: the same errnos of a read or a write say something else.
func forkRefused(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Op == "fork/exec" &&
		(errors.Is(pe.Err, syscall.EAGAIN) || errors.Is(pe.Err, syscall.ENOMEM))
}
