package proctree

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/tracetest"
)

// A tree's leftover caught in the middle of an exec reads as having no
// environment until its new image is set up, which took long enough on a
// busy machine for both of a shutdown's scans to miss a leftover (and leave
// it running). Such a process is read again until it has one.
func TestEnvironsWaitsForAnExec(t *testing.T) {
	me := os.Getpid()
	tag := Tag("caught-in-exec")
	reads := 0
	readEnviron0, execing0 := readEnviron, execing
	t.Cleanup(func() { readEnviron, execing = readEnviron0, execing0 })
	readEnviron = func(pid int) ([]byte, error) {
		if pid != me {
			return readEnviron0(pid)
		}
		if reads++; reads < 4 { // three looks in the middle of the exec
			return nil, nil
		}
		return []byte("A=1\x00" + tag + "\x00"), nil
	}
	execing = func(pid int) bool { return pid == me || execing0(pid) }

	check := func(ok bool, msg string) {
		t.Helper()
		if !ok {
			t.Fatal(msg)
		}
	}
	check(slices.Contains(Tagged("caught-in-exec"), me), "Tagged missed a process in the middle of an exec")
	reads = 0
	check(TagsAlive()["caught-in-exec"], "TagsAlive missed a process in the middle of an exec")

	// One that sleeps with an empty environment is not waited for.
	execing = func(pid int) bool { return pid != me && execing0(pid) }
	reads = 0
	check(!TagsAlive()["caught-in-exec"] && reads == 1, "a sleeping process with no environment was read again")
}

// TestProcReadsTakeFewCalls: reading a file of /proc takes an open, reads
// until end-of-file and a close. Through os.ReadFile an environment of a
// kilobyte or two took eleven calls (the descriptor made non-blocking,
// offered to the poller, made blocking again, its size asked, and reads
// from 512 bytes up); a scan reads one of every process. Not parallel, so
// that the calls traced are its own.
func TestProcReadsTakeFewCalls(t *testing.T) {
	pid := os.Getpid()
	for _, read := range []struct {
		name string
		f    func()
	}{
		{"environ", func() { _, _ = readEnviron(pid) }},
		{"stat", func() { readStat(pid) }},
		{"children", func() { childrenOf(pid) }},
	} {
		read.f() // what is read once (childLists) is read
		var n int
		for _, stack := range tracetest.Syscalls(t, read.f) {
			// This goroutine's calls, not the reaper's.
			if slices.ContainsFunc(stack, func(f string) bool { return strings.HasSuffix(f, ".TestProcReadsTakeFewCalls") }) {
				n++
			}
		}
		t.Logf("%s: %d calls", read.name, n)
		// An open, a read, the read that finds the end, a close; each
		// thread's children file so, after the listing of the threads.
		want := 4
		if read.name == "children" {
			want = 4 + 4*len(tasks(t, pid))
		}
		require.LessOrEqual(t, n, want, read.name)
	}
}

func tasks(t *testing.T, pid int) []os.DirEntry {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	require.NoError(t, err)
	return ents
}
