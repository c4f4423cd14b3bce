package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/conchsh/conch/client"
	"github.com/conchsh/conch/process"
)

// detachKey (Ctrl-]) typed on an attached terminal detaches, leaving the
// process running.
const detachKey = 0x1d

func cmdAttach(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "attach", "ID", `Connects this terminal to a PTY process (conch start --pty): it replays what
the process wrote, then shows it live; what you type goes to it, Ctrl-C
included (it reaches the program as at its own terminal).

Ctrl-] detaches: conch exits 0 and the process goes on; attach again later.
It detaches even while input waits for a program that does not read it:
the input not yet sent is then dropped.
The terminal modes the program left on (its alternate screen, a hidden
cursor, mouse and focus reports, bracketed paste, application cursor keys)
are put back as conch leaves. A SIGHUP (the terminal closed), SIGINT, SIGQUIT
or SIGTERM sent to conch detaches the same way, puts the terminal back, then
ends conch by that signal (SIGQUIT: status 131).
When the process ends, conch exits with its status.`)
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	code, caught := attach(ctx, e, c, id)
	if caught == nil {
		return code
	}
	sig := *caught
	// The terminal is back as it was: the signal may end conch now.
	fmt.Fprintf(e.stderr, "conch: SIG%s: detached from %s, which runs on (conch attach %s)\n",
		process.SignalName(sig), id, id)
	return dieBy(sig)
}

// attach connects the terminal to the PTY process id until it ends, the
// user detaches, or conch gets one of detachSignals, which it returns: the
// terminal's modes and the ones the program left on are put back by then.
func attach(ctx context.Context, e *env, c *client.Client, id string) (code int, sig *syscall.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := c.Attach(ctx, id)
	if err != nil {
		return fail(e, exitOwn, err), nil
	}
	defer a.Close()

	detached := make(chan struct{})
	var out io.Writer = e.stdout
	if in, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		// A signal that would end conch in raw mode (kill, the terminal
		// closed: SIGHUP) left the shell after it with a terminal that
		// echoed nothing and took no line. It detaches instead, and
		// ends conch once the defers below have put the terminal back:
		// the defer that stops catching runs after them.
		got, stopSignals := onDetachSignal(a)
		defer stopSignals()
		// What is said of the end is said once the terminal is back: said
		// before, it went to the program's alternate screen, which the
		// shell's screen then replaced, and conch exited 125 unexplained.
		var late bytes.Buffer
		defer func() { _, _ = late.WriteTo(e.stderr) }()
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fail(e, exitOwn, err), nil
		}
		defer term.Restore(int(in.Fd()), state)
		// Raw mode: the terminal no longer turns "\n" into "\r\n".
		fmt.Fprintf(e.stderr, "conch: attached to %s; Ctrl-] detaches\r\n", id)
		stopResize := followWindowSize(ctx, a, e.stdout)
		defer stopResize()
		// The modes the program leaves on are put back before the
		// terminal's own state (the defer above).
		modes := newTermModes(e.stdout)
		defer modes.Restore()
		out = modes
		go func() {
			if copyUntilDetach(a, in) {
				close(detached)
				a.Close()
			}
		}()
		err = copyOutput(out, e.stderr, a)
		select {
		case s := <-got:
			return 0, &s
		default:
		}
		return finishAttach(ctx, &env{stdin: e.stdin, stdout: e.stdout, stderr: &late}, c, id, detached, err), nil
	}
	go func() { _, _ = io.Copy(a, e.stdin) }()
	err = copyOutput(out, e.stderr, a)
	return finishAttach(ctx, e, c, id, detached, err), nil
}

// finishAttach returns the status of an attachment whose output ended with
// err: 0 when the user detached, else the process's own.
func finishAttach(ctx context.Context, e *env, c *client.Client, id string, detached <-chan struct{}, err error) int {
	select {
	case <-detached:
		return 0
	default:
	}
	// A connection that ended, closed or reset (a daemon killed with input
	// of the attachment unread resets it), is asked about as an end.
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		return fail(e, exitOwn, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	r, _, err := c.Wait(wctx, id, 5*time.Second)
	switch {
	case err != nil:
		// The daemon went away with the attachment (killed, restarted):
		// nothing says how the program ended.
		fmt.Fprintf(e.stderr, "conch: the attachment to %s ended, and the daemon does not say how the program did:\n", id)
		return fail(e, exitOwn, err)
	case r == nil:
		return fail(e, exitOwn, fmt.Errorf("the attachment to %s ended while the program runs on (conch attach %s again)", id, id))
	}
	return exitCode(*r)
}

// detachSignals are the signals that detach an attached terminal rather
// than end conch in raw mode, as ssh leaves raw mode on them: SIGHUP (the
// terminal closed), SIGINT and SIGQUIT (sent with kill: raw mode passes
// Ctrl-C and Ctrl-\ to the program as bytes), SIGTERM.
var detachSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM}

