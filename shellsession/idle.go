package shellsession

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/process"
)

// watchIdle guards against a command whose end the shell cannot report: a
// command that lowered the shell's limit on open files, say, leaves it
// unable to open the streams its end line writes to, and some shells then
// drop the whole line, fallback included. While the command runs, the
// session looks now and then — after 1 s, then every 2 s, then every 4 s —
// whether the shell sits at its prompt, reading its own input with nothing
// left to read: then the command is over and its end will not come. Looking
// costs a few reads of /proc, off the command's path.
//
// One timer of the session's does the looking, armed while commands run:
// a timer of each command's own would wake the Go runtime's poller at every
// command, one more context switch for a command that ends long before its
// first look (see BenchmarkRoundTripEngine).
func (c *Command) watchIdle() {
	s := c.s
	c.mu.Lock()
	c.idleEvery = time.Second
	c.idleAt = time.Now().Add(c.idleEvery)
	c.mu.Unlock()
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if s.idleArmed {
		return
	}
	s.idleArmed = true
	if s.idleTimer == nil {
		s.idleTimer = time.AfterFunc(time.Second, s.lookIdle)
	} else {
		s.idleTimer.Reset(time.Second)
	}
}

// lookIdle runs when the session's idle timer fires: it looks at the command
// running, if its look is due, and arms the timer for its next one; with no
// command running, it leaves the timer unarmed until one starts.
func (s *Session) lookIdle() {
	for {
		c := s.running()
		var wait time.Duration
		if c != nil {
			c.mu.Lock()
			wait = time.Until(c.idleAt)
			if c.idleAt.IsZero() {
				// Taken up, its frame not yet sent (see Command.start): its
				// first look is a second after that.
				wait = time.Second
			}
			c.mu.Unlock()
			if wait <= 0 {
				c.lookIdle()
				c.mu.Lock()
				c.idleEvery = min(2*c.idleEvery, 4*time.Second)
				c.idleAt = time.Now().Add(c.idleEvery)
				c.mu.Unlock()
				continue // it may have ended, and another command run since
			}
		}
		s.idleMu.Lock()
		if c != nil {
			s.idleTimer.Reset(wait)
			s.idleMu.Unlock()
			return
		}
		s.idleArmed = false
		s.idleMu.Unlock()
		// A command that started meanwhile found the timer armed.
		if s.running() == nil {
			return
		}
		s.idleMu.Lock()
		if s.idleArmed {
			s.idleMu.Unlock()
			return
		}
		s.idleArmed = true
		s.idleMu.Unlock()
	}
}

// lookIdle ends the command, still running, when its shell is back at its
// prompt, twice: markers in flight are read within moments.
func (c *Command) lookIdle() {
	if !c.running() || !c.s.atPrompt() {
		return
	}
	time.Sleep(100 * time.Millisecond)
	if c.running() && c.s.atPrompt() {
		c.endUnreported()
	}
}

func (c *Command) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase < phaseEnding
}

// endUnreported ends a command the shell finished without reporting it.
func (c *Command) endUnreported() {
	c.giveUp(process.Result{Reason: process.Failed,
		Error: "the shell went back to its prompt without reporting the command's end (a lowered ulimit -n, or a function or trap that takes over the words the engine uses: see the README's shell matrix)"})
}

// atPrompt reports whether the shell is blocked reading its own input (the
// pipe the engine writes commands to) and has read all of it.
func (s *Session) atPrompt() bool {
	pid := strconv.Itoa(s.cmd.Process.Pid)
	sc, err := os.ReadFile("/proc/" + pid + "/syscall")
	if err != nil {
		return false
	}
	// read(fd, ...) or, on a socket, recvfrom(fd, ...): fd 0, or the
	// descriptor busybox reads its input link from.
	f := strings.Fields(string(sc))
	if len(f) < 2 || f[0] != strconv.Itoa(unix.SYS_READ) && f[0] != strconv.Itoa(unix.SYS_RECVFROM) {
		return false
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 32)
	if err != nil {
		return false
	}
	in, err := os.Readlink("/proc/" + pid + "/fd/" + strconv.Itoa(int(fd)))
	if err != nil || in != s.inputName {
		return false // it reads the command's stdin, not the shell's input
	}
	rc, err := s.stdin.SyscallConn()
	if err != nil {
		return false
	}
	unread := -1
	// TIOCINQ is FIONREAD: the bytes in the pipe not read yet; on a
	// socket, SIOCOUTQ: the bytes sent that the shell has not read.
	req := unix.TIOCINQ
	if strings.HasPrefix(s.inputName, "socket:") {
		req = unix.SIOCOUTQ
	}
	rc.Control(func(fd uintptr) { unread, _ = unix.IoctlGetInt(int(fd), uint(req)) })
	return unread == 0
}
