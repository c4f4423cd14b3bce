package portlease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanBase picks a base for scanFrom below the kernel's ephemeral range, at
// random so that concurrent runs of these tests rarely meet.
func scanBase() int { return 20000 + rand.IntN(10000) }

// heldElsewhere reports whether the lock of port in dir is held by someone
// other than the caller.
func heldElsewhere(t *testing.T, dir string, port int) bool {
	t.Helper()
	held, err := Held(dir, port)
	require.NoError(t, err)
	return held
}

func TestLeasePortDefault(t *testing.T) {
	t.Parallel()
	const n = 8
	var leases []*Lease
	for range n {
		l, err := Acquire()
		require.NoError(t, err)
		leases = append(leases, l)
	}
	seen := map[int]bool{}
	for _, l := range leases {
		p := l.Port()
		require.False(t, p <= 0 || p > 65535 || seen[p], "port %d: out of range or handed out twice", p)
		seen[p] = true
		assert.True(t, heldElsewhere(t, Dir(), p), "port %d is leased but its lock is free", p)
		// Leasing reserves the number; it leaves the port free to bind. A
		// kernel-picked port can be taken meanwhile by anything else on the
		// machine (an outgoing connection, another test), which the lease
		// does not stop: then only check that this process holds no socket on it.
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		switch {
		case err == nil:
			ln.Close()
		case errors.Is(err, syscall.EADDRINUSE):
			assert.False(t, ownsSocketOn(t, p), "the lease of port %d keeps a socket on it", p)
		default:
			assert.NoError(t, err, "leased port %d cannot be bound by its holder", p)
		}
	}
	fi, err := os.Stat(Dir())
	require.NoError(t, err)
	assert.False(t, fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0, "lock directory mode %v, want world-writable and sticky", fi.Mode())
	for _, l := range leases {
		require.NoError(t, l.Release())
		require.NoError(t, l.Release(), "second release")
		assert.False(t, heldElsewhere(t, Dir(), l.Port()), "port %d still locked after release", l.Port())
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
			if !assert.NoError(t, err) {
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
		assert.True(t, heldElsewhere(t, dir, p), "port %d leased by a child but not locked", p)
	}

	a.stdin.Close() // a releases and exits
	require.NoError(t, a.cmd.Wait(), "child a")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	b.cmd.Wait()
	for _, p := range append(portsA, portsB...) {
		assert.False(t, heldElsewhere(t, dir, p), "port %d still locked after its holder ended", p)
	}
	_, err := os.Stat(filepath.Join(dir, strconv.Itoa(portsA[0])+".lock"))
	assert.ErrorIs(t, err, os.ErrNotExist, "released lock file left behind")
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
	require.NoError(t, err)
	defer l.Release()
	require.NotEqual(t, base, l.Port(), "leased port %d, which another socket is listening on", base)
}

// A process that opened a lock file just before its holder released it
// can lock the unlinked inode; sameFile is what tells lockPort to retry
// rather than trust that lock. Not in parallel: a child that another test
// forks holds a copy of every descriptor until it execs, the holder's
// close-on-exec lock included, and the lock outlived Release for that
// moment (seen under -race, where the children are slow to exec).
func TestStaleLockFileDetected(t *testing.T) {
	dir := t.TempDir()
	holder, err := lockPort(dir, 1)
	require.NoError(t, err, "lockPort")
	require.NotNil(t, holder, "lockPort")
	stale, err := openLockFile(holder.path)
	require.NoError(t, err)
	defer stale.Close()
	holder.Release()
	require.NoError(t, syscall.Flock(int(stale.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "flock of the unlinked file")
	require.False(t, sameFile(stale, holder.path), "a lock on an unlinked file passed for the port's lock")
	l, err := lockPort(dir, 1)
	require.NoError(t, err, "lockPort beside a stale lock")
	require.NotNil(t, l, "lockPort beside a stale lock")
	l.Release()
}

func assertDistinct(t *testing.T, ports []int) {
	t.Helper()
	seen := map[int]int{}
	for _, p := range ports {
		seen[p]++
		assert.NotEqual(t, 2, seen[p], "port %d handed out twice (all: %v)", p, ports)
	}
}

// ownsSocketOn reports whether this process has a TCP socket bound to port
// on 127.0.0.1, as /proc/self/net/tcp and its descriptors show.
func ownsSocketOn(t *testing.T, port int) bool {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	table, err := os.ReadFile("/proc/self/net/tcp")
	require.NoError(t, err)
	local := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && inodes[f[9]] {
			return true
		}
	}
	return false
}

// TestLinkedLockFileSkipped: a symbolic link at a port's lock file (in the
// directory every user writes to) is never followed: the port counts as
// taken, and no file is made where the link points.
func TestLinkedLockFileSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "made")
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "1.lock")))
	l, err := lockPort(dir, 1)
	require.NoError(t, err)
	require.Nil(t, l, "a lease through a link")
	_, err = os.Lstat(target)
	require.True(t, os.IsNotExist(err), "a file was made where the link points")
}

