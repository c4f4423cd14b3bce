// Package tracetest runs code under the Go runtime's execution trace and
// returns what tests look for in it.
package tracetest

import (
	"bytes"
	"io"
	rtrace "runtime/trace"
	"testing"

	"golang.org/x/exp/trace"
)

// Syscalls runs f under the runtime's trace and returns the stack of each
// system call made through the scheduler meanwhile — by any goroutine of
// the process: the trace is the whole process's — as function names,
// innermost first. Calls made raw (see internal/rawcall) do not show.
func Syscalls(t testing.TB, f func()) [][]string {
	t.Helper()
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	f()
	rtrace.Stop()
	rd, err := trace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		if _, to := st.Goroutine(); to != trace.GoSyscall {
			continue
		}
		var stack []string
		for f := range st.Stack.Frames() {
			stack = append(stack, f.Func)
		}
		out = append(out, stack)
	}
}
