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
// signalled, which reaches pid and members whose parent has died. Each
// process gets the signal once, directly or through its group. A process
// that is already gone is not an error; the first other error is returned
// after every process has been tried.
func Signal(pid int, sig syscall.Signal, self bool) error {
	d := newDelivery(sig)
	d.tree(pid, self, links)
	return d.first
}

// SignalProcess sends sig to a process the engine started, and to what it
// started: pid's tree (as [Signal] with self) while pid is not reaped, else
// pid's group while it has a member (as [SignalGroup]); then the processes
// [Tagged] with tag, their descendants and groups (as [SignalTagged]).
// Each process gets the signal once: a handler that counts interrupts
// counted two to four for one.
func SignalProcess(pid int, tag string, sig syscall.Signal, reaped bool) error {
	d := newDelivery(sig)
	switch {
	case pid > 0 && !reaped:
		d.tree(pid, true, links)
	case pid > 0:
		if _, spare := lineage(); !spare[pid] && len(Group(pid)) > 0 {
			d.group(pid)
		}
	}
	d.all(Tagged(tag))
	return d.first
}

// delivery is one signal sent to a set of processes: each gets it once,
// directly or through its process group.
type delivery struct {
	sig    syscall.Signal
	sent   map[int]bool // looked at: signalled directly or through its group
	groups map[int]bool // process groups signalled
	first  error        // the first error other than a process gone
}

func newDelivery(sig syscall.Signal) *delivery {
	return &delivery{sig: sig, sent: map[int]bool{}, groups: map[int]bool{}}
}

func (d *delivery) note(err error) {
	if err != nil && !errors.Is(err, syscall.ESRCH) && d.first == nil {
		d.first = err
	}
}

// group signals process group pgid, once.
func (d *delivery) group(pgid int) {
	if d.groups[pgid] {
		return
	}
	d.groups[pgid] = true
	d.note(syscall.Kill(-pgid, d.sig))
}

// process signals pid unless it had the signal already, itself or through
// its group; a stopped one is continued either way (see [Unstop]).
func (d *delivery) process(pid int) {
	if d.sent[pid] {
		return
	}
	d.sent[pid] = true
	if s, ok := readStat(pid); ok && d.groups[s.pgid] {
		Unstop(pid, d.sig)
		return
	}
	d.note(Send(pid, d.sig))
}

// tree is Signal with the tree read through look.
func (d *delivery) tree(pid int, self bool, look func() lister) {
	seen := map[int]bool{pid: true}
	todo := descendants(look(), seen)
	if self {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			d.group(pid)
		}
		d.process(pid)
	}
	for round := 0; len(todo) > 0 && round < maxRounds; round++ {
		for _, p := range todo {
			d.process(p)
		}
		todo = descendants(look(), seen)
	}
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
	d := newDelivery(sig)
	d.all(Tagged(id))
	return d.first
}

// SignalMarked sends sig to every process [Marked] with instance, to their
// descendants and to their process groups, as [SignalTagged] does.
func SignalMarked(instance string, sig syscall.Signal) error {
	d := newDelivery(sig)
	d.all(Marked(instance))
	return d.first
}

// all sends the signal to each of pids, their descendants and their
// groups, but never to this process or its ancestors, nor to a group one of
// them is in: a process found by its environment may be one that this
// process runs under.
func (d *delivery) all(pids []int) {
	spare, spareGroups := lineage()
	for _, p := range pids {
		if spare[p] {
			continue
		}
		if s, ok := readStat(p); ok && s.pgid > 1 && !spareGroups[s.pgid] {
			d.group(s.pgid)
		}
		if spareGroups[p] { // a leader of a spared group: not through its group
			d.process(p)
			d.tree(p, false, links)
			continue
		}
		d.tree(p, true, links)
	}
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
