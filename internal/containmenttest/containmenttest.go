// Package containmenttest gives tests a containment.Root of their own and
// finds the processes a test started by a marker in their command line.
package containmenttest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/conchsh/conch/containment"
)

// Root opens a Root of the test's own (defaults as its default limits) and
// destroys it at cleanup, failing the test when it cannot be removed. It
// skips the test, saying why, where the host has no writable cgroup v2
// hierarchy.
func Root(t testing.TB, defaults containment.Limits) *containment.Root {
	t.Helper()
	r := containment.Open(containment.Config{Instance: "test-" + Nonce(), Defaults: defaults})
	if r.Mode() != containment.ModeCgroup2 {
		t.Skipf("needs cgroups: containment is %s (%s)", r.Mode(), r.Reason())
	}
	t.Cleanup(func() {
		if err := r.Destroy(); err != nil {
			t.Errorf("destroy the test's cgroups: %v", err)
		}
		for _, d := range r.Dirs() {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s is left", d)
			}
		}
	})
	return r
}

// Limited is Root for a test that needs limits: it also skips, saying why,
// when the host cannot apply l.
func Limited(t testing.TB, l containment.Limits) *containment.Root {
	t.Helper()
	r := Root(t, containment.Limits{})
	if err := r.Check(l); err != nil {
		t.Skipf("needs limits: %v", err)
	}
	return r
}

// Nonce returns a random hex string.
func Nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Marker returns a sleep duration no other process has in its command
// line: `sleep MARKER` sleeps about 300 s and [Running] finds it.
func Marker() string {
	n, _ := strconv.ParseUint(Nonce()[:6], 16, 32)
	return "300." + strconv.FormatUint(n, 10)
}

// Running returns the live processes whose command line holds the word
// marker.
func Running(marker string) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if string(arg) == marker {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// Escapes is shell text that starts two `sleep marker` processes that leave
// every tree and tag: one through setsid with an empty environment, one
// double-forked as well.
func Escapes(marker string) string {
	return "setsid env -i sleep " + marker + " >/dev/null 2>&1 </dev/null & " +
		"( ( setsid env -i sleep " + marker + " >/dev/null 2>&1 </dev/null & ) & ); "
}

// WaitRunning waits until n processes hold marker (a hang guard of 20 s).
func WaitRunning(t testing.TB, marker string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(Running(marker)) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("%d processes hold %s, want %d", len(Running(marker)), marker, n)
		}
	}
}

// WaitEscaped waits until n processes hold marker, each the sleep of
// Escapes with its environment cleared (a hang guard of 20 s): before that
// exec, a process holding marker in its arguments is still setsid or env,
// which carries the tree's tag and so has not escaped yet.
func WaitEscaped(t testing.TB, marker string, n int) {
	t.Helper()
	escaped := func() int {
		count := 0
		for _, pid := range Running(marker) {
			dir := "/proc/" + strconv.Itoa(pid)
			comm, err := os.ReadFile(dir + "/comm")
			env, err2 := os.ReadFile(dir + "/environ")
			if err == nil && err2 == nil && string(comm) == "sleep\n" && len(env) == 0 {
				count++
			}
		}
		return count
	}
	for deadline := time.Now().Add(20 * time.Second); escaped() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("%d processes hold %s as a sleep with no environment, want %d", escaped(), marker, n)
		}
	}
}

// Gone fails t when a process holding marker is alive.
func Gone(t testing.TB, marker string) {
	t.Helper()
	if left := Running(marker); len(left) > 0 {
		t.Fatalf("processes %v outlived their cgroup's end", left)
	}
}

// Allocate is a command that takes mib MiB of memory at once and says
// "held" once it has them.
func Allocate(mib int) string {
	return `perl -e '$x = "a" x (` + strconv.Itoa(mib) + ` << 20); print "held\n"'`
}

// Busy is a command that spins until it has used 300 ms of CPU time.
const Busy = `perl -e '1 while (times)[0] + (times)[1] < 0.3'`

// Forks is a command that forks n children that sleep 5 s, and says
// "fork: " and why when a fork fails.
func Forks(n int) string {
	return `perl -e 'for (1..` + strconv.Itoa(n) + `) { my $p = fork(); defined $p or print "fork: $!\n" and last; $p or sleep 5, exit } print "forked\n"'`
}

// freezerV1 is where the cgroup v1 freezer is mounted on hosts that have
// one.
const freezerV1 = "/sys/fs/cgroup/freezer"

// Freezer makes a cgroup of the test's own in the cgroup v1 freezer and
// returns its directory: a process that moves itself into it and writes
// FROZEN to its freezer.state (see Freeze) outlives KILL, cgroup.kill
// included, until it is thawed. At cleanup it thaws the cgroup, so that
// the KILLs sent meanwhile end what is in it, and removes it. It skips the
// test, saying why, where the host has no writable v1 freezer.
func Freezer(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(freezerV1 + "/tasks"); err != nil {
		t.Skipf("needs the cgroup v1 freezer at %s: %v", freezerV1, err)
	}
	dir := freezerV1 + "/conch-test-" + Nonce()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("needs a writable cgroup v1 freezer: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(dir+"/freezer.state", []byte("THAWED"), 0); err != nil {
			t.Errorf("thaw %s: %v", dir, err)
		}
		// What was KILLed while frozen dies as it thaws; the cgroup can go
		// once it has.
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
		}
		t.Errorf("remove %s: %v", dir, err)
	})
	return dir
}

// Freeze is shell text that freezes the shell running it (bash: its
// BASHPID) in the freezer cgroup dir (see Freezer). Run in a subshell,
// `( FREEZE ) &`, it freezes a fork that did not exec, which holds every
// descriptor its shell had.
func Freeze(dir string) string {
	return "echo $BASHPID > " + dir + "/tasks; echo FROZEN > " + dir + "/freezer.state; sleep 1"
}

// WaitFrozen waits until the freezer cgroup dir (see Freezer) holds a
// process and is frozen (a hang guard of 20 s), and returns its processes.
func WaitFrozen(t testing.TB, dir string) []int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		state, err := os.ReadFile(dir + "/freezer.state")
		tasks, err2 := os.ReadFile(dir + "/tasks")
		if err == nil && err2 == nil && string(bytes.TrimSpace(state)) == "FROZEN" && len(bytes.TrimSpace(tasks)) > 0 {
			var pids []int
			for _, f := range bytes.Fields(tasks) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					pids = append(pids, pid)
				}
			}
			return pids
		}
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("%s is not frozen with a process in it: state %q (%v), tasks %q (%v)", dir, state, err, tasks, err2)
		}
	}
}
