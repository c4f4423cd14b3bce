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
