package proctree

import (
	"os"
	"slices"
	"testing"
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
