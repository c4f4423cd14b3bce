package codecontext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/containment"
	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/resident"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// ErrContextEnded is returned by Submit once the context's interpreter has
// ended, and is the error of cells queued behind its end. It matches
// process.ErrUnsupported too; use errors.Is.
var ErrContextEnded error = contextEnded{}

type contextEnded struct{}

func (contextEnded) Error() string        { return "code context ended" }
func (contextEnded) Is(target error) bool { return target == process.ErrUnsupported }

// Options configure a new Context. Zero values mean the defaults.
type Options struct {
	// ID is the context's id; empty means a new random one.
	ID string
	// Name is a label for listings.
	Name string
	// Language is the context's language; see ParseLanguage.
	Language Language
	// Cwd is the interpreter's first working directory; empty means the daemon's.
	Cwd string
	// Env is added to the daemon's environment; PWD is Cwd unless Env
	// sets it. The daemon's instance mark (CONCH_DAEMON) is not Env's to
	// change. A name that is empty or holds '=' or NUL, or a value that
	// holds NUL, is refused with an error wrapping
	// process.ErrInvalidArgument.
	Env map[string]string
	// Retention bounds each cell's retained output in bytes; zero means
	// logstore.DefaultRetention.
	Retention int
	// Ports are loopback ports leased for the context, reported in Info.
	Ports []int
	// StopGrace is how long a cell has to stop after an interrupt (kill
	// INT, or its execution timeout) before the context's interpreter is
	// killed; zero means process.StopGrace.
	StopGrace time.Duration
	// ReadyWithin bounds how long the interpreter has to become ready
	// before the start is refused and the interpreter's tree killed; zero
	// means process.ReadyWithin.
	ReadyWithin time.Duration
	// Dir is where the context makes its private directory (the driver,
	// its socket, the cells' FIFOs); empty means /dev/shm when writable,
	// else the temp directory. A daemon gives its instance's directory, so
	// that what a killed daemon left is removed with it. A missing one is
	// made. What is found there is used as shellsession.Options.StreamDir
	// says: anything another user could change (their directory, a
	// symbolic link, a file) is left as it is, and a directory made beside
	// it serves in its place.
	Dir string
	// Containment is where the context gets a cgroup of its own, entered
	// as the interpreter starts, which everything it starts stays in and ends with
	// it; nil contains nothing (processes that leave the tree are found by
	// tags only).
	Containment *containment.Root
	// Limits bound the context's cgroup, its zero fields taken from the
	// Containment's defaults; a limit the host cannot apply is refused with
	// an error wrapping containment.ErrUnsupported.
	Limits containment.Limits

	// startRead, when a test sets it, is called as the engine reads the
	// driver's word that a cell started, before it marks the cell so.
	startRead func()
}

// Context is one long-lived interpreter and its serial queue of cells. It
// implements process.Process: it is the process of its interpreter.
type Context struct {
	id     string
	opts   Options
	interp interpreter
	h      *resident.Host
	cmd    *exec.Cmd       // the interpreter, once started
	exited <-chan struct{} // closed once the interpreter has exited and been reaped
	dir    *resident.Dir   // private: the driver, its socket, the cells' FIFOs
	conn   net.Conn
	connIn uint64 // conn's socket inode, for the input watcher
	intr   interruptor
	wg     sync.WaitGroup // the goroutines of cells and the control reader

	writeMu sync.Mutex // serializes writes to conn
	sigMu   sync.Mutex // held while a cell is sent, and while one is interrupted

	mu      sync.Mutex // guards the fields below
	cwd     string
	seq     int
	cells   []*Cell
	running *Cell
	deafWhy string // why the engine killed an interpreter whose driver was deaf (see controlEnded)
}

