package server

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conchsh/conch/internal/listenport"
	"github.com/conchsh/conch/process"
)

// portWatch looks for the listening ports of the processes that ready calls
// wait on: one look at a process every readyPoll, whatever the number of
// calls waiting on it. A look walks the process's tree through /proc (its
// tagged processes through the environment of every process on the host)
// and the open files of each process in it; each call looking for itself
// made 200 calls waiting on a port nobody opened cost a third of a core or
// more.
//
// A process's looks are made by a goroutine of its own that the first call
// to wait on it starts and the last to leave stops and waits for.
type portWatch struct {
	mu     sync.Mutex            // guards groups and each group's waiters
	groups map[string]*portGroup // by process id
	looks  atomic.Int64          // looks made, for tests
}

// portGroup is the looks at one process's ports and the calls waiting on
// them.
type portGroup struct {
	p       process.Process
	waiters int           // guarded by portWatch.mu
	stop    chan struct{} // closed when the last waiter left
	exited  chan struct{} // closed when the looking goroutine returned

	mu      sync.Mutex    // guards last and changed
	last    portLook      // the latest look; none yet: the zero look
	changed chan struct{} // closed and replaced when last changes
}

// portLook is what one look saw.
type portLook struct {
	ports []int // the ports the process's tree listens on, sorted
	// ended is whether the process had ended before the look and nothing
	// it left behind runs: no port can open any more.
	ended bool
}

// join returns the group that looks at p's ports, with the caller counted
// among its waiters, who must leave it once it no longer waits.
func (w *portWatch) join(p process.Process) *portGroup {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.groups[p.ID()]
	if g == nil {
		g = &portGroup{p: p, stop: make(chan struct{}), exited: make(chan struct{}), changed: make(chan struct{})}
		if w.groups == nil {
			w.groups = make(map[string]*portGroup)
		}
		w.groups[p.ID()] = g
		go g.run(&w.looks)
	}
	g.waiters++
	return g
}

// leave takes the caller off g's waiters; the last one stops its looks and
// waits for them to end.
func (w *portWatch) leave(g *portGroup) {
	w.mu.Lock()
	g.waiters--
	last := g.waiters == 0
	if last {
		delete(w.groups, g.p.ID())
		close(g.stop)
	}
	w.mu.Unlock()
	if last {
		<-g.exited
	}
}

// latest returns the latest look and a channel closed when a later look
// saw something else.
func (g *portGroup) latest() (portLook, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, g.changed
}

// run looks at once, then every readyPoll and as soon as the process ends,
// until the last waiter left or a look saw that no port can open any more.
func (g *portGroup) run(looks *atomic.Int64) {
	defer close(g.exited)
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	done := g.p.Done()
	for {
		l := lookPorts(g.p)
		looks.Add(1)
		g.set(l)
		if l.ended {
			<-g.stop
			return
		}
		select {
		case <-g.stop:
			return
		case <-done:
			done = nil // the answer that it ended first waits for this look
		case <-tick.C:
		}
	}
}

func (g *portGroup) set(l portLook) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l.ended != g.last.ended || !slices.Equal(l.ports, g.last.ports) {
		g.last = l
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// lookPorts looks at the ports p's processes listen on, those it left
// behind included.
func lookPorts(p process.Process) portLook {
	ended := false
	select {
	case <-p.Done():
		ended = true
	default:
	}
	t, ok := p.(treeOf)
	if !ok {
		return portLook{ended: ended}
	}
	pids := t.Tree()
	if len(pids) == 0 {
		return portLook{ended: ended}
	}
	ports, err := listenport.Ports(pids)
	if err != nil {
		return portLook{} // as good as none seen: looked at again
	}
	return portLook{ports: ports}
}
