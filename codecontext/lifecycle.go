package codecontext

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/process"
)

// end kills the interpreter's tree with sig, fails queued cells and waits
// for the running one, then marks the context terminal with r unless the
// interpreter had already ended by itself.
func (c *Context) end(r *process.Result, sig syscall.Signal) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return
	}
	c.closing = true
	c.mu.Unlock()
	c.killTree(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-c.exited:
		case <-time.After(KillGrace):
			c.killTree(syscall.SIGKILL)
		}
	}
	<-c.exited
	c.queue.Close(fmt.Errorf("context %s: %w", c.id, ErrContextEnded))
	c.finish(r)
	c.closeDrains()
}

// killTree signals the interpreter, its descendants and the processes
// tagged with the context's id that left its tree.
func (c *Context) killTree(sig syscall.Signal) {
	proctree.Signal(c.cmd.Process.Pid, sig, true)
	proctree.SignalTagged(c.id, sig)
}

// finish marks the context terminal with r, or with what the interpreter's
// exit status says when it ended by itself.
func (c *Context) finish(r *process.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == process.Terminal {
		return
	}
	if c.cmd != nil && c.cmd.ProcessState != nil {
		if st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && (r == nil || !c.closing) {
			switch {
			case st.Exited():
				r = &process.Result{Reason: process.Exited, ExitCode: ptr(st.ExitStatus())}
			case st.Signaled() && r == nil:
				r = &process.Result{Reason: process.Signaled, Signal: process.SignalName(st.Signal())}
			}
		}
	}
	if r == nil {
		r = &process.Result{Reason: process.Lost}
	}
	c.state = process.Terminal
	c.result = r
	c.exitedAt = time.Now()
	c.log.Close()
	close(c.done)
}

// interpreterEnded is called by a cell whose interpreter exited under it:
// the context is terminal and everything queued fails.
func (c *Context) interpreterEnded() {
	go func() {
		c.mu.Lock()
		closing := c.closing
		c.closing = true
		c.mu.Unlock()
		if closing {
			return
		}
		c.killTree(syscall.SIGKILL) // what the dead interpreter left behind
		c.queue.Close(fmt.Errorf("context %s: %w", c.id, ErrContextEnded))
		c.finish(nil)
		c.closeDrains()
	}()
}

func (c *Context) runningCell() *Cell {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// addDrain and dropDrain track cell streams still read after their cell.
func (c *Context) addDrain(f *os.File) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing && c.state == process.Terminal {
		return false
	}
	c.drains[f] = true
	return true
}

func (c *Context) dropDrain(f *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.drains, f)
}

// closeDrains stops reading streams that children still hold, and closes
// the driver's socket.
func (c *Context) closeDrains() {
	c.mu.Lock()
	fs := c.drains
	c.drains = make(map[*os.File]bool)
	c.mu.Unlock()
	for f := range fs {
		f.Close()
	}
	if c.conn != nil {
		c.conn.Close()
	}
}

// readControl reads what the driver reports on its socket: "O N" when it
// has opened cell N's streams, which the end of its stdin waits for, "S N"
// when the cell starts to run, which an interrupt waits for, and "A N" when
// a JavaScript cell awaits the promise its script returned or "I N" when
// its script was interrupted: an interrupt is not sent again after either.
func (c *Context) readControl() {
	defer c.wg.Done()
	sc := bufio.NewScanner(c.conn)
	for sc.Scan() {
		what, id, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(id)
		cell := c.runningCell()
		if err != nil || cell == nil || cell.seq != n {
			continue
		}
		switch what {
		case "O":
			cell.stdin.opened()
		case "S":
			cell.started()
		case "A", "I":
			cell.awaits()
		}
	}
}

// diagTail drains the interpreter's own stdout and stderr — what it writes
// between cells, and its last words when it fails — keeping the last bytes
// to explain a failure.
type diagTail struct {
	f    *os.File
	mu   sync.Mutex
	last []byte
}

const diagKeep = 2048

func (d *diagTail) run() {
	defer d.f.Close()
	buf := make([]byte, 4096)
	for {
		n, err := d.f.Read(buf)
		d.mu.Lock()
		d.last = append(d.last, buf[:n]...)
		if len(d.last) > diagKeep {
			d.last = append(d.last[:0], d.last[len(d.last)-diagKeep:]...)
		}
		d.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (d *diagTail) tail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.TrimSpace(string(d.last))
}

func ptr[T any](v T) *T { return &v }