// New starts a context's interpreter and returns once its driver is ready
// for a cell, or ctx is done.
func New(ctx context.Context, opts Options) (*Context, error) {
	lang, err := ParseLanguage(string(opts.Language))
	if err != nil {
		return nil, err
	}
	in, err := findInterpreter(lang)
	if err != nil {
		return nil, err
	}
	// As for a shell session: a name holding '=' would set another
	// variable ("PATH=/x" sets PATH, "CONCH_DAEMON=x" the instance mark),
	// and a NUL would fail the start with an error that says nothing of env.
	if err := process.CheckEnv(opts.Env); err != nil {
		return nil, err
	}
	// The id tags the interpreter's environment (CONCH_TREE), which
	// cannot hold NUL either.
	if err := process.CheckArg("id", opts.ID); err != nil {
		return nil, err
	}
	if opts.Cwd != "" {
		if !filepath.IsAbs(opts.Cwd) {
			return nil, fmt.Errorf("%w: cwd %s is not an absolute path", process.ErrInvalidArgument, api.Quote(opts.Cwd))
		}
		if fi, err := os.Stat(opts.Cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: cwd %s is not a directory", process.ErrInvalidArgument, api.Quote(opts.Cwd))
		}
	}
	opts.Language = lang
	opts.StopGrace = process.OrDefault(opts.StopGrace, process.StopGrace)
	opts.ReadyWithin = process.OrDefault(opts.ReadyWithin, process.ReadyWithin)
	id := opts.ID
	if id == "" {
		id = process.NewID()
	}
	base := opts.Dir
	if base == "" {
		base = resident.PrivateBase()
	}
	dir, err := resident.NewDir(base, "conch-code-")
	if err != nil {
		return nil, fmt.Errorf("make context directory: %w", err)
	}
	cwd := opts.Cwd
	if cwd == "" { // the interpreter starts in the daemon's, as a shell session's does
		cwd, _ = os.Getwd()
	}
	c := &Context{id: id, opts: opts, interp: in, dir: dir, cwd: cwd}
	c.h = resident.New(resident.Config{
		ID: id, Name: opts.Name, Noun: "context", Ended: ErrContextEnded,
		Containment: opts.Containment, Limits: opts.Limits,
		Ports: opts.Ports, StopGrace: opts.StopGrace,
		Interrupt: c.interrupt, Describe: c.describe, Exited: c.exitedBetweenCells,
		Release: func() {
			if c.conn != nil {
				c.conn.Close()
			}
			c.intr.close()
		},
	})
	c.exited = c.h.Exited()
	c.nameInterrupted(0) // no cell; its files made while there is room
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.h.Ready()
	return c, nil
}

// start writes the driver, starts the interpreter and waits for the driver
// to connect to the context's socket.
func (c *Context) start(ctx context.Context) error {
	dir := c.dir.Path()
	driver := filepath.Join(dir, c.interp.driverName)
	if err := os.WriteFile(driver, c.interp.driver, 0o600); err != nil {
		return fmt.Errorf("write driver: %w", err)
	}
	sock := filepath.Join(dir, "ctl")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen for the driver: %w", err)
	}
	args := append(append([]string{c.interp.path}, c.interp.flags...), driver, sock)
	var drop, extra []string
	if _, ok := c.opts.Env["PWD"]; !ok && c.opts.Cwd != "" {
		// The daemon's PWD names the daemon's directory, which Node's
		// process.env and Python's os.environ would give a cell as the
		// interpreter's own.
		pwd, err := process.RunDir(c.opts.Cwd)
		if err != nil {
			pwd = filepath.Clean(c.opts.Cwd) // checked as the context was made; gone since
		}
		drop, extra = []string{"PWD"}, []string{"PWD=" + pwd}
	}
	cmd := &exec.Cmd{
		Path: c.interp.path, Args: args, Dir: c.opts.Cwd,
		Env: resident.Env(c.opts.Env, drop, append(extra, proctree.Tag(c.id))...),
	}
	c.opts.Env = nil // the interpreter has it now (see resident.Host.Start)
	if err := c.h.Start(cmd); err != nil {
		ln.Close()
		return err
	}
	c.cmd = cmd
	bounded, cancel := context.WithTimeout(ctx, c.opts.ReadyWithin)
	conn, err := accept(bounded, ln, c.exited)
	cancel()
	if err != nil {
		ln.Close()
		return c.notReady(ctx, err)
	}
	c.conn = conn
	c.connIn, _ = inputwait.SocketInode(conn.(*net.UnixConn))
	if c.opts.Language == JavaScript && c.intr.listen(ln) {
		c.wg.Add(1)
		go c.acceptInterruptor()
	} else {
		ln.Close()
	}
	c.wg.Add(1)
	go c.readControl()
	return nil
}

