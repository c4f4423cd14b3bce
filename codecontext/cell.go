package codecontext

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
)

// drainAfterExit bounds how long output is still read after the interpreter
// died under a cell, for children may hold the cell's streams open.
const drainAfterExit = 2 * time.Second

// Cell is one cell submitted to a context. It implements process.Process,
// of kind code.
type Cell struct {
	c         *Context
	seq       int // the driver's number for it
	id        string
	opts      CellOptions
	log       *logstore.Log
	createdAt time.Time
	done      chan struct{} // closed once result is set
	result    process.Result
	stdin     resident.Stdin
	text      string // the head of opts.Code the record keeps (see process.KeepText)
	textBytes int    // the length of opts.Code

	mu          sync.Mutex // guards the fields below
	st          process.State
	startedAt   time.Time
	lastPID     int // the last pid handed out before it started (see own)
	exitedAt    time.Time
	cwd         string // the directory it started in
	nonce       sentinel.Nonce
	isStarted   bool // the driver runs it
	opened      bool // the driver has opened its streams
	awaiting    bool // its JavaScript script returned a promise the driver awaits
	pendingINT  bool // an interrupt waits for isStarted
	interrupted bool
	timedOut    bool
	escalation  bool   // the escalation of its first interrupt is armed
	lostWhy     string // why the engine killed its interpreter under it
	ends        int    // stream end markers seen
	end         sentinel.End
	endsDone    chan struct{} // closed when both end markers are seen
	keepers     []*resident.Keeper
	readers     int
	readersDone chan struct{} // closed when both stream readers have returned
	timers      []*time.Timer
	errTail     []byte         // the last bytes of its stderr (see driverFailedStatus)
	meter       resident.Meter // what it costs, from begin on
	usage       process.Usage  // the room for its result's usage (see Meter.Account)
}

func newCell(c *Context, seq int, opts CellOptions) *Cell {
	if opts.Stdin == "" {
		opts.Stdin = process.StdinClosed
	}
	keep := opts.KeepLogs
	if keep == "" {
		keep = logstore.KeepUntilCleanup
	}
	cell := &Cell{
		c: c, seq: seq, id: process.NewID(), opts: opts,
		log:         logstore.New(logstore.Options{Retention: c.opts.Retention, Keep: keep, Held: opts.HoldLogs}),
		createdAt:   time.Now(),
		done:        make(chan struct{}),
		st:          process.Starting,
		endsDone:    make(chan struct{}),
		readersDone: make(chan struct{}),
		readers:     2,
	}
	cell.text, cell.textBytes = process.KeepText(opts.Code)
	cell.stdin.Init(opts.Stdin == process.StdinOpen, true)
	if t := opts.ExecutionTimeout; t > 0 {
		cell.addTimer(time.AfterFunc(t, cell.timeout))
	}
	return cell
}

// ID returns the cell's id.
func (cell *Cell) ID() string { return cell.id }

// Context returns the context the cell belongs to.
func (cell *Cell) Context() *Context { return cell.c }

// Log returns the cell's output.
func (cell *Cell) Log() *logstore.Log { return cell.log }

// Done is closed once the cell is terminal.
func (cell *Cell) Done() <-chan struct{} { return cell.done }

// Result returns how the cell ended; valid once Done is closed.
func (cell *Cell) Result() process.Result { return cell.result }

func (cell *Cell) state() process.State {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	return cell.st
}

// Info describes the cell.
func (cell *Cell) Info() process.Info {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	i := process.Info{
		ID: cell.id, Name: cell.opts.Name, Kind: process.KindCode, State: cell.st,
		SessionID: cell.c.id, Code: cell.text, CodeBytes: cell.textBytes, Language: string(cell.c.opts.Language),
		Cwd: cell.cwd, Stdin: cell.opts.Stdin, ExecutionTimeout: cell.opts.ExecutionTimeout,
		KeepLogs: cell.log.Keep(), CreatedAt: cell.createdAt, StartedAt: cell.startedAt,
		ExitedAt: cell.exitedAt,
	}
	if cell.st == process.Terminal {
		r := cell.result
		i.Result = &r
		i.StdinDroppedBytes = cell.stdin.Dropped()
	}
	return i
}

