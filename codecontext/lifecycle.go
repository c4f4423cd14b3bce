package codecontext

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/conchsh/conch/process"
)

// exitedBetweenCells ends the context whose interpreter died between cells
// (a thread of an earlier cell called os._exit, say): nothing else would
// notice. Under a running cell, the cell notices and ends it. A driver
// that failed and said why (see driverFailure) leaves the context lost
// with why, as a cell it fails under is.
func (c *Context) exitedBetweenCells() {
	if c.runningCell() != nil {
		return
	}
	if why := c.driverFailure(); why != "" {
		c.h.End(&process.Result{Reason: process.Lost, Error: why}, syscall.SIGKILL)
	} else {
		c.h.EndedByItself(nil)
	}
	go c.teardown() // its directory goes now (see teardown)
}

// interpreterEnded is called by a cell whose interpreter exited under it:
// the context is terminal and everything queued fails, and only then does
// cellEnded end the cell, so that whoever sees the cell's end sees the
// context's. A driver that failed (failed, the cell's result) leaves the
// context lost with why, as between cells. The queue's own goroutine calls
// it, which the queue's end waits for: the end is recorded on another.
func (c *Context) interpreterEnded(failed *process.Result, cellEnded func()) {
	go func() {
		if failed != nil {
			c.h.End(failed, syscall.SIGKILL)
		} else {
			c.h.EndedByItself(nil)
		}
		<-c.h.Done() // EndedByItself leaves it to an End already running (a delete as it died)
		cellEnded()
		c.teardown() // its directory goes now (see teardown)
	}()
}

func (c *Context) runningCell() *Cell {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// readControl reads what the driver reports on its socket: "O N" when it
// has opened cell N's streams, which the end of its stdin waits for, "S N"
// when the cell starts to run, which an interrupt waits for, and "A N" when
// a JavaScript cell awaits the promise its script returned or "I N" when
// its script was interrupted: an interrupt is not sent again after either.
//
// A line longer than any the driver sends (a cell wrote it on the socket)
// is skipped, not an end of the reading: every interrupt after it would
// wait for an "S" line never read, and end its context.
func (c *Context) readControl() {
	defer c.wg.Done()
	r := bufio.NewReaderSize(c.conn, 4096)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				c.controlEnded(err)
				return
			}
			continue
		}
		if err != nil {
			c.controlEnded(err)
			return
		}
		what, id, _ := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
		n, err := strconv.Atoi(id)
		cell := c.runningCell()
		if err != nil || cell == nil || cell.seq != n {
			continue
		}
		switch what {
		case "O":
			cell.markOpened()
		case "S":
			if c.opts.startRead != nil {
				c.opts.startRead()
			}
			cell.started()
		case "A", "I":
			cell.awaits()
		}
	}
}

// socketClosedWhy is the error of a JavaScript context, and of the cell
// then running, whose driver's socket a cell closed (see controlEnded).
const socketClosedWhy = "a cell closed the context driver's socket (fs.closeSync), which left the driver deaf to cells: its interpreter was killed"

// deafAfter is how long an interpreter whose end of the driver's socket
// closed has to exit by itself before the engine takes its driver for deaf.
const deafAfter = time.Second

// controlEnded is called as the reading of the driver's socket ends with
// err. The context's end closes it (net.ErrClosed), and so does the
// interpreter's exit; but a JavaScript cell that closed the driver's
// descriptor of it (fs.closeSync) leaves Node running on, never told, its
// driver deaf: each later cell would be sent to nobody and hang. Such an
// interpreter, still running deafAfter later, is killed, and the context
// and the cell then running end lost with socketClosedWhy. A Python driver
// reads its socket between cells and fails by itself, saying why (see
// driverFailure); its socket's end is no sign there: sys.exit closes it
// while the interpreter waits for the threads of the cell.
func (c *Context) controlEnded(err error) {
	if errors.Is(err, net.ErrClosed) || c.opts.Language != JavaScript {
		return
	}
	t := time.NewTimer(deafAfter)
	defer t.Stop()
	select {
	case <-c.exited:
		return
	case <-t.C:
	}
	c.mu.Lock()
	c.deafWhy = socketClosedWhy
	c.mu.Unlock()
	c.h.End(&process.Result{Reason: process.Lost, Error: socketClosedWhy}, syscall.SIGKILL)
}

// deafness returns why the engine killed an interpreter whose driver was
// deaf, "" while it was not.
func (c *Context) deafness() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deafWhy
}