// errExited is accept's error for an interpreter that exited first.
var errExited = errors.New("the interpreter exited before it was ready")

// notReady says why the interpreter did not become ready (accept's err).
// Its cause is what the context was asked to start — its environment,
// its limits — not the daemon: invalid_argument, but for the caller's
// own ctx ending.
func (c *Context) notReady(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("start %s: %w (it said: %q)", c.interp.path, ctx.Err(), c.h.Diag().Tail())
	}
	if c.h.OOMKilled() { // the limit asked for is the fault, not the daemon
		return fmt.Errorf("%w: the OOM killer ended %s before it was ready: memoryBytes %d is too little for it",
			process.ErrInvalidArgument, c.interp.path, c.opts.Limits.MemoryBytes)
	}
	how := err.Error()
	switch {
	case errors.Is(err, errExited):
		how = c.h.StartEnded(ctx) // what it said, all of it, once its output ends
	case errors.Is(err, context.DeadlineExceeded):
		// One that cannot start its threads (a pids limit of a few)
		// waits on a futex for ever, neither exiting nor connecting.
		how = resident.NotReady(c.opts.ReadyWithin)
		if l := c.opts.Limits; l.Pids > 0 {
			how += fmt.Sprintf(" (a pids limit of %d may leave it no room to start its threads)", l.Pids)
		}
	default:
		return fmt.Errorf("start %s: %w (it said: %q)", c.interp.path, err, c.h.Diag().Tail())
	}
	return fmt.Errorf("%w: start %s: the interpreter %s; it said: %q", process.ErrInvalidArgument, c.interp.path, how, c.h.Diag().Tail())
}

// accept waits for the driver's connection, the interpreter's end, or ctx.
func accept(ctx context.Context, ln *net.UnixListener, exited <-chan struct{}) (net.Conn, error) {
	for {
		ln.SetDeadline(time.Now().Add(50 * time.Millisecond))
		conn, err := ln.Accept()
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			return nil, errExited
		default:
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return nil, err
		}
	}
}