// Cancel fails a cell that never ran (its context ended first).
func (cell *Cell) Cancel(err error) {
	cell.finish(process.Result{Reason: process.Failed, Error: err.Error()})
}

// Run runs the cell in its context's interpreter; the context's queue calls it.
func (cell *Cell) Run() {
	c := cell.c
	if cell.state() == process.Terminal { // deleted while queued
		return
	}
	select {
	case <-c.exited:
		cell.Cancel(c.h.ErrEnded())
		return
	default:
	}
	st, err := c.newStreams(cell.seq, cell.opts.Stdin == process.StdinOpen)
	if err != nil {
		cell.finish(process.Result{Reason: process.Failed, Error: fmt.Sprintf("prepare streams: %v", err)})
		return
	}
	nonce := sentinel.NewNonce()
	if !cell.begin(nonce, st) { // ended while its streams were made
		st.close()
		return
	}
	c.wg.Add(2)
	go cell.readStream(st.out, logstore.Stdout, true)
	go cell.readStream(st.err, logstore.Stderr, false)
	if st.stdin != nil {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			cell.stdin.Feed(st.stdin)
		}()
	}
	msg := cellMessage{ID: cell.seq, Code: cell.opts.Code, Nonce: string(nonce),
		Stdin: st.stdinPath, Stdout: st.out.Path, Stderr: st.err.Path}
	cell.opts.Code = "" // the record keeps its head
	if err := c.send(msg); err != nil {
		// A failed write means the interpreter is gone, or, in
		// JavaScript, that a cell closed the driver's socket: the engine
		// ends that interpreter (see controlEnded).
		<-c.exited
	}
	// A JavaScript driver that has not opened the cell 200 ms later may be
	// held by a callback an earlier cell left: its worker is told, and looks.
	if c.opts.Language == JavaScript {
		cell.addTimer(time.AfterFunc(openedWithin, func() {
			if !cell.wasOpened() {
				c.intr.sent(cell.seq)
			}
		}))
	}
	select {
	case <-cell.endsDone:
	case <-c.exited:
		cell.interpreterExited()
	}
	if st.stdinPath != "" {
		os.Remove(st.stdinPath)
	}
	c.mu.Lock()
	c.running = nil
	c.mu.Unlock()
}

// begin marks the cell running, unless it has ended in the queue (killed,
// deleted, or timed out).
func (cell *Cell) begin(nonce sentinel.Nonce, st *streams) bool {
	c := cell.c
	last := proctree.LastPID()
	meter := c.h.Meter()
	c.mu.Lock()
	cwd := c.cwd
	c.mu.Unlock()
	cell.mu.Lock()
	defer cell.mu.Unlock()
	if cell.st == process.Terminal {
		return false
	}
	c.mu.Lock()
	c.running = cell
	c.mu.Unlock()
	cell.st = process.Running
	cell.lastPID = last
	cell.meter = meter
	cell.startedAt = time.Now()
	cell.cwd = cwd
	cell.nonce = nonce
	cell.keepers = []*resident.Keeper{st.out.Keep, st.err.Keep}
	return true
}

// resultFor turns how the driver saw the cell end into its result: a
// timeout shows as timed_out; an interrupt the engine sent, by the
// interrupt's status, as INT. A cell that caught the interrupt (Python's
// except KeyboardInterrupt) and then ended by itself reports its own
// status, as a session command that caught it does: the interrupt did not
// end it.
func (cell *Cell) resultFor(r process.Result) process.Result {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	switch {
	case cell.timedOut:
		r = process.Result{Reason: process.TimedOut}
	case cell.interrupted && endedByInterrupt(r):
		r = process.Result{Reason: process.Signaled, Signal: "INT"}
	}
	return r
}

// interruptedStatus is the status both drivers end a cell with when an
// interrupt ended it, as a shell's $? shows a death by SIGINT.
const interruptedStatus = 128 + int(syscall.SIGINT)