// TestUnopenableLockPathSkipped: a port whose lock path cannot be opened —
// a directory there, which any user of the shared directory can make —
// counts as taken, and Acquire tries another port: it gave up at the first
// such path.
func TestUnopenableLockPathSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var blocked []int
	candidate := func(try int) (net.Listener, error) {
		ln, err := anyLoopbackPort(try)
		if err == nil && try < 3 {
			port := ln.Addr().(*net.TCPAddr).Port
			require.NoError(t, os.Mkdir(filepath.Join(dir, strconv.Itoa(port)+".lock"), 0o700))
			blocked = append(blocked, port)
		}
		return ln, err
	}
	l, err := acquire(dir, candidate)
	require.NoError(t, err)
	defer l.Release()
	require.Len(t, blocked, 3)
	require.NotContains(t, blocked, l.Port())
	for _, port := range blocked {
		fi, err := os.Lstat(filepath.Join(dir, strconv.Itoa(port)+".lock"))
		require.NoError(t, err)
		require.True(t, fi.IsDir(), "the directory at a lock path was replaced")
	}
}

// TestDirIgnoresTMPDIR: the lease directory is the machine's, whatever a
// process's TMPDIR: under os.TempDir, two processes with different TMPDIRs
// did not see each other's leases. Not parallel: it sets TMPDIR.
func TestDirIgnoresTMPDIR(t *testing.T) {
	before := Dir()
	t.Setenv("TMPDIR", t.TempDir())
	require.Equal(t, before, Dir())
	require.Equal(t, "/tmp/conch-ports", Dir(), "this machine's /tmp is a writable directory")
}

// A lease its holder dropped without Release stays held until the process
// exits, as Acquire says: the garbage collector closed its file, and so
// dropped its lock, and another process could lease the port.
func TestDroppedLeaseStaysHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := func() int {
		l, err := acquire(dir, anyLoopbackPort)
		require.NoError(t, err)
		return l.Port() // the lease itself is dropped here, held until this test binary exits
	}()
	// Finalizers run after a collection, in a goroutine of their own: look
	// after each of a few.
	for range 5 {
		runtime.GC()
		runtime.Gosched()
		require.True(t, heldElsewhere(t, dir, port), "the lease of port %d ended once nothing referred to it", port)
	}
}

// When every port tried is leased already, the error says so and where the
// leases are; it said "(last: <nil>)".
func TestExhaustedSaysWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	holder, err := lockPort(dir, port)
	require.NoError(t, err)
	require.NotNil(t, holder)
	defer holder.Release()
	// Every try is given the one listener, kept open: closed and listened
	// on anew, its port was now and then taken meanwhile by another test's
	// listener, and the tries failed to bind it instead.
	onlyThatPort := func(int) (net.Listener, error) { return keptOpen{ln}, nil }
	l, err := acquire(dir, onlyThatPort)
	if l != nil {
		l.Release()
	}
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "<nil>")
	assert.Contains(t, err.Error(), "leased already (locks in "+dir+")")
	assert.ErrorIs(t, err, ErrNoFreePort)
}

// keptOpen is a listener whose Close leaves it open.
type keptOpen struct{ net.Listener }

func (keptOpen) Close() error { return nil }

