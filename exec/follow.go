package exec

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/rawcall"
)

// A process started on pipes where pidfds work is owned by one goroutine,
// follow, in place of wait and a copyOut for each output: an epoll set of
// its own holds the read ends of both outputs and the process's pidfd, and
// follow waits on it in epoll_wait, a thread blocked there as wait's is in
// waitid. Three goroutines, two of them parked on the Go poller from the
// start, each woke at the process's end in turn and handed on to the next;
// a running process held their stacks (about 160 KiB: each copy's buffer
// sat on its stack) where it holds one goroutine and a pooled buffer now
// (about 75 KiB).
//
// This process keeps the child's ends of the output pipes open
// (Process.keepers) until the pidfd says the process exited. A process
// closes its descriptors as it exits, a moment before it can be waited
// for: the hang-up of its outputs woke follow, which read them to their
// end and slept again, in waitid, for the exit — two wake-ups a process,
// each a sleep and a wake of a thread. Kept open, the outputs hang up only
// once follow closes its ends after the exit, and one wake-up serves both.

// pidfdsWork reports whether this kernel gives processes pidfds that an
// epoll set can wait on (Linux 5.3).
var pidfdsWork = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// pidfdTag tags the pidfd in follow's epoll set; outputs are tagged with
// their index.
const pidfdTag = 2

// readsInTurn bounds the full reads of one output follow makes before it
// looks at the other and at the pidfd again (256 KiB): an output that
// never pauses delays neither.
const readsInTurn = 8

// A read of floodRead bytes or more says that output comes in blocks, a
// flood most likely: for spinFor after it, follow looks for more without
// blocking in between, as the Go poller's threads look for work before they
// sleep. A thread that slept each time the pipe ran dry was woken for
// every block the writer wrote (4 KiB, for head -c): a one-shot's output
// flowed at 1.5-2.3 GB/s against 1.9-3.6 for copies on the Go poller, and
// at 2.8-3.4 GB/s so. A line now and then (a read under floodRead) costs
// no spin.
const (
	floodRead = 4 << 10
	spinFor   = 20 * time.Microsecond
)

// followSet returns an epoll set of a process's outputs, read ends of pipes,
// and of its pidfd, for follow. Edge-triggered: an output is read again
// once more bytes come to it, or while its last read filled the buffer.
func followSet(outs []output, pidfd int) (int, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("epoll_create1", err)
	}
	add := func(fd int, tag int32) error {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: tag}
		return unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev)
	}
	for i, o := range outs {
		err = errors.Join(err, add(o.fd, int32(i)))
	}
	if err = errors.Join(err, add(pidfd, pidfdTag)); err != nil {
		unix.Close(ep)
		return -1, os.NewSyscallError("epoll_ctl", err)
	}
	return ep, nil
}

// follow owns a process started on pipes (see the top of this file): it
// reads each output as bytes come to it, in the order they came, until the
// pidfd says the process exited; then closes the kept ends and reads each
// output to its end, draining one still held open by what the process left
// behind for at most the drain delay; then closes the log and done. (Both
// outputs end before the exit only when a read of them fails: then it
// waits for the exit.)
func (p *Process) follow(ep int, outs []output) {
	b := copyBuffers.Get().(*[32 << 10]byte)
	defer copyBuffers.Put(b)
	buf := b[:]
	open := len(outs)
	var more [2]bool // outputs that may hold more: the last read filled buf, or the writers are gone
	var hup [2]bool  // outputs whose writers have all closed: read to end-of-file
	var events [len(more) + 1]unix.EpollEvent
	exited := false
	var drainBy, lastFlood time.Time
	for open > 0 {
		timeout := -1 // milliseconds
		if !drainBy.IsZero() {
			left := time.Until(drainBy)
			if left <= 0 {
				break
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if more[0] || more[1] || time.Since(lastFlood) < spinFor {
			timeout = 0
		}
		n, err := unix.EpollWait(ep, events[:], timeout)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break // not seen: the set is this goroutine's alone
		}
		ended := false
		for _, ev := range events[:n] {
			if ev.Fd == pidfdTag {
				ended = true
				continue
			}
			more[ev.Fd] = true
			// The edge that says the writers closed may come with the
			// last bytes: no other follows it, so the end-of-file after
			// them is read now.
			hup[ev.Fd] = hup[ev.Fd] || ev.Events&(unix.EPOLLHUP|unix.EPOLLERR) != 0
		}
		if followWoke != nil {
			followWoke(p, ended)
		}
		if ended && p.closeKeepers() {
			// The process has written all it will: what it left behind
			// may hold an output still, else each is read to its end now.
			for i, o := range outs {
				if o.fd >= 0 {
					more[i], hup[i] = true, true
				}
			}
		}
		for i, o := range outs {
			// A full read may have left more: read on, a few times
			// before the other output and the pidfd are looked at again.
			for reads := 0; more[i] && reads < readsInTurn; reads++ {
				n, err := rawcall.Read(o.fd, buf)
				if n > 0 {
					p.log.Write(o.ch, buf[:n])
				}
				if n >= floodRead {
					lastFlood = time.Now()
				}
				// A short read emptied the pipe: bytes that come later
				// are another edge of the set's.
				more[i] = n == len(buf) || hup[i] && n > 0
				if n == 0 && err != unix.EAGAIN && err != unix.EINTR {
					closeRaw(o.fd) // end of file, or a read that cannot go on
					outs[i].fd = -1
					open--
				}
			}
		}
		if ended && !exited {
			exited = true
			p.exit(proctree.Wait(p.cmd)) // at once: it has ended
			if open > 0 {
				if drainArmed != nil {
					drainArmed()
				}
				drainBy = time.Now().Add(p.drainDelay)
			}
		}
	}
	if !exited {
		// Both outputs ended: the exit is at hand, or the process closed
		// them and runs on; nothing is left to read while it comes.
		p.exit(proctree.Wait(p.cmd))
	}
	p.closeKeepers()
	closeRaw(ep, p.pidfd)
	for _, o := range outs {
		if o.fd >= 0 {
			closeRaw(o.fd)
		}
	}
	p.finish()
}