// cellMessage is what the driver is sent for a cell.
type cellMessage struct {
	ID     int    `json:"id"`
	Code   string `json:"code"`
	Nonce  string `json:"nonce"`
	Stdin  string `json:"stdin"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func (c *Context) send(m cellMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err = c.conn.Write(append(b, '\n'))
	return err
}

// interruptEarly tells a JavaScript driver that cell seq, which it was sent
// (or is about to be) and has not started, is interrupted (see driver.js).
func (c *Context) interruptEarly(seq int) error {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.conn.Write([]byte(`{"interrupt":` + strconv.Itoa(seq) + "}\n"))
	return err
}

// CellOptions describe a cell submitted to a context.
type CellOptions struct {
	// Code is the cell's text.
	Code string
	// Name is a label for listings.
	Name string
	// Stdin is closed (the default: reads get end-of-file) or open (bytes
	// come from WriteStdin until CloseStdin).
	Stdin process.Stdin
	// ExecutionTimeout, when positive, bounds the cell from its submission:
	// a cell still queued then ends timed_out without running, a running
	// one is interrupted, and its context ended if it has not stopped
	// Options.StopGrace later.
	ExecutionTimeout time.Duration
	// KeepLogs is the cell's log policy.
	KeepLogs logstore.KeepLogs
	// HoldLogs starts the cell's log held (logstore.Options.Held): the
	// caller calls Log().Release once it has read what it waited for.
	HoldLogs bool
}

// Submit queues a cell and returns at once. After the context has ended it
// returns an error wrapping ErrContextEnded.
func (c *Context) Submit(opts CellOptions) (*Cell, error) {
	switch opts.Stdin {
	case "", process.StdinClosed, process.StdinOpen:
	default:
		return nil, fmt.Errorf("%w: stdin %s: want closed or open", process.ErrInvalidArgument, api.Quote(string(opts.Stdin)))
	}
	if opts.ExecutionTimeout < 0 { // as exec and shellsession refuse it
		return nil, fmt.Errorf("%w: negative executionTimeout", process.ErrInvalidArgument)
	}
	if c.h.Ended() {
		return nil, c.h.ErrEnded()
	}
	c.mu.Lock()
	c.seq++
	cell := newCell(c, c.seq, opts)
	c.cells = append(c.cells, cell)
	c.mu.Unlock()
	if err := c.h.Queue.Push(cell); err != nil {
		cell.Cancel(ErrContextEnded)
		return nil, c.h.ErrEnded()
	}
	return cell, nil
}

// Run submits a cell and waits for it to end or ctx to be done. A cell
// that fails is not an error: its Result says how it ended.
func (c *Context) Run(ctx context.Context, opts CellOptions) (*Cell, process.Result, error) {
	cell, err := c.Submit(opts)
	if err != nil {
		return nil, process.Result{}, err
	}
	r, err := process.Wait(ctx, cell)
	return cell, r, err
}

// Cells returns the context's cells in submission order.
func (c *Context) Cells() []*Cell {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Cell(nil), c.cells...)
}

// Cwd returns the interpreter's working directory after its last cell.
func (c *Context) Cwd() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cwd
}

// Language returns the context's language.
func (c *Context) Language() Language { return c.opts.Language }

// ID returns the context's id.
func (c *Context) ID() string { return c.id }

// Log returns the context's own log, which stays empty.
func (c *Context) Log() *logstore.Log { return c.h.Log() }

// Done is closed once the context has ended.
func (c *Context) Done() <-chan struct{} { return c.h.Done() }

// Info describes the context as the process of its interpreter.
func (c *Context) Info() process.Info { return c.h.Info() }

func (c *Context) describe(i *process.Info) {
	i.Language = string(c.opts.Language)
	i.Cwd = c.Cwd()
}

// Kill with SIGINT interrupts the running cell; any other signal ends the
// context: its interpreter and every process under it.
func (c *Context) Kill(sig syscall.Signal, after time.Duration, to syscall.Signal) error {
	return c.h.Kill(sig, after, to)
}

func (c *Context) interrupt() error {
	if cell := c.runningCell(); cell != nil {
		return cell.Kill(syscall.SIGINT, 0, 0)
	}
	return nil
}

// WriteStdin fails: a context's own stdin belongs to the engine.
func (c *Context) WriteStdin(p []byte) error { return c.h.WriteStdin(p) }

// CloseStdin fails: a context's own stdin belongs to the engine.
func (c *Context) CloseStdin() error { return c.h.CloseStdin() }

// Resize fails: contexts have no terminal.
func (c *Context) Resize(size process.TerminalSize) error { return c.h.Resize(size) }

// Stop ends the context like Close.
func (c *Context) Stop(context.Context) error { return c.Close() }

// Close ends the interpreter and every process started under it, and waits
// for the context's goroutines. Queued cells fail with ErrContextEnded. It is
// idempotent.
func (c *Context) Close() error {
	c.teardown()
	// What outlived a kill that ended the context before goes now, rather
	// than at its escalation.
	c.h.KillLeft()
	return nil
}

// teardown ends the context, waits for its goroutines and removes its
// directory. A context that ended by itself tears down at once, on a
// goroutine of its own (it waits for the context's goroutines): its
// directory, the driver and its files in the daemon's stream directory in
// memory, was held until its record was deleted, however long after, or
// for good once the record was forgotten.
func (c *Context) teardown() {
	c.h.Close()
	c.wg.Wait()
	c.dir.Remove()
}
