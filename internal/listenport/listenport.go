// Package listenport finds the TCP ports that a set of processes listens on,
// through /proc on Linux.
//
// A socket belongs to every process that holds it open: the sockets of a
// process are the "socket:[INODE]" links in /proc/PID/fd, and a socket
// listens when the kernel lists its inode among the listening TCP sockets of
// the process's network namespace. For this process's own namespace they
// are asked of the kernel through sock_diag netlink (see diag.go); for
// another, read from the tables of a process in it, /proc/PID/net/tcp and
// tcp6, so a process in a network namespace of its own is seen with its own
// ports.
//
// Like everything read from /proc, the answer is a snapshot: a process can
// open or close a socket between two reads. Only processes this process may
// inspect are seen (those of the same user, or all when root).
package listenport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrPermission is returned, wrapped, when a process's open files cannot be
// read for lack of permission: the answer would miss its ports. Use
// errors.Is.
var ErrPermission = errors.New("no permission to read a process's open files")

// Ports returns the TCP ports, IPv4 and IPv6, on which any of pids holds a
// listening socket, sorted and without repeats. A pid that is gone is
// skipped. A process of pids that this process may not inspect makes it
// fail with [ErrPermission].
func Ports(pids []int) ([]int, error) {
	byNS := make(map[string]*namespace)
	for _, pid := range pids {
		inodes, err := socketInodes(pid)
		if err != nil {
			return nil, err
		}
		if len(inodes) == 0 {
			continue
		}
		ns, err := os.Readlink(procPath(pid, "ns/net"))
		if err != nil {
			continue // gone since: its sockets are closed
		}
		n := byNS[ns]
		if n == nil {
			n = &namespace{pid: pid, inodes: make(map[uint64]bool)}
			byNS[ns] = n
		}
		for _, ino := range inodes {
			n.inodes[ino] = true
		}
	}
	var ports []int
	self, _ := os.Readlink("/proc/self/ns/net")
	for ns, n := range byNS {
		p, err := n.listening(ns == self)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p...)
	}
	slices.Sort(ports)
	return slices.Compact(ports), nil
}

// listening returns the ports on which the sockets n.inodes listen: asked
// of the kernel through sock_diag when n is this process's namespace (see
// diag.go), read from the /proc tables of a process in it otherwise, or
// when sock_diag is not allowed here.
func (n *namespace) listening(own bool) ([]int, error) {
	var ports []int
	if own {
		if byInode, err := diagListeners(); err == nil {
			for ino := range n.inodes {
				if p, ok := byInode[ino]; ok {
					ports = append(ports, p)
				}
			}
			return ports, nil
		}
	}
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		p, err := listening(procPath(n.pid, table), n.inodes)
		if err != nil {
			return nil, err
		}
		ports = append(ports, p...)
	}
	return ports, nil
}

// namespace is a network namespace: a process in it, through which its TCP
// tables are read, and the socket inodes held by the processes asked about.
type namespace struct {
	pid    int
	inodes map[uint64]bool
}

func procPath(pid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

// socketInodes returns the inodes of the sockets pid holds open.
func socketInodes(pid int) ([]uint64, error) {
	dir := procPath(pid, "fd")
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrPermission)
	}
	if err != nil {
		return nil, nil // gone
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []uint64
	for _, name := range names {
		link, err := os.Readlink(dir + "/" + name)
		if err != nil {
			continue // closed since
		}
		s, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
			out = append(out, ino)
		}
	}
	return out, nil
}

// listen is the state a listening socket has in /proc/net/tcp (TCP_LISTEN).
const listen = "0A"

// listening returns the local ports of the sockets of the TCP table at path
// that listen and whose inode is in inodes. A table that does not exist (no
// IPv6 in the kernel, or the process is gone) has none.
func listening(path string, inodes map[uint64]bool) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tcp table: %w", err)
	}
	var ports []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != listen {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || !inodes[ino] {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: bad local address %q", path, f[1])
		}
		ports = append(ports, int(port))
	}
	return ports, nil
}
