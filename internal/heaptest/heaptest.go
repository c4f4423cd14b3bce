// Package heaptest measures what code allocates, for tests that bound it.
package heaptest

import "runtime"

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
