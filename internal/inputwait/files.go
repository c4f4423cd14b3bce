package inputwait

import (
	"bytes"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/procfs"
)

// fdKind is what a file a thread waits on means for the tree.
type fdKind int

const (
	fdExternal fdKind = iota // something from outside the tree may end the wait
	fdInternal               // only the tree can end the wait
	fdInput                  // the input
)

// internalLinks are the /proc/PID/fd link targets of files only the process
// itself (or its children) can make readable: an eventfd its threads
// write, a signalfd (its children's SIGCHLD), a pidfd (a child's exit).
var internalLinks = []string{"anon_inode:[eventfd]", "anon_inode:[signalfd]", "anon_inode:[pidfd]", "pidfd:"}

// fdKind tells what the descriptor fd of the thread at dir is. A descriptor
// that cannot be read (closed meanwhile) is external: the answer errs
// towards "not waiting".
func (t *tree) fdKind(dir string, fd int) fdKind {
	path := dir + "/fd/" + strconv.Itoa(fd)
	link, err := procfs.Readlink(path)
	if err != nil {
		return fdExternal
	}
	for _, l := range internalLinks {
		if strings.HasPrefix(link, l) {
			return fdInternal
		}
	}
	if ino, ok := socketInode(link); ok {
		if peer := t.peers.peer(ino); peer != 0 && (t.holdsSocket(peer) || t.in.quietPeer(peer)) {
			return fdInternal // a socketpair within the tree, or a quiet peer's
		}
		return fdExternal
	}
	if strings.HasPrefix(link, "anon_inode:") {
		return fdExternal // inotify, timerfd, ...
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return fdExternal
	}
	switch {
	case t.in.matches(&st), t.in.chr && st.Rdev == devTTY && t.in.rdev == controllingTTY(dir):
		return fdInput
	case st.Mode&unix.S_IFMT == unix.S_IFIFO && t.writtenByTree(link):
		return fdInternal
	}
	return fdExternal
}

// devTTY is /dev/tty, which stands for the controlling terminal of the
// process that opens it: ssh and sudo read passwords from it.
var devTTY = unix.Mkdev(5, 0)

// controllingTTY returns the device number of the controlling terminal of
// the thread at dir (field 7 of its stat, tty_nr), or 0 when it has none.
func controllingTTY(dir string) uint64 {
	b, err := procfs.ReadFile(dir+"/stat", make([]byte, 0, 512))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp session tty_nr ...
	if len(f) < 5 {
		return 0
	}
	nr, _ := strconv.ParseUint(string(f[4]), 10, 32)
	// tty_nr holds the major in bits 8-15 and the minor in bits 0-7 and
	// 20-31, as the encoding of dev_t that unix.Mkdev makes.
	return unix.Mkdev(unix.Major(nr), unix.Minor(nr))
}

func (in Input) matches(st *unix.Stat_t) bool {
	if !in.valid {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return in.chr && st.Rdev == in.rdev
	}
	return !in.chr && st.Dev == in.dev && st.Ino == in.ino
}

// writtenByTree reports whether a process of the tree holds the pipe or
// FIFO open for writing, so that it is fed by the tree. Pipes and FIFOs are
// told apart by their /proc/PID/fd link ("pipe:[INODE]" or the FIFO's
// path). It does not look whether a process outside the tree holds it too:
// that would take reading every process's files on each look.
func (t *tree) writtenByTree(link string) bool {
	t.scan()
	return t.writers[link]
}

// holdsSocket reports whether a process of the tree holds the socket ino.
func (t *tree) holdsSocket(ino uint64) bool {
	t.scan()
	return t.sockets[ino]
}

func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	return ino, err == nil
}

// scan reads the open files of the tree once.
func (t *tree) scan() {
	if t.writers != nil {
		return
	}
	t.writers, t.sockets = make(map[string]bool), make(map[uint64]bool)
	for _, pid := range t.pids {
		t.scanFiles(pid)
	}
	for _, pid := range t.in.kin {
		t.scanFiles(pid)
	}
}

// scanFiles adds the sockets that pid holds, and the pipes and FIFOs (and
// files) it holds open for writing. The mode of a /proc/PID/fd link says
// how the file is open: it has the owner's write bit when the descriptor
// may write.
func (t *tree) scanFiles(pid int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	names, err := procfs.ReadDir(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		link, err := procfs.Readlink(dir + name)
		if err != nil {
			continue
		}
		if ino, ok := socketInode(link); ok {
			t.sockets[ino] = true
			continue
		}
		if !strings.HasPrefix(link, "pipe:") && !strings.HasPrefix(link, "/") {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(dir+name, &st) == nil && st.Mode&unix.S_IWUSR != 0 {
			t.writers[link] = true
		}
	}
}

// watch is a file descriptor a poll, select or epoll waits on.
type watch struct {
	fd    int
	write bool // it waits to write to it, too or only
}

// waitSet sums up the files a poll, select or epoll waits on: the input
// makes it readingInput; anything external, or a wait to write to anything
// but the input (output not taken yet), makes it busy. A wait to write to
// the input is no wait: Python's poll registers POLLOUT by default, which
// the read end of a pipe never raises and a terminal raises at once.
func (t *tree) waitSet(dir string, ws []watch) verdict {
	v := idle
	for _, w := range ws {
		switch k := t.fdKind(dir, w.fd); {
		case k == fdInput:
			v = readingInput
		case k == fdExternal, w.write:
			return busy
		}
	}
	return v
}

// epoll tells what a thread blocked in epoll_wait on epfd waits for, from
// the set that /proc/PID/task/TID/fdinfo/EPFD lists, one line per file:
// "tfd: FD events: MASK data: ...".
func (t *tree) epoll(dir string, epfd int, forever bool) (verdict, error) {
	if !forever {
		return busy, nil
	}
	b, err := procfs.ReadFile(dir+"/fdinfo/"+strconv.Itoa(epfd), make([]byte, 0, 1024))
	if err != nil {
		return busy, nil
	}
	var ws []watch
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 4 || fields[0] != "tfd:" || fields[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(fields[1])
		events, err2 := strconv.ParseUint(fields[3], 16, 32)
		if err1 != nil || err2 != nil {
			return busy, nil
		}
		ws = append(ws, watch{fd, events&unix.EPOLLOUT != 0})
	}
	return t.waitSet(dir, ws), nil
}