// onDetachSignal closes a at the first of detachSignals conch gets (one it
// was started with ignored, as under nohup, stays ignored) and then sends
// that signal on got. stop stops catching them and waits for its goroutine.
func onDetachSignal(a *client.Attachment) (got <-chan syscall.Signal, stop func()) {
	var sigs []os.Signal
	for _, s := range detachSignals {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, sigs...)
	sent := make(chan syscall.Signal, 1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-caught:
			sent <- s.(syscall.Signal)
			a.Close()
		case <-quit:
		}
	}()
	return sent, func() {
		signal.Stop(caught)
		close(quit)
		<-done
	}
}

// dieBy ends conch by sig, as if it had not been caught, so that its
// parent sees what ended it. SIGQUIT, whose default in a Go program is a
// dump of its goroutines, ends it with status 128+3 instead.
func dieBy(s syscall.Signal) int {
	if s != syscall.SIGQUIT {
		signal.Reset(s)
		_ = syscall.Kill(os.Getpid(), s)
		time.Sleep(time.Second) // the signal ends conch meanwhile
	}
	return 128 + int(s)
}

// copyUntilDetach copies the terminal's input to a until the detach key
// (reporting true) or the end of input. The terminal is read on while a
// write waits (for a program that does not read its input, behind a full
// queue of the daemon's), so that a Ctrl-] typed then still detaches: what
// came before it and was not yet handed to a write is then dropped.
func copyUntilDetach(a io.Writer, in io.Reader) bool {
	q := newInputQueue()
	go q.send(a)
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		chunk := buf[:n]
		if i := bytes.IndexByte(chunk, detachKey); i >= 0 {
			q.detach(chunk[:i])
			return true
		}
		if !q.push(chunk, err != nil) {
			return false
		}
		if err != nil {
			return false
		}
	}
}

// inputQueue holds the terminal's input between its read and its write to
// the attachment. It grows with what is typed or pasted while a write
// waits: the terminal's input, which a user makes.
type inputQueue struct {
	mu      sync.Mutex
	changed *sync.Cond // on every change of the fields below
	pending []byte     // read, not yet handed to a write
	writing bool       // a write is under way
	ended   bool       // no more input: send returns once pending is empty
	failed  bool       // a write failed: the attachment has ended
	done    bool       // send has returned
}

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.changed = sync.NewCond(&q.mu)
	return q
}

// push queues b, and ends the input after it when last; false once a write
// has failed.
func (q *inputQueue) push(b []byte, last bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, b...)
	q.ended = last
	q.changed.Broadcast()
	return !q.failed
}

// detach ends the input with b. While a write is under way (it may wait
// for long), what waits behind it, b included, is dropped, and the write is
// left to the attachment's Close, which lets it finish while it moves.
// Otherwise the connection took all input so far: what is queued and b are
// written before detach returns, as they were before the detach key was
// read on while a write waited.
func (q *inputQueue) detach(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	if q.writing || q.failed {
		q.pending = nil
		q.changed.Broadcast()
		return
	}
	q.pending = append(q.pending, b...)
	q.changed.Broadcast()
	for !q.done {
		q.changed.Wait()
	}
}

// send writes what is queued to a, all of it at each write, until the
// input ends and all was written, or a write fails.
func (q *inputQueue) send(a io.Writer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer func() {
		q.done = true
		q.changed.Broadcast()
	}()
	for {
		for len(q.pending) == 0 && !q.ended {
			q.changed.Wait()
		}
		if len(q.pending) == 0 {
			return
		}
		b := q.pending
		q.pending, q.writing = nil, true
		q.mu.Unlock()
		_, err := a.Write(b)
		q.mu.Lock()
		q.writing = false
		if err != nil {
			q.failed = true
			return
		}
	}
}

// followWindowSize sends the terminal's size now and on every SIGWINCH.
func followWindowSize(ctx context.Context, a *client.Attachment, out io.Writer) (stop func()) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	send := func() {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			_ = a.Resize(ctx, uint16(w), uint16(h))
		}
	}
	send()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range winch {
			send()
		}
	}()
	return func() {
		signal.Stop(winch)
		close(winch)
		<-done
	}
}

// copyOutput copies the terminal's output to stdout until its end, saying
// on stderr where output was dropped before it could be read.
func copyOutput(stdout, stderr io.Writer, a *client.Attachment) error {
	for {
		_, err := io.Copy(stdout, a)
		var gap *client.GapError
		if !errors.As(err, &gap) {
			return err
		}
		fmt.Fprintf(stderr, "\r\nconch: %d bytes of output were dropped before they could be read\r\n", gap.Bytes)
	}
}
