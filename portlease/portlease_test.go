package portlease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// scanBase picks a base for scanFrom below the kernel's ephemeral range, at
// random so that concurrent runs of these tests rarely meet.
func scanBase() int { return 20000 + rand.IntN(10000) }

// heldElsewhere reports whether the lock of port in dir is held by someone
// other than the caller.
func heldElsewhere(t *testing.T, dir string, port int) bool {
	t.Helper()
	held, err := Held(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

func TestLeasePortDefault(t *testing.T) {
	t.Parallel()
	const n = 8
	var leases []*Lease
	for range n {
		l, err := Acquire()
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	seen := map[int]bool{}
	for _, l := range leases {
		p := l.Port()
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("port %d: out of range or handed out twice", p)
		}
		seen[p] = true
		if !heldElsewhere(t, Dir(), p) {
			t.Errorf("port %d is leased but its lock is free", p)
		}
		// Leasing reserves the number; it leaves the port free to bind. A
		// kernel-picked port can be taken meanwhile by anything else on the
		// machine (an outgoing connection, another test), which the lease
		// does not stop: then only check that this process holds no socket on it.
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		switch {
		case err == nil:
			ln.Close()
		case errors.Is(err, syscall.EADDRINUSE):
			if ownsSocketOn(t, p) {
				t.Errorf("the lease of port %d keeps a socket on it", p)
			}
		default:
			t.Errorf("leased port %d cannot be bound by its holder: %v", p, err)
		}
	}
	fi, err := os.Stat(Dir())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("lock directory mode %v, want world-writable and sticky", fi.Mode())
	}
	for _, l := range leases {
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatalf("second release: %v", err)
		}
		if heldElsewhere(t, Dir(), l.Port()) {
			t.Errorf("port %d still locked after release", l.Port())
		}
	}
}

// Within one process, concurrent leases offered the very same candidates
// still get distinct ports.
func TestLeasePortConcurrentInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := scanBase()
	const n = 16
	leases := make([]*Lease, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := acquire(dir, scanFrom(base))
			if err != nil {
				t.Error(err)
				return
			}
			leases[i] = l
		})
	}
	wg.Wait()
	var ports []int
	for _, l := range leases {
		if l != nil {
			ports = append(ports, l.Port())
			defer l.Release()
		}
	}
	assertDistinct(t, ports)
}

// Two OS processes leasing at once, both offered the same candidates, never
// get the same port; the leases stay held until released, and a lease dies
// with the process holding it.
func TestLeasePortAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := strconv.Itoa(scanBase())
	const n = 12
	env := []string{"LEASE_DIR=" + dir, "LEASE_BASE=" + base, "LEASE_COUNT=" + strconv.Itoa(n)}
	a := startChild(t, "lease", env...)
	b := startChild(t, "lease", env...)
	portsA, portsB := a.ints(t, n), b.ints(t, n)
	assertDistinct(t, append(slices.Clone(portsA), portsB...))
	for _, p := range append(slices.Clone(portsA), portsB...) {
		if !heldElsewhere(t, dir, p) {
			t.Errorf("port %d leased by a child but not locked", p)
		}
	}

	a.stdin.Close() // a releases and exits
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("child a: %v", err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.cmd.Wait()
	for _, p := range append(portsA, portsB...) {
		if heldElsewhere(t, dir, p) {
			t.Errorf("port %d still locked after its holder ended", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(portsA[0])+".lock")); !os.IsNotExist(err) {
		t.Errorf("released lock file left behind: %v", err)
	}
}

// The kernel-picked default source, leased from two processes at once.
func TestLeasePortDefaultAcrossProcesses(t *testing.T) {
	t.Parallel()
	const n = 16
	env := []string{"LEASE_DIR=" + Dir(), "LEASE_COUNT=" + strconv.Itoa(n)}
	a := startChild(t, "lease", env...)
	b := startChild(t, "lease", env...)
	assertDistinct(t, append(a.ints(t, n), b.ints(t, n)...))
}

// A port something else has bound is skipped.
func TestLeasePortSkipsBoundPort(t *testing.T) {
	t.Parallel()
	var ln net.Listener
	var base int
	for {
		base = scanBase()
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base)); err == nil {
			break
		}
	}
	defer ln.Close()
	l, err := acquire(t.TempDir(), scanFrom(base))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Port() == base {
		t.Fatalf("leased port %d, which another socket is listening on", base)
	}
}

// A process that opened a lock file just before its holder released it
// can lock the unlinked inode; sameFile is what tells lockPort to retry
// rather than trust that lock.
func TestStaleLockFileDetected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, err := lockPort(dir, 1)
	if err != nil || holder == nil {
		t.Fatalf("lockPort: %v, %v", holder, err)
	}
	stale, err := openLockFile(holder.path)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	holder.Release()
	if err := syscall.Flock(int(stale.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock of the unlinked file: %v", err)
	}
	if sameFile(stale, holder.path) {
		t.Fatal("a lock on an unlinked file passed for the port's lock")
	}
	l, err := lockPort(dir, 1)
	if err != nil || l == nil {
		t.Fatalf("lockPort beside a stale lock: %v, %v", l, err)
	}
	l.Release()
}

func assertDistinct(t *testing.T, ports []int) {
	t.Helper()
	seen := map[int]int{}
	for _, p := range ports {
		seen[p]++
		if seen[p] == 2 {
			t.Errorf("port %d handed out twice (all: %v)", p, ports)
		}
	}
}

// ownsSocketOn reports whether this process has a TCP socket bound to port
// on 127.0.0.1, as /proc/self/net/tcp and its descriptors show.
func ownsSocketOn(t *testing.T, port int) bool {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	table, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && inodes[f[9]] {
			return true
		}
	}
	return false
}
