// Package heaptest measures what code allocates, for tests that bound it.
package heaptest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Allocated returns the bytes the whole process's heap allocated while f
// ran. Whatever else runs meanwhile counts too, so the tests that use it do
// not run in parallel.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Live returns the bytes of the heap that are live, after a collection:
// what a test that checks what the code keeps reads before and after.
// Whatever else runs meanwhile counts too, so such a test does not run in
// parallel.
func Live() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Peak returns the peak resident memory (VmHWM) of process pid, in bytes;
// with reset it first sets that peak to what is resident now (Linux's
// clear_refs 5), so that what follows is measured alone. It measures
// what the whole process holds, the collector's pace included.
func Peak(pid int, reset bool) (int64, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	if reset {
		if err := os.WriteFile(dir+"/clear_refs", []byte("5"), 0); err != nil {
			return 0, err
		}
	}
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in %s/status", dir)
}
