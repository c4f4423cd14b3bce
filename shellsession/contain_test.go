package shellsession

import (
	"testing"

	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/containmenttest"
	"github.com/conchsh/conch/process"
)

// What a command starts that leaves the shell's tree and tag (setsid env
// -i, a double fork) ends with the session: when it is closed, and when
// its shell exits by itself.
func TestSessionEndEndsTheCgroup(t *testing.T) {
	t.Parallel()
	root := containmenttest.Root(t, containment.Limits{})
	for _, exit := range []bool{false, true} {
		name := "close"
		if exit {
			name = "exit"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Containment: root})
			marker := containmenttest.Marker()
			run(t, s, CommandOptions{Cmd: containmenttest.Escapes(marker)})
			containmenttest.WaitRunning(t, marker, 2)
			if exit {
				run(t, s, CommandOptions{Cmd: "exit 3"})
				processtestWait(t, s)
			} else {
				s.Close()
			}
			containmenttest.Gone(t, marker)
		})
	}
}

func processtestWait(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-s.Done():
	case <-t.Context().Done():
		t.Fatal("the session did not end")
	}
	if r := s.Info().Result; r == nil || r.Reason != process.Exited {
		t.Fatalf("session ended %+v", r)
	}
}
