// Package fdtest helps tests run a process out of file descriptors: it
// lists the descriptors open, lowers the limit of open files to a few
// above them, and takes every descriptor left.
package fdtest

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// Open lists this process's open descriptors, each by its number with
// what it is (its /proc/self/fd link), the listing's own aside.
func Open(t testing.TB) map[string]string {
	t.Helper()
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	fds := map[string]string{}
	for _, n := range names {
		if n != strconv.Itoa(int(dir.Fd())) {
			fds[n], _ = os.Readlink("/proc/self/fd/" + n)
		}
	}
	return fds
}

// LimitAbove lowers this process's limit of open files (RLIMIT_NOFILE) to
// room descriptors above the highest number open now, and returns the
// function that puts the limit back, which the test's cleanup calls too.
func LimitAbove(t testing.TB, room int) (restore func()) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	top := 0
	for n := range Open(t) {
		fd, _ := strconv.Atoi(n)
		top = max(top, fd)
	}
	low := rl
	low.Cur = uint64(top + 1 + room)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore = func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// Fill opens /dev/null until no descriptor is left (EMFILE), and returns
// the descriptors it opened, for the caller to close. It fails the test
// on another error, or when 65,536 opens found no limit.
func Fill(t testing.TB) []int {
	t.Helper()
	var fds []int
	for {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			if err != syscall.EMFILE {
				Close(fds)
				t.Fatal(err)
			}
			return fds
		}
		fds = append(fds, fd)
		if len(fds) > 1<<16 {
			Close(fds)
			t.Fatal("no EMFILE after 65,536 descriptors: the limit of open files did not hold")
		}
	}
}

// Close closes the descriptors.
func Close(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