// endedByInterrupt reports whether r, of a cell the engine interrupted, is
// the interrupt's doing: the drivers' interruptedStatus, or no status.
func endedByInterrupt(r process.Result) bool {
	return r.Reason != process.Exited || r.ExitCode == nil || *r.ExitCode == interruptedStatus
}

// interpreterExited ends a cell whose interpreter exited under it: with the
// interpreter's exit status when it exited (sys.exit, process.exit), lost
// when it was killed.
func (cell *Cell) interpreterExited() {
	c := cell.c
	cell.stdin.Close()
	cell.closeKeepers()
	select {
	case <-cell.readersDone:
	case <-time.After(drainAfterExit):
	}
	r := process.Result{Reason: process.Lost, Error: "the context's interpreter died"}
	var failed *process.Result // the driver's failure, which ends the context too
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			r = cell.resultFor(process.ExitedWith(ws.ExitStatus()))
			why := c.driverFailure()
			if why == "" && ws.ExitStatus() == driverFailedStatus {
				cell.mu.Lock()
				why = failureError(string(cell.errTail), c.opts.Language)
				cell.mu.Unlock()
			}
			if why != "" {
				r = process.Result{Reason: process.Lost, Error: why}
				failed = &process.Result{Reason: process.Lost, Error: why}
			}
		case ws.Signaled() && c.h.OOMKilledIt():
			r.Error = "the OOM killer ended the context's interpreter at the memory limit"
		case ws.Signaled() && c.deafness() != "":
			r.Error = c.deafness()
		case ws.Signaled():
			r.Error = "the context's interpreter was killed by SIG" + process.SignalName(ws.Signal())
		}
	}
	cell.mu.Lock()
	if cell.lostWhy != "" { // the engine killed the interpreter: the cell did not stop
		r = process.Result{Reason: process.Lost, Error: cell.lostWhy}
		if cell.timedOut {
			r.Reason = process.TimedOut
		}
	}
	// Measured now, while the context's cgroup, which its end removes, is
	// there to read; not when its end markers came as its output drained.
	if cell.st != process.Terminal {
		r = cell.meter.Account(r, &cell.usage, false)
	}
	cell.mu.Unlock()
	// The cell ends after its context: whoever sees it lost sees the
	// context terminal too, and the cells queued behind it failed.
	c.interpreterEnded(failed, func() { cell.finishMeasured(r) })
}

// driverFailedWhy begins the error of a cell or context whose driver failed.
const driverFailedWhy = "the context's driver failed, which ended its interpreter (a cell may have replaced what the driver calls): "

// descriptorsClosedWhy is the error of a cell or context whose driver
// failed because a cell closed its descriptors.
const descriptorsClosedWhy = "a cell closed the context driver's descriptors (os.closerange, os.close), which ended its interpreter"

// driverFailedLine is the line a driver writes to its own output, before
// why, when it fails and ends (driver.py's and driver.js's last handler);
// descriptorsClosedLine the one driver.py writes after why when a cell
// closed its descriptors.
const (
	driverFailedLine      = "conch: the driver failed:"
	descriptorsClosedLine = "conch: a cell closed the driver's descriptors"
)

// driverFailedStatus is the exit status of a driver that failed. A Python
// driver whose own descriptors a cell closed (os.closerange) says why in
// the file failedReport of the context's directory, or, when it cannot
// write that file, on fd 2, the running cell's stderr: the engine looks
// there when the interpreter exits with it and its own output says nothing.
const driverFailedStatus = 70

// failedReport is the file in the context's directory where driver.py
// writes why it failed, which needs no descriptor a cell could close.
const failedReport = "failed"

// driverFailure returns the error of a driver that said it failed, on its
// own output or in failedReport, before its interpreter exited. It waits a
// moment for the rest of that output, which the interpreter wrote before it
// exited.
func (c *Context) driverFailure() string {
	select {
	case <-c.h.Diag().Ended():
	case <-time.After(500 * time.Millisecond):
	}
	if why := failureError(c.h.Diag().Tail(), c.opts.Language); why != "" {
		return why
	}
	return failureError(readReport(filepath.Join(c.dir.Path(), failedReport)), c.opts.Language)
}

