package proctree

import (
	"errors"
	"syscall"
)

// maxRounds bounds how often Signal rescans a tree that keeps forking.
const maxRounds = 8

// Signal sends sig to every descendant of pid (see [Descendants]) and, when
// self is true, to pid too. The tree is read before anything is signalled,
// so that children of a parent that dies of the signal are reached although
// they are reparented out of the tree; pid is signalled first, so that a
// parent does not see its children die and exit by itself. Signal then
// rescans the descendants of every process it has signalled until a scan
// finds no new one (at most 8 times), which reaches children forked while it
// runs. When self is true and pid leads a process group, the group is
// signalled too, which reaches members whose parent has died. A process that
// is already gone is not an error; the first other error is returned after
// every process has been tried.
func Signal(pid int, sig syscall.Signal, self bool) error {
	var first error
	note := func(err error) {
		if err != nil && !errors.Is(err, syscall.ESRCH) && first == nil {
			first = err
		}
	}
	seen := map[int]bool{pid: true}
	todo := descendants(parentLinks(), seen)
	if self {
		note(syscall.Kill(pid, sig))
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			note(syscall.Kill(-pid, sig))
		}
	}
	for round := 0; len(todo) > 0 && round < maxRounds; round++ {
		for _, p := range todo {
			note(syscall.Kill(p, sig))
		}
		todo = descendants(parentLinks(), seen)
	}
	return first
}

// SignalTagged sends sig to every process [Tagged] with id and to their
// descendants. It finds what [Signal] cannot: orphans reparented away from
// the tree they were started in.
func SignalTagged(id string, sig syscall.Signal) error {
	var first error
	for _, p := range Tagged(id) {
		if err := Signal(p, sig, true); err != nil && first == nil {
			first = err
		}
	}
	return first
}
