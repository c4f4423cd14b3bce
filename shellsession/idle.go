package shellsession

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/process"
)

// watchIdle guards against a command whose end the shell cannot report: a
// command that lowered the shell's limit on open files, say, leaves it
// unable to open the streams its end line writes to, and some shells then
// drop the whole line, fallback included. While the command runs, the
// engine looks now and then — after 1 s, then every 2 s, then every 4 s —
// whether the shell sits at its prompt, reading its own input with nothing
// left to read: then the command is over and its end will not come. Looking
// costs a few reads of /proc, off the command's path.
//
// One timer of the process's does the looking for every session, armed
// while some session runs a command: a timer of each command's own would
// wake the Go runtime's poller at every command, one more context switch
// for a command that ends long before its first look (see
// BenchmarkRoundTripEngine), and one of each session's would wake once per
// session after its last command.
func (c *Command) watchIdle(out *os.File) {
	s := c.s
	c.mu.Lock()
	c.idleOut = out
	c.idleEvery = time.Second
	c.idleAt = time.Now().Add(c.idleEvery)
	c.mu.Unlock()
	w := &idleWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sessions == nil {
		w.sessions = make(map[*Session]uint64)
	}
	s.idleGen++
	w.sessions[s] = s.idleGen
	if w.armed {
		return
	}
	w.armed = true
	if w.timer == nil {
		w.timer = time.AfterFunc(time.Second, lookIdle)
	} else {
		w.timer.Reset(time.Second)
	}
}

// idleWatch is the process's timer for the idle looks (see watchIdle), and
// the sessions it looks at.
var idleWatch struct {
	mu       sync.Mutex
	timer    *time.Timer
	armed    bool                // timer is set to fire, or firing
	sessions map[*Session]uint64 // and their idleGen when their last command was added
}

// lookIdle runs when the idle timer fires: it looks at each command running
// whose look is due, each on a goroutine of its own (a look takes 100 ms),
// drops the sessions that run none, and sets the timer for the next look
// due; with no session left, it leaves the timer unset until a command
// starts.
func lookIdle() {
	w := &idleWatch
	w.mu.Lock()
	type watched struct {
		s   *Session
		gen uint64
	}
	all := make([]watched, 0, len(w.sessions))
	for s, gen := range w.sessions {
		all = append(all, watched{s, gen})
	}
	w.mu.Unlock()
	next := time.Second
	var idle []watched
	for _, x := range all {
		c := x.s.running()
		if c == nil {
			idle = append(idle, x)
			continue
		}
		c.mu.Lock()
		wait := time.Until(c.idleAt)
		if c.idleAt.IsZero() {
			// Taken up, its frame not yet sent (see Command.start): its
			// first look is a second after that.
			wait = time.Second
		} else if wait <= 0 {
			c.idleEvery = min(2*c.idleEvery, 4*time.Second)
			c.idleAt = time.Now().Add(c.idleEvery)
			wait = c.idleEvery
			go c.lookIdle()
		}
		c.mu.Unlock()
		next = min(next, wait)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range idle {
		if w.sessions[x.s] == x.gen { // no command added since it was seen idle
			delete(w.sessions, x.s)
		}
	}
	if len(w.sessions) == 0 {
		w.armed = false
		return
	}
	w.timer.Reset(next)
}

// unwatchIdle takes the session out of the idle looks, at its end.
func (s *Session) unwatchIdle() {
	w := &idleWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.sessions, s)
}

// lookIdle ends the command, still running, when its shell is back at its
// prompt, twice: markers in flight are read within moments. When the shell
// has closed its own input (exec {fd}>&- on ksh93's, say), which it can
// never open again, the command fails and the session ends: the shell could
// read no more commands, and some loop on the error for ever, a CPU busy.
func (c *Command) lookIdle() {
	if !c.running() {
		return
	}
	if c.s.deaf() {
		// Twice, as below: a shell that exits closes its input too, a
		// moment before it can be reaped.
		time.Sleep(100 * time.Millisecond)
		if c.running() && c.s.deaf() {
			c.giveUp(process.Result{Reason: process.Failed, Error: "the shell closed its own input, the descriptor the engine sends it commands on: it can run no more, and the session ends"})
			c.s.Kill(syscall.SIGKILL, 0, 0)
		}
		return
	}
	if !c.s.atPrompt() {
		return
	}
	time.Sleep(100 * time.Millisecond)
	// What the shell wrote before it went back to its prompt may not be
	// read yet, its end marker with it, however long after: on a loaded
	// machine the goroutine that reads it can wait its turn longer than
	// these looks, and a command that reported its end failed as one that
	// did not. Looked at in this order, a marker is seen unread in the
	// stream, or being taken, or its command has ended.
	if !c.outputInFlight() && c.running() && c.s.atPrompt() {
		c.endUnreported()
	}
}

// outputInFlight reports whether the command's stdout holds bytes not read
// yet, or the goroutine that reads its streams is taking what it read.
func (c *Command) outputInFlight() bool {
	c.mu.Lock()
	out := c.idleOut
	c.mu.Unlock()
	if out == nil {
		return false
	}
	rc, err := out.SyscallConn()
	if err != nil {
		return false
	}
	unread := 0
	if rc.Control(func(fd uintptr) { unread, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil {
		return false
	}
	return unread > 0 || c.stepping.Load()
}

func (c *Command) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase < phaseEnding
}

// endUnreported ends a command the shell finished without reporting it.
func (c *Command) endUnreported() {
	c.giveUp(process.Result{Reason: process.Failed,
		Error: "the shell went back to its prompt without reporting the command's end (a lowered ulimit -n, set -n, restricted mode (set -r), a function or trap that takes over the words the engine uses, its variables made read-only, or a builtin it calls disabled: see the README's shell matrix)"})
}

// deaf reports whether the shell runs on with its input closed: not
// exited, nor exiting (a zombie not yet reaped), nor replaced by a program
// the command exec'd. That program runs on where the shell was, its input
// closed as the exec closed it, and its end is the command's (exec sleep 3
// reports 0 after 3 s): it is not a shell stuck on a closed input.
func (s *Session) deaf() bool {
	if !s.inputClosed() {
		return false
	}
	pid := "/proc/" + strconv.Itoa(s.cmd.Process.Pid)
	b, err := os.ReadFile(pid + "/stat")
	i := bytes.LastIndexByte(b, ')') // the state follows the command's name
	if err != nil || i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X' {
		return false
	}
	return !s.execd(pid)
}

// execd reports whether the process at proc (its /proc directory), the
// shell's pid, is no longer the shell: a command exec'd a program. Every
// exec sets the process's arguments, and a shell never changes the ones it
// was started with; an exec of the same shell with its very arguments is
// not told apart.
func (s *Session) execd(proc string) bool {
	b, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	args := s.cmd.Args
	for len(b) > 0 && len(args) > 0 {
		arg, rest, _ := bytes.Cut(b, []byte{0})
		if string(arg) != args[0] {
			return true
		}
		b, args = rest, args[1:]
	}
	return len(b) > 0 || len(args) > 0
}

// inputClosed reports whether no process holds the shell's end of its
// input any more: the engine's end of a pipe then polls as an error, of a
// socket as hung up.
func (s *Session) inputClosed() bool {
	rc, err := s.stdin.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(p, 0); err == nil && n > 0 {
			closed = p[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return closed
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
