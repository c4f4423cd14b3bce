package portlease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// childEnv switches the test binary into the lease helper program, so that
// tests can lease from real second processes.
const childEnv = "PORTLEASE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(leaseChild())
	}
	os.Exit(m.Run())
}

// leaseChild leases LEASE_COUNT ports from the lock directory LEASE_DIR,
// scanning from LEASE_BASE (or letting the kernel pick when it is unset),
// prints each port on a line, holds them until stdin is closed, releases
// them and exits. A lease that fails prints "error", whether
// its error wraps ErrLockDir and ErrNoFreePort, and its message. With
// LEASE_UID set, a child started as root first becomes that user, to whom
// the files the test made in the lease directory are another user's, as
// they are to a daemon.
func leaseChild() int {
	if uid := os.Getenv("LEASE_UID"); uid != "" && os.Geteuid() == 0 {
		id, _ := strconv.Atoi(uid)
		if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(id), syscall.Setuid(id)); err != nil {
			fmt.Fprintln(os.Stderr, "become uid", id, err)
			return 1
		}
	}
	dir := os.Getenv("LEASE_DIR")
	count, _ := strconv.Atoi(os.Getenv("LEASE_COUNT"))
	candidate := anyLoopbackPort
	if b := os.Getenv("LEASE_BASE"); b != "" {
		base, _ := strconv.Atoi(b)
		candidate = scanFrom(base)
	}
	var leases []*Lease
	for range count {
		l, err := acquire(dir, candidate)
		if err != nil {
			fmt.Println("error", errors.Is(err, ErrLockDir), errors.Is(err, ErrNoFreePort), err)
			return 1
		}
		leases = append(leases, l)
		fmt.Println(l.Port())
	}
	io.Copy(io.Discard, os.Stdin)
	for _, l := range leases {
		l.Release()
	}
	return 0
}

// scanFrom is a candidate source that offers base, base+1, ... in order, the
// same sequence to every caller: without the locks, every caller would be
// handed the same ports.
func scanFrom(base int) func(int) (net.Listener, error) {
	return func(try int) (net.Listener, error) {
		return net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+try))
	}
}

// child is a re-executed test binary running a helper program.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startChild starts the helper program mode with env added.
func startChild(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	// The deadline is the hang guard: killing the child ends every read of
	// its output.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		c.stdin.Close()
		c.cmd.Wait()
	})
	return c
}

// ints reads n lines of integers from the child.
func (c *child) ints(t *testing.T, n int) []int {
	t.Helper()
	var got []int
	for range n {
		require.True(t, c.out.Scan(), "child ended after %d of %d lines: %v", len(got), n, c.out.Err())
		v, err := strconv.Atoi(c.out.Text())
		require.NoError(t, err)
		got = append(got, v)
	}
	return got
}

// line reads the next line of the child's output.
func (c *child) line(t *testing.T) string {
	t.Helper()
	require.True(t, c.out.Scan(), "child ended without a line: %v", c.out.Err())
	return c.out.Text()
}
