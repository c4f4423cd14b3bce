package shellsession

import (
	"syscall"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// TestSessionEndsBeforeItsCommand: whoever sees a command end because its
// shell died under it sees the session ended too — terminal, with its
// result — and the command queued behind it failed, at the moment the
// command's Done closes (promise 10). Before, the command ended first and
// the session's end was recorded after it: the session read running for a
// while when the engine ended it (a kill with TERM, a delete), and the
// queued command was not failed yet. Each way a shell dies under a command
// is tried a few times on a few shells: a command that kills its shell, or
// exits it, a shell killed from outside, a session killed with TERM through
// the API, one closed (deleted) as its command runs, and one closed as its
// shell is killed.
func TestSessionEndsBeforeItsCommand(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name, cmd string
		end       func(s *Session) // ends the session from outside, or nil
		want      process.Reason
	}{
		{"kill -9 $$", "kill -9 $$", nil, process.Lost},
		{"exit 3", "exit 3", nil, process.Exited},
		{"killed from outside", "sleep 100", func(s *Session) { syscall.Kill(s.Info().PID, syscall.SIGKILL) }, process.Lost},
		{"kill TERM", "sleep 100", func(s *Session) { s.Kill(syscall.SIGTERM, 0, 0) }, process.Lost},
		{"close", "sleep 100", func(s *Session) { s.Close() }, process.Lost},
		{"killed as closed", "sleep 100", func(s *Session) {
			syscall.Kill(s.Info().PID, syscall.SIGKILL)
			s.Close()
		}, process.Lost},
	}
	for _, shell := range testShells {
		for _, way := range ways {
			t.Run(shell+"/"+way.name, func(t *testing.T) {
				t.Parallel()
				for range 3 {
					s := newSession(t, Options{Shell: shell})
					c, err := s.Submit(CommandOptions{Cmd: way.cmd})
					require.NoError(t, err)
					// The shell may die before this is queued: then it is
					// refused, and there is nothing queued to look at.
					queued, qerr := s.Submit(CommandOptions{Cmd: "echo never"})
					ended := make(chan struct{})
					if way.end != nil {
						waitRunning(t, c)
						go func() {
							defer close(ended)
							way.end(s)
						}()
					} else {
						close(ended)
					}
					select {
					case <-c.Done():
					case <-time.After(deadline):
						t.Fatal("the command never ended")
					}
					// At once: nothing may be on its way.
					info := s.Info()
					select {
					case <-s.Done():
					default:
						t.Fatalf("the command ended %+v, its session had not: %+v", c.Result(), info)
					}
					require.Equal(t, process.Terminal, info.State)
					require.NotNil(t, info.Result)
					if qerr == nil {
						select {
						case <-queued.Done():
						default:
							t.Fatal("the queued command was not failed yet")
						}
						require.Equal(t, process.Failed, queued.Result().Reason, "%+v", queued.Result())
					} else {
						require.ErrorIs(t, qerr, ErrSessionEnded)
					}
					require.Equal(t, way.want, c.Result().Reason, "%+v", c.Result())
					<-ended
				}
			})
		}
	}
}