// readReport returns the head of the regular file at path, if there is one:
// not through a link, nor a FIFO or a terminal a cell put there (the
// daemon's controlling terminal, were it to lead its session).
func readReport(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4<<10))
	return string(b)
}

// failureError returns the error of a driver whose failure text says
// why, else "".
func failureError(text string, lang Language) string {
	i := strings.LastIndex(text, driverFailedLine)
	if i < 0 {
		return ""
	}
	if strings.Contains(text[i:], descriptorsClosedLine) {
		return descriptorsClosedWhy
	}
	if why := failureWhy(text[i:], lang); why != "" {
		return driverFailedWhy + why
	}
	return ""
}

// failureWhy returns the message after the last driverFailedLine in text.
func failureWhy(text string, lang Language) string {
	i := strings.LastIndex(text, driverFailedLine)
	if i < 0 {
		return ""
	}
	why := strings.TrimSpace(text[i+len(driverFailedLine):])
	if why == "" {
		return ""
	}
	lines := strings.Split(why, "\n")
	line := lines[0]
	if lang == Python {
		line = lines[len(lines)-1]
	}
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return strings.TrimSpace(line)
}

// readStream reads one of the cell's streams into its log until the end
// marker, then discards what children write until they close it.
func (cell *Cell) readStream(st *stream, ch logstore.Channel, trailer bool) {
	c := cell.c
	defer c.wg.Done()
	defer cell.readerReturned()
	defer st.Close()
	if !c.h.AddDrain(st.R) {
		return
	}
	defer c.h.DropDrain(st.R)
	cell.mu.Lock()
	nonce := cell.nonce
	cell.mu.Unlock()
	sc := sentinel.NewScanner(nonce, trailer, func(b []byte) {
		cell.log.Write(ch, b)
		if ch == logstore.Stderr {
			cell.noteErr(b)
		}
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := st.R.Read(buf)
		if n > 0 && !sc.Done() {
			if sc.Write(buf[:n]); sc.Done() { // an imitation of the marker is output
				// From here on only children write: end-of-file comes
				// when the last of them lets go.
				st.Keep.Close()
				end := sc.End()
				cell.streamEnded(&end, trailer)
			}
		}
		if err != nil {
			if err != io.EOF || !sc.Done() {
				sc.Flush()
			}
			return
		}
	}
}

// noteErr keeps the last KiB of the cell's stderr.
func (cell *Cell) noteErr(b []byte) {
	const keep = 1 << 10
	cell.mu.Lock()
	defer cell.mu.Unlock()
	cell.errTail = append(cell.errTail, b...)
	if n := len(cell.errTail); n > keep {
		cell.errTail = append(cell.errTail[:0], cell.errTail[n-keep:]...)
	}
}

func (cell *Cell) readerReturned() {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	if cell.readers--; cell.readers == 0 {
		close(cell.readersDone)
	}
}

// closeKeepers lets the readers see end-of-file once the interpreter is gone.
func (cell *Cell) closeKeepers() {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	for _, k := range cell.keepers {
		k.Close()
	}
}

// cwdUnnamed is what a cell whose interpreter could not name its working
// directory, one whose path is longer than PATH_MAX, says of it (Node's
// process.cwd fails there; Python's getcwd names it, up to
// sentinel.MaxCwd).
const cwdUnnamed = "the working directory's path is longer than PATH_MAX (4,096 bytes), past which the interpreter cannot name it: cwd is left out until a cell changes to a directory whose path is shorter"

// streamEnded records that a stream reached its end marker; the stdout
// one (trailer) carries the status and the directory.
func (cell *Cell) streamEnded(end *sentinel.End, trailer bool) {
	cell.mu.Lock()
	if cell.ends == 2 {
		cell.mu.Unlock()
		return
	}
	cell.ends++
	if trailer {
		cell.end = *end
	}
	done := cell.ends == 2
	e := cell.end
	if done {
		cell.end = sentinel.End{} // the record keeps the result's directory only
	}
	cell.mu.Unlock()
	if !done {
		return
	}
	c := cell.c
	unnamed := false // a directory past PATH_MAX that the interpreter could not name
	if e.CwdTooLong {
		// Longer than the engine reports (Python's getcwd walks up past
		// PATH_MAX): left out, from the context's too.
		c.mu.Lock()
		c.cwd = ""
		c.mu.Unlock()
	} else if e.Cwd == "" {
		// The interpreter found no path to its directory: it was removed.
		// It is named by the path it had. Or its path is longer than
		// PATH_MAX, which Node cannot name (process.cwd fails, ERANGE),
		// nor the kernel's link: left out, as above.
		var err error
		if e.Cwd, _, err = procfs.CwdOf(strconv.Itoa(c.cmd.Process.Pid)); errors.Is(err, syscall.ENAMETOOLONG) {
			c.mu.Lock()
			c.cwd = ""
			c.mu.Unlock()
			unnamed = true
		}
	}
	if e.Cwd != "" {
		c.mu.Lock()
		c.cwd = e.Cwd
		c.mu.Unlock()
	}
	r := cell.resultFor(process.ExitedWith(e.Status))
	if e.Unreadable {
		// Only the driver and the cell know the nonce: the cell wrote an
		// end marker of its own, with no status the driver would write.
		r = process.Result{Reason: process.Failed, Error: fmt.Sprintf("the cell wrote an end marker of its own (%q where the driver writes _STATUS_)", e.StatusText)}
	}
	r.Cwd = e.Cwd
	if e.CwdTooLong {
		r.Error = sentinel.CwdTooLong
	} else if unnamed {
		r.Error = cwdUnnamed
	}
	cell.finish(r)
	close(cell.endsDone)
}

// openedWithin is how long a JavaScript driver has to open a cell it was
// sent before its worker is told.
const openedWithin = 200 * time.Millisecond

// markOpened records that the driver has opened the cell's streams.
func (cell *Cell) markOpened() {
	cell.mu.Lock()
	cell.opened = true
	cell.mu.Unlock()
	cell.stdin.Opened()
}

func (cell *Cell) wasOpened() bool {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	return cell.opened
}

// started records that the driver runs the cell: an interrupt that waited
// for it is delivered.
func (cell *Cell) started() {
	cell.mu.Lock()
	cell.isStarted = true
	pending := cell.pendingINT
	cell.pendingINT = false
	cell.mu.Unlock()
	if pending {
		cell.sendINT(0)
	}
}

func (cell *Cell) addTimer(t *time.Timer) {
	cell.mu.Lock()
	defer cell.mu.Unlock()
	if cell.st == process.Terminal {
		t.Stop()
		return
	}
	cell.timers = append(cell.timers, t)
}

// awaits records that the cell's JavaScript script has returned the promise
// of its top-level await, which the driver now awaits: an interrupt reaches
// it reliably from here on.
func (cell *Cell) awaits() {
	cell.mu.Lock()
	cell.awaiting = true
	cell.mu.Unlock()
}

// finish makes the cell terminal with r, once.
func (cell *Cell) finish(r process.Result) { cell.finishIf("", r) }

// finishIf makes the cell terminal with r if it is in state from (any state
// but terminal when from is empty), and reports whether it did.
func (cell *Cell) finishIf(from process.State, r process.Result) bool {
	return cell.settle(from, r, true)
}

// finishMeasured is finish for an r whose usage was measured already.
func (cell *Cell) finishMeasured(r process.Result) { cell.settle("", r, false) }

// settle is finishIf, measuring what the cell used into r when measure is set.
func (cell *Cell) settle(from process.State, r process.Result, measure bool) bool {
	cell.mu.Lock()
	if cell.st == process.Terminal || (from != "" && cell.st != from) {
		cell.mu.Unlock()
		return false
	}
	cell.st = process.Terminal
	if measure {
		r = cell.meter.Account(r, &cell.usage, false) // the engine's KILL ends the interpreter (Host.EndedIt)
	}
	cell.result = r
	// A cell that never started keeps no startedAt.
	cell.exitedAt = time.Now()
	for _, t := range cell.timers {
		t.Stop()
	}
	cell.timers = nil
	cell.mu.Unlock()
	cell.stdin.Close()
	cell.log.Close()
	close(cell.done)
	return true
}
