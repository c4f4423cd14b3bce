package shellsession

import (
	"os"
	"testing"

	"github.com/conchsh/conch/internal/heaptest"
	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/internal/proctree"
)

// A session keeps none of the environment it was started with: up to the
// kernel's ~2 MB a session, it would be held for the session's life. Not
// parallel: it reads the heap.
func TestSessionKeepsNoEnv(t *testing.T) {
	before := heaptest.Live()
	for range 4 {
		s := newSession(t, Options{Env: processtest.BigEnv()})
		if _, out, _ := run(t, s, CommandOptions{Cmd: "echo ${#BIG11}"}); out != "120000\n" {
			t.Fatalf("the session's environment: %q", out)
		}
	}
	// Four environments of 1.4 MB: 5.8 MB if they were kept, twice over
	// (the shell's command and the session's options).
	if held := heaptest.Live() - before; held > 3<<20 {
		t.Fatalf("the heap grew by %d bytes with 4 sessions", held)
	}
}

// A session's env cannot change the daemon's instance mark, by which a
// later daemon finds what this one left, as an exec process's cannot: it
// replaced the daemon's.
func TestEnvKeepsTheDaemonMark(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Env: map[string]string{proctree.InstanceEnv: "forged"}})
	want, ok := os.LookupEnv(proctree.InstanceEnv)
	if !ok {
		want = "unset"
	}
	want += "\n"
	if _, out, _ := run(t, s, CommandOptions{Cmd: `echo "${` + proctree.InstanceEnv + `-unset}"`}); out != want {
		t.Fatalf("%s in the session: %q, want %q", proctree.InstanceEnv, out, want)
	}
}
