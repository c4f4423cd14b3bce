package proctree

import (
	"errors"
	"os"
	"syscall"
)

// maxRounds bounds how often Signal looks again at a tree that keeps forking.
const maxRounds = 8

// Signal sends sig to every descendant of pid (see [Descendants]) and, when
// self is true, to pid too. The tree is read before anything is signalled,
// so that children of a parent that dies of the signal are reached although
// they are reparented out of the tree; pid is signalled first, so that a
// parent does not see its children die and exit by itself. Signal then looks
// again for the descendants of every process it has signalled until a look
// finds no new one (at most 8 times), which reaches children forked while it
// runs. When self is true and pid leads a process group, the group is
// signalled too, which reaches members whose parent has died. A process that
// is already gone is not an error; the first other error is returned after
// every process has been tried.
func Signal(pid int, sig syscall.Signal, self bool) error {
	return signalTree(pid, sig, self, links)
}

// signalTree is Signal with the tree read through look.
func signalTree(pid int, sig syscall.Signal, self bool, look func() lister) error {
	var first error
	note := func(err error) {
		if err != nil && !errors.Is(err, syscall.ESRCH) && first == nil {
			first = err
		}
	}
	seen := map[int]bool{pid: true}
	todo := descendants(look(), seen)
	if self {
		note(Send(pid, sig))
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			note(syscall.Kill(-pid, sig))
		}
	}
	for round := 0; len(todo) > 0 && round < maxRounds; round++ {
		for _, p := range todo {
			note(Send(p, sig))
		}
		todo = descendants(look(), seen)
	}
	return first
}

// Send sends sig to pid, then continues it if it is stopped and sig is one
// that ends a process (see [Unstop]).
func Send(pid int, sig syscall.Signal) error {
	err := syscall.Kill(pid, sig)
	Unstop(pid, sig)
	return err
}

// Unstop continues pid, once sig has been sent to it, if a signal stopped
// it (SIGSTOP, SIGTSTP) and sig is one that ends a process (INT, TERM,
// HUP, QUIT): sent to a stopped process, such a signal waits, pending, for
// a SIGCONT that may never come, so that an interrupt would do nothing and
// a session's execution timeout would end the session. A service manager
// sends SIGCONT after SIGTERM for the same reason.
func Unstop(pid int, sig syscall.Signal) {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		if Stopped(pid) {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// SignalTagged sends sig to every process [Tagged] with id, to their
// descendants and to their process groups. It finds what [Signal] cannot:
// orphans reparented away from the tree they were started in, and the
// members of a group whose leader has exited. A group is signalled at once
// by the kernel, so a chain of processes that each fork and exit — which
// outruns any scan of /proc — ends with its group. The groups signalled are
// those the tagged processes are in, which are made by the tree's own
// processes (a process can only join a group of its own session) — but for
// the caller's own group, which a tree started without a group of its own
// shares, and the groups of its ancestors, which are never signalled.
func SignalTagged(id string, sig syscall.Signal) error {
	return signalAll(Tagged(id), sig)
}

// SignalMarked sends sig to every process [Marked] with instance, to their
// descendants and to their process groups, as [SignalTagged] does.
func SignalMarked(instance string, sig syscall.Signal) error {
	return signalAll(Marked(instance), sig)
}

// signalAll sends sig to each of pids, their descendants and their groups,
// but never to this process or its ancestors, nor to a group one of them is
// in: a process found by its environment may be one that this process runs
// under.
func signalAll(pids []int, sig syscall.Signal) error {
	var first error
	note := func(err error) {
		if err != nil && !errors.Is(err, syscall.ESRCH) && first == nil {
			first = err
		}
	}
	spare, spareGroups := lineage()
	groups := make(map[int]bool)
	for _, p := range pids {
		if spare[p] {
			continue
		}
		if s, ok := readStat(p); ok && s.pgid > 1 && !spareGroups[s.pgid] && !groups[s.pgid] {
			groups[s.pgid] = true
			note(syscall.Kill(-s.pgid, sig))
		}
		if spareGroups[p] { // a leader of a spared group: not through its group
			note(syscall.Kill(p, sig))
			note(Signal(p, sig, false))
			continue
		}
		note(Signal(p, sig, true))
	}
	return first
}

// lineage returns this process and its ancestors, and their groups.
func lineage() (pids, groups map[int]bool) {
	pids, groups = map[int]bool{}, map[int]bool{syscall.Getpgrp(): true}
	for p := os.Getpid(); p > 0 && !pids[p]; {
		pids[p] = true
		s, ok := readStat(p)
		if !ok {
			break
		}
		groups[s.pgid] = true
		p = s.ppid
	}
	return pids, groups
}

// Group returns the live processes in process group pgid (zombies left
// out). A group's id is its first leader's pid, which the kernel does not
// give to another process while the group has a member: a group found
// with members is still the one that pid made.
func Group(pgid int) []int {
	if pgid <= 1 {
		return nil
	}
	var out []int
	for _, s := range stats.get().all {
		if s.pgid == pgid && s.state != 'Z' {
			out = append(out, s.pid)
		}
	}
	return out
}

// SignalGroup sends sig to process group pgid when it still has a live
// member, and never when it is this process's group or an ancestor's. It
// reaches a group whose leader has exited, members that cleared their
// environment (which carry no tag) included.
func SignalGroup(pgid int, sig syscall.Signal) error {
	if _, spare := lineage(); spare[pgid] || len(Group(pgid)) == 0 {
		return nil
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