// Release twice, from many goroutines at once, and of the nil Lease a
// failed Acquire returns, neither panics nor fails; the nil one panicked.
func TestReleaseIdempotent(t *testing.T) {
	t.Parallel()
	l, err := acquire(t.TempDir(), anyLoopbackPort)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { assert.NoError(t, l.Release()) })
	}
	wg.Wait()
	assert.NoError(t, l.Release(), "Release after Release")
	var none *Lease
	assert.NotPanics(t, func() {
		assert.NoError(t, none.Release(), "Release of a nil Lease")
		assert.Zero(t, none.Port(), "Port of a nil Lease")
	})
}

// foreignTo returns the environment that makes a lease child someone other
// than the owner of the files this test makes: nobody when the test runs as
// root (which no file permission stops), the test's own user otherwise,
// whose files the tests make unwritable to their owner.
func foreignTo() string {
	if os.Geteuid() == 0 {
		return "LEASE_UID=65534"
	}
	return "LEASE_UID="
}

// sharedTestDir returns a new lease directory that every user may write, as
// the machine's is, in directories every user may search.
func sharedTestDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	for _, d := range []string{filepath.Dir(parent), parent} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	dir := filepath.Join(parent, "ports")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky))
	return dir
}

// A FIFO another user made at a port's lock path, which anyone may make in
// the shared directory, is skipped at once and another port leased. The
// lock file was opened read-only when it could not be opened read-write,
// and opening a FIFO for reading waits for a writer: the lease waited for
// ever. The child's deadline is the hang guard.
func TestForeignFIFOSkipped(t *testing.T) {
	t.Parallel()
	dir := sharedTestDir(t)
	base := scanBase()
	var fifos []int
	for port := base; port < base+3; port++ {
		path := filepath.Join(dir, strconv.Itoa(port)+".lock")
		require.NoError(t, syscall.Mkfifo(path, 0o444))
		require.NoError(t, os.Chmod(path, 0o444)) // readable by all, writable by none
		fifos = append(fifos, port)
	}
	c := startChild(t, "lease", "LEASE_DIR="+dir, "LEASE_BASE="+strconv.Itoa(base), "LEASE_COUNT=1", foreignTo())
	got := c.line(t)
	port, err := strconv.Atoi(got)
	require.NoError(t, err, "the lease failed: %s", got)
	require.NotContains(t, fifos, port, "leased a port whose lock path is a FIFO")
	for _, port := range fifos {
		fi, err := os.Lstat(filepath.Join(dir, strconv.Itoa(port)+".lock"))
		require.NoError(t, err)
		require.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the FIFO at a lock path was replaced")
	}
}

// A lock path that is no regular file (a FIFO, a socket) is never taken for
// a lease, whoever made it: a FIFO its owner could open read-write was
// leased, the lock held on the FIFO.
func TestNonRegularLockPathSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := scanBase()
	fifo, sock := base, base+1
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, strconv.Itoa(fifo)+".lock"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(dir, strconv.Itoa(sock)+".lock"))
	require.NoError(t, err)
	defer ln.Close()
	type result struct {
		l   *Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := acquire(dir, scanFrom(base))
		done <- result{l, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the lease waits on a lock path that is no regular file")
	}
	require.NoError(t, r.err)
	defer r.l.Release()
	require.NotContains(t, []int{fifo, sock}, r.l.Port(), "leased a port whose lock path is no regular file")
	held, err := Held(dir, fifo)
	require.Error(t, err, "the FIFO at a lock path counts as a lock file")
	require.False(t, held)
}

// A lease directory this user cannot write fails the lease at once, saying
// so and wrapping ErrLockDir. It tried 128 ports, and its message gave the
// error of a fallback open, "no such file or directory", for the real one.
func TestUnwritableLockDir(t *testing.T) {
	t.Parallel()
	dir := sharedTestDir(t)
	require.NoError(t, os.Chmod(dir, 0o555))
	c := startChild(t, "lease", "LEASE_DIR="+dir, "LEASE_COUNT=1", foreignTo())
	got := c.line(t)
	require.True(t, strings.HasPrefix(got, "error true false "), "want an error wrapping ErrLockDir, got %q", got)
	require.Contains(t, got, dir)
	require.Contains(t, got, "not writable")
	require.NotContains(t, got, "no such file")
}
