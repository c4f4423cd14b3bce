package shellsession

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A session keeps none of the environment it was started with: up to the
// kernel's ~2 MB a session, it would be held for the session's life. Not
// parallel: it reads the heap.
func TestSessionKeepsNoEnv(t *testing.T) {
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	bigEnv := func() map[string]string {
		env := map[string]string{}
		for j := range 12 {
			env["BIG"+strconv.Itoa(j)] = strings.Repeat(string(rune('a'+j)), 120_000)
		}
		return env
	}
	before := heap()
	for range 4 {
		s := newSession(t, Options{Env: bigEnv()})
		if _, out, _ := run(t, s, CommandOptions{Cmd: "echo ${#BIG11}"}); out != "120000\n" {
			t.Fatalf("the session's environment: %q", out)
		}
	}
	// Four environments of 1.4 MB: 5.8 MB if they were kept, twice over
	// (the shell's command and the session's options).
	if held := heap() - before; held > 3<<20 {
		t.Fatalf("the heap grew by %d bytes with 4 sessions", held)
	}
}
