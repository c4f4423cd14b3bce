package main

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// passReaderGone passes SIGPIPE through s, as passTo passes a caught
// signal, once the reader of out — conch's stdout, when it is a pipe — has
// gone, while conch waits for an answer it has printed nothing of: a
// command that never comes back (conch run --idle 5s yes | true) ends as
// `yes | true` would, rather than run on with nothing left to read it.
// While conch prints, a write to the broken pipe says it (see report). The
// returned stop ends the watch; call it before s's own stop.
func (s signals) passReaderGone(out io.Writer) (stop func()) {
	f, ok := out.(*os.File)
	if !ok {
		return func() {}
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return func() {}
	}
	// The watch blocks in poll(2) on the pipe and on a pipe of its own,
	// whose close ends it.
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(p[0])
		fds := []unix.PollFd{{Fd: int32(f.Fd())}, {Fd: int32(p[0]), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil || fds[1].Revents != 0:
				return
			case fds[0].Revents&unix.POLLERR != 0:
				// A pipe's write end polls POLLERR once it has no reader.
				// Passed again while conch waits, as each write to the
				// pipe would raise it: one passed before the command's
				// program ran (queued in its session, still forking)
				// reached nothing.
				for {
					s <- syscall.SIGPIPE
					n, err := unix.Poll(fds[1:], int(pipeResend.Milliseconds()))
					if n != 0 || err != nil && !errors.Is(err, unix.EINTR) {
						return
					}
				}
			}
		}
	}()
	return func() {
		unix.Close(p[1])
		<-done
	}
}

// pipeResend is how often passReaderGone passes SIGPIPE again.
const pipeResend = 500 * time.Millisecond
