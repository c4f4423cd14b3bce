package processtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/proctree"
)

// closeEnv names, for the copy of the test binary CloseDescriptors starts,
// the process and the descriptors to close: "PID FD FD...".
const closeEnv = "CONCH_TEST_CLOSE_DESCRIPTORS"

// CloseDescriptors closes descriptors fds of process pid, a process asleep
// in a system call (a shell waiting for its input), as if it had closed them
// itself, and lets it go on as it was. A copy of the test binary does it,
// as the process's tracer: ptrace stops of the test's own child would
// reach whoever waits for that child in the test (os/exec, the engine),
// which would take a stop for its end. The package's TestMain must be
// reapertest.Main (which serves the copy). tb skips where the process
// cannot be traced or the machine is not linux/amd64, and fails when the
// descriptors could not be closed.
func CloseDescriptors(tb testing.TB, pid int, fds ...int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{strconv.Itoa(pid)}
	for _, fd := range fds {
		args = append(args, strconv.Itoa(fd))
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), closeEnv+"="+strings.Join(args, " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Started and waited for as the engine's children are: the package's
	// reaper would otherwise reap it first.
	if err := proctree.Start(cmd); err != nil {
		tb.Fatalf("start the tracer: %v", err)
	}
	err := proctree.Wait(cmd)
	said := strings.TrimSpace(out.String())
	if skip, ok := strings.CutPrefix(said, "skip: "); ok {
		tb.Skip(skip)
	}
	if err != nil {
		tb.Fatalf("close descriptors %v of %d: %v: %s", fds, pid, err, said)
	}
}

// ServeCloseDescriptors does the work of CloseDescriptors in the copy of
// the test binary it starts, and exits; elsewhere it returns at once.
// reapertest.Main calls it first.
func ServeCloseDescriptors() {
	spec, ok := os.LookupEnv(closeEnv)
	if !ok {
		return
	}
	var nums []int
	for _, f := range strings.Fields(spec) {
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Printf("bad %s: %q\n", closeEnv, spec)
			os.Exit(2)
		}
		nums = append(nums, n)
	}
	if len(nums) < 2 {
		fmt.Printf("bad %s: %q\n", closeEnv, spec)
		os.Exit(2)
	}
	if err := closeDescriptors(nums[0], nums[1:]); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	os.Exit(0)
}

// errSkip marks an error that should skip the test rather than fail it.
type errSkip struct{ why string }

func (e errSkip) Error() string { return "skip: " + e.why }
