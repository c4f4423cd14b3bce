package processtest

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conchsh/conch/internal/proctree"
)

// Strace returns the path of strace, failing the test when it is not
// installed (scripts/test installs it).
func Strace(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("strace")
	if err != nil {
		tb.Fatal("strace is not installed (Debian: apt-get install strace; scripts/test installs it)")
	}
	return path
}

// AttachStrace runs strace with args on the process pid and returns once it
// has attached; detach ends it, and returns once it has written all it
// would.
func AttachStrace(tb testing.TB, strace string, pid int, args ...string) (detach func()) {
	tb.Helper()
	tr := exec.Command(strace, append(args, "-p", strconv.Itoa(pid))...)
	stderr, err := tr.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	// Started and waited for as the engine's children are: the reaper of
	// a package whose TestMain is reapertest.Main would otherwise reap it.
	if err := proctree.Start(tr); err != nil {
		tb.Fatal(err)
	}
	// strace says so once it has attached, or why it could not.
	sc := bufio.NewScanner(stderr)
	var said []string
	attached := false
	for !attached && sc.Scan() {
		said = append(said, sc.Text())
		attached = strings.Contains(sc.Text(), "attached")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
		}
	}()
	if !attached {
		tr.Process.Kill()
		<-done
		proctree.Wait(tr)
		tb.Fatalf("strace did not attach to %d: %s", pid, strings.Join(said, "; "))
	}
	return func() {
		tr.Process.Signal(syscall.SIGINT)
		<-done
		proctree.Wait(tr)
	}
}

// WaitHandlerCall returns which of the rt_sigaction calls in an strace of
// a shell (traced with trace=rt_sigaction and the fork calls) installs the
// handler of its wait for the first program it forked: the first for SIGINT
// after the fork. 0 means none. bash 5.2 takes SIGINT that lands as that
// call returns with a handler that re-raises it for ever; the tests hold
// bash in that call (strace's inject=rt_sigaction:delay_exit=…:when=N)
// while they interrupt it.
func WaitHandlerCall(trace string) int {
	nth, forked := 0, false
	for line := range strings.Lines(trace) {
		switch {
		case strings.HasPrefix(line, "rt_sigaction("):
			nth++
			if forked && strings.HasPrefix(line, "rt_sigaction(SIGINT,") {
				return nth
			}
		case strings.Contains(line, "fork(") || strings.HasPrefix(line, "clone"):
			forked = true
		}
	}
	return 0
}

// ForkTrace is the strace filter WaitHandlerCall reads.
const ForkTrace = "trace=rt_sigaction,clone,clone3,fork,vfork"
