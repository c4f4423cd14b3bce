package proctree

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
// started: pid's tree (as [Signal] with self) while pid is not reaped
// (reaped is zero), else pid's group while it is still the one pid made
// (see [LeftInGroup]; reaped is when pid was reaped, or a moment after);
// then the processes [Tagged] with tag, their descendants and groups (as
// [SignalTagged]). Each process gets the signal once: a handler that counts
// interrupts counted two to four for one.
//
// Once pid is reaped its number is free for another process, and so is the
// group's once its last member has gone: an unrelated process that was given
// the number, and its group, must not get the signal.
func SignalProcess(pid int, tag string, sig syscall.Signal, reaped time.Time) error {
	d := newDelivery(sig)
	switch {
	case pid > 0 && reaped.IsZero():
		d.tree(pid, true, links)
	case pid > 0:
		if len(LeftInGroup(pid, tag, reaped)) > 0 {
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
	if s, ok := readStat(pid); ok && d.groups[s.PGID] {
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

// SignalAll sends sig to each of pids, their descendants and their process
// groups, as [SignalTagged] does, in one delivery: a process reached from
// several of them (a process and its parent, two members of one group)
// gets the signal once. Sending each its own signal gave a descendant one
// for each of its ancestors listed, and a second SIGTERM makes many
// programs cut their own cleanup short.
func SignalAll(pids []int, sig syscall.Signal) error {
	d := newDelivery(sig)
	d.all(pids)
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
		if s, ok := readStat(p); ok && s.PGID > 1 && !spareGroups[s.PGID] {
			d.group(s.PGID)
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
		groups[s.PGID] = true
		p = s.PPID
	}
	return pids, groups
}

// LeftInGroup returns the live members of process group pgid (zombies left
// out) while it is still the group of the process pgid, which the engine
// started as the leader of a session of its own (setsid) with [Tag](tag) in
// its environment, and which was reaped at reaped or before; none when the
// number has been given to another process since, or is this process's
// group or an ancestor's.
//
// The number pgid stays the reaped process's while any process has it as
// its pid, group or session; once none has, the kernel may give it to any
// new process, which can make a session and group of it (setsid), as a
// daemon or `setsid cmd` does. A member cleared its environment carries no
// tag (env -i), so the group is taken for the reaped process's only when it
// proves so, and no process has the number as its pid but one carrying the
// tag (a descendant that was given it):
//
//   - every member is in session pgid (the reaped process made the group
//     in its own session; a group of that number in another session was
//     made after it, by setpgid);
//   - some member carries the tag, or started no later than the clock tick
//     of reaped: a member of session pgid that started before the number was
//     free has been in the session since, so the number was never free;
//     every process of a session made of the number later started after it.
//
// Start times are in ticks of 10 ms: a member started in the tick the
// process was reaped in proves it only when it is an orphan of this process
// (a subreaper, as the daemon is) or descends from one inside the session —
// so a process this process started and that was given the number within
// those 10 ms, whose leader has exited, could still pass.
// A group left with only untagged members that all started after the
// reap (a chain of forks that cleared its environment) does not pass, and
// is left to the process's cgroup.
func LeftInGroup(pgid int, tag string, reaped time.Time) []int {
	if pgid <= 1 || !groupExists(pgid) {
		return nil
	}
	if _, spare := lineage(); spare[pgid] {
		return nil
	}
	cutoff, known := ticksAt(reaped)
	entry := Tag(tag)
	all := stats.get().all
	var members []stat
	proven := false
	for _, s := range all {
		if s.PID == pgid { // the number is a process's again
			if s.State == 'Z' || !holds(s.PID, entry) {
				return nil
			}
			proven = true
		}
		if s.PGID != pgid || s.State == 'Z' {
			continue
		}
		if s.SID != pgid {
			return nil
		}
		members = append(members, s)
	}
	var session map[int]stat // the session's processes by pid, read once needed
	out := make([]int, 0, len(members))
	for _, s := range members {
		if !proven && known {
			switch {
			case s.Start < cutoff:
				proven = true
			case s.Start == cutoff:
				if session == nil {
					session = make(map[int]stat)
					for _, o := range all {
						if o.SID == pgid {
							session[o.PID] = o
						}
					}
				}
				proven = orphanedHere(s, session)
			}
		}
		if !proven && holds(s.PID, entry) {
			proven = true
		}
		out = append(out, s.PID)
	}
	if !proven {
		return nil
	}
	return out
}

// groupExists reports whether any process, a zombie too, is in process
// group pgid: a signal 0 to the group finds it with one call. Most processes
// leave nothing behind, and their group is gone by the time it is looked
// for, which then costs no read of every process in /proc (with 85
// processes, 0.15 µs against 170 µs here: BenchmarkLeftInGroup). Any answer
// but "no such process" (EPERM, for a group this process may not signal)
// counts as there.
func groupExists(pgid int) bool {
	return !errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}

// orphanedHere reports whether s, followed up through its parents while
// they are in session (by pid), comes to a process whose parent is this
// one: the reaped leader's orphans are this process's, a subreaper's, where
// the orphans of a session made elsewhere go to their own subreaper or init.
func orphanedHere(s stat, session map[int]stat) bool {
	for range len(session) + 1 {
		parent, ok := session[s.PPID]
		if !ok {
			return s.PPID == self
		}
		s = parent
	}
	return false
}

// holds reports whether the environment pid started with holds entry.
func holds(pid int, entry string) bool {
	env, err := readEnviron(pid)
	if err != nil {
		return false
	}
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}

// ticksAt returns t as the kernel counts a process's start (field 22 of
// /proc/PID/stat): clock ticks of the boot-time clock. t's monotonic
// reading, where it has one, measures how long ago it was; false when the
// clock cannot be read or t is before the boot.
func ticksAt(t time.Time) (uint64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	ns := ts.Nano() - time.Since(t).Nanoseconds()
	if ns < 0 {
		return 0, false
	}
	return uint64(ns) / uint64(time.Second/clockTicks), true
}
