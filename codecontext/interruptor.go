package codecontext

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/process"
)

// interruptor is the second connection of a JavaScript driver: a worker
// thread of the driver that can end a cell busy after an await, and that is
// told of each interrupt here (see driver.js) rather than looking for one
// now and then, so that a driver idle in a cell's await makes no wait with
// a timeout.
type interruptor struct {
	mu     sync.Mutex        // guards the fields below
	ln     *net.UnixListener // the context's socket, kept listening for it
	conn   net.Conn
	ino    uint64 // conn's socket inode
	closed bool
}

// listen keeps ln for the worker's connection; false once the context has
// ended, when nothing may wait on it.
func (i *interruptor) listen(ln *net.UnixListener) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return false
	}
	i.ln = ln
	return true
}

// acceptInterruptor waits for the worker's connection until the context
// ends, which closes the listener.
func (c *Context) acceptInterruptor() {
	defer c.wg.Done()
	c.intr.mu.Lock()
	ln := c.intr.ln
	c.intr.mu.Unlock()
	if ln == nil {
		return
	}
	ln.SetDeadline(time.Time{})
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	ino, _ := inputwait.SocketInode(conn.(*net.UnixConn))
	c.intr.mu.Lock()
	if c.intr.ln == nil { // ended meanwhile
		c.intr.mu.Unlock()
		conn.Close()
		return
	}
	c.intr.conn, c.intr.ino = conn, ino
	c.intr.mu.Unlock()
	// A cell not opened, or an interrupt, from before the worker was there
	// to be told.
	if cell := c.runningCell(); cell != nil {
		if !cell.wasOpened() {
			c.intr.sent(cell.seq)
		}
		if cell.interruptSent() {
			c.intr.tell(cell.seq)
		}
	}
}

// tell writes the number of a cell being interrupted for the worker, if it
// is there. The write is bounded: a driver that reads nothing holds nothing
// up.
func (i *interruptor) tell(seq int) { i.write(strconv.Itoa(seq) + "\n") }

// sent tells the worker that cell seq was sent to the driver and has not
// been opened: a callback an earlier cell left may hold its thread, which
// the worker then looks at (see driver.js).
func (i *interruptor) sent(seq int) { i.write("+" + strconv.Itoa(seq) + "\n") }

func (i *interruptor) write(line string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.conn == nil {
		return
	}
	i.conn.SetWriteDeadline(time.Now().Add(time.Second))
	i.conn.Write([]byte(line))
}

// close stops listening and closes the worker's connection.
func (i *interruptor) close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	if i.ln != nil {
		i.ln.Close()
		i.ln = nil
	}
	if i.conn != nil {
		i.conn.Close()
	}
}

// quiet returns the inode of the worker's connection, zero without one.
func (i *interruptor) quiet() uint64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.ino
}

// interruptSent reports whether the running cell has been interrupted, by
// kill INT or its timeout, and goes on.
func (cell *Cell) interruptSent() bool {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	return cell.st == process.Running && (cell.interrupted || cell.timedOut)
}
