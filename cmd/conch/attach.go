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
It does so too as a terminal sends it once the program turned on the kitty
keyboard protocol or xterm's modifyOtherKeys (an escape sequence); such a
sequence that comes in two reads of the terminal is held back for the
second up to 50 ms, and sent as it is when that does not finish it (so an
Esc key reaches the program up to 50 ms late). When the program turned on
the kitty protocol's report of keys let go, conch reads the release of the
Ctrl-] that detached (1 s at most) before it puts the terminal back, so
that neither the shell after it nor the program of the next attach gets
it; what is typed meanwhile is dropped. What was typed before the Ctrl-] is sent first; when none of it goes
through for 2 s (a program that does not read its input), conch detaches
and drops what is left. While 1 MiB of input waits for such a program,
conch reads no more of the terminal, as a pipe holds back its writer: a
Ctrl-] typed behind it is read in its turn, once the program reads (a
signal, below, still detaches).
The terminal modes the program left on (its alternate screen, a hidden
cursor, mouse and focus reports, bracketed paste, application cursor keys
and keypad, reverse video, autowrap off, a scroll region, the kitty keyboard
protocol, modifyOtherKeys, colors and attributes, a line-drawing character
set) are put back as conch leaves. A SIGHUP (the terminal closed), SIGINT, SIGQUIT
or SIGTERM sent to conch detaches the same way, puts the terminal back, then
ends conch by that signal (SIGQUIT: status 131).
When the process ends, conch exits with its status; when that is conch's
own (124: its execution timeout stopped it; 125: the engine lost it),
conch says why on stderr, as conch wait does. The daemon pings the
attachment every 15 s: when nothing comes from it for 45 s, not even a
ping (it is frozen, as by SIGSTOP, or gone behind a network that holds the
connection), conch says the daemon stopped answering, puts the terminal
back and exits 125.`)
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
			var d detachScan
			var after []byte
			if copyInput(a, in, keyHold, &d, &after) {
				if d.kitty && modes.kittyEvents.Load() {
					// The key's release comes after it: read it
					// before the flags are put back (see awaitRelease),
					// but for releaseWait at most.
					released := make(chan struct{})
					go func() {
						defer close(released)
						awaitRelease(in, after)
					}()
					wait := time.NewTimer(releaseWait)
					select {
					case <-released:
					case <-wait.C:
					}
					wait.Stop()
				}
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
// err: 0 when the user detached, else the process's own, saying on stderr
// why when it is conch's (a timeout, a program lost), as conch wait does.
func finishAttach(ctx context.Context, e *env, c *client.Client, id string, detached <-chan struct{}, err error) int {
	select {
	case <-detached:
		return 0
	default:
	}
	// A daemon that sent nothing, not even a ping, for three of its
	// heartbeats is frozen (SIGSTOP) or gone behind a network that holds
	// the connection: asking it how the program ended would wait as long.
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		fmt.Fprintf(e.stderr, "conch: the daemon stopped answering the attachment to %s, which may run on (conch attach %s again):\n", id, id)
		return fail(e, exitOwn, err)
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
	return finish(e, id, *r)
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
// (reporting true), as byte or sequence (see detachScan), or the end of
// input. The terminal is read on while a
// write waits (for a program that does not read its input, behind a full
// queue of the daemon's), so that a Ctrl-] typed then still detaches, but
// only until maxQueuedInput bytes wait: then it is read as writes take
// them, as a pipe holds back its writer, and a Ctrl-] behind them waits
// its turn. What came before the Ctrl-] is sent first (see detach).
func copyUntilDetach(a io.Writer, in io.Reader) bool {
	return copyInput(a, in, keyHold, new(detachScan), nil)
}

// keyHold is how long a sequence that may yet be the detach key's (see
// detachScan.mayDetach), cut by the end of a read of the terminal that did
// not fill the buffer, is held back for the next read to tell: a terminal
// under load, or behind a network, can send a key's sequence in two
// pieces. When the next read comes first, the two are read together, and
// the sequence is sent only if it is not the detach key; else it is sent
// as it is then, so that an Esc key, which is a lone ESC, reaches the
// program that late at most.
const keyHold = 50 * time.Millisecond

// copyInput is copyUntilDetach, holding a cut sequence back for hold, with
// d telling how it detached, and after (when not nil) set to what the read
// that held the detach key held after it.
func copyInput(a io.Writer, in io.Reader, hold time.Duration, d *detachScan, after *[]byte) bool {
	q := newInputQueue()
	go q.send(a)
	buf := make([]byte, 4096)
	// mu orders the pushes of a held sequence, which a timer makes, with
	// the reads' own.
	var mu sync.Mutex
	var held []byte // a sequence begun at the end of a read
	gen := 0        // counts holds: a timer sends only its own
	var timer *time.Timer
	for {
		n, err := in.Read(buf)
		mu.Lock()
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		chunk := buf[:n]
		if held != nil {
			chunk, held = append(held, chunk...), nil
		}
		if i, ok := d.scan(chunk); ok {
			mu.Unlock()
			if after != nil {
				*after = bytes.Clone(chunk[d.end:])
			}
			q.detach(chunk[:i])
			return true
		}
		// A read that filled buf has more behind it: a sequence it cuts
		// is held back and read again whole with the next, so that a
		// Ctrl-] in it sends none of it. A sequence a shorter read cuts
		// that may be the detach key's is held so too, but for hold at
		// most (see keyHold).
		if k := d.pending(); k > 0 && err == nil && (n == len(buf) || d.mayDetach()) {
			held = bytes.Clone(chunk[len(chunk)-k:])
			chunk = chunk[:len(chunk)-k]
			d.reset()
			if n < len(buf) {
				gen++
				mine := gen
				timer = time.AfterFunc(hold, func() {
					mu.Lock()
					defer mu.Unlock()
					if mine == gen && held != nil {
						q.push(held, false)
						held = nil
					}
				})
			}
		}
		if !q.push(chunk, err != nil) || err != nil {
			if timer != nil {
				timer.Stop() // the held sequence goes nowhere now
			}
			mu.Unlock()
			return false
		}
		mu.Unlock()
	}
}

// releaseWait bounds how long a detach by the kitty keyboard protocol's
// Ctrl-], under its flag that reports keys let go, waits for that report
// (see awaitRelease): a key held longer is let go after conch put the
// terminal back, and the terminal reports nothing of it then.
const releaseWait = time.Second

// maxQueuedInput bounds the terminal's input conch holds while a write
// waits: a paste into a program that does not read it would otherwise
// grow conch's memory with the paste.
const maxQueuedInput = 1 << 20

// maxWrite bounds one write to the attachment, so that detach sees the
// input move in steps, not only at the end of a megabyte.
const maxWrite = 32 << 10

// detachStall is how long detach waits for a write of the input typed
// before the detach key to go through before it gives up on it: the
// program may never read it. The attachment's Close then lets the write
// under way finish while it moves.
const detachStall = 2 * time.Second

// inputQueue holds the terminal's input between its read and its write to
// the attachment, maxQueuedInput bytes at most (push waits beyond).
type inputQueue struct {
	mu      sync.Mutex
	changed *sync.Cond // on every change of the fields below
	pending []byte     // read, not yet handed to a write
	writes  int        // writes that went through
	ended   bool       // no more input: send returns once pending is empty
	failed  bool       // a write failed: the attachment has ended
	done    bool       // send has returned
}

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.changed = sync.NewCond(&q.mu)
	return q
}

// push queues b, and ends the input after it when last; it waits while
// maxQueuedInput bytes or more are queued. false once a write has failed.
func (q *inputQueue) push(b []byte, last bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) >= maxQueuedInput && !q.failed {
		q.changed.Wait()
	}
	q.pending = append(q.pending, b...)
	q.ended = last
	q.changed.Broadcast()
	return !q.failed
}

// detach ends the input with b and waits until what was queued, b last, is
// written, the same whether a write is under way or not. When no write
// goes through for detachStall (a program that does not read its input),
// what is still queued is dropped and detach returns: the write under way
// is left to the attachment's Close.
func (q *inputQueue) detach(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	q.pending = append(q.pending, b...)
	q.changed.Broadcast()
	// Wakes the wait below when the time is up; every write that goes
	// through wakes it too.
	wake := time.AfterFunc(detachStall, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.changed.Broadcast()
	})
	defer wake.Stop()
	writes, since := q.writes, time.Now()
	for !q.done {
		if q.writes != writes {
			writes, since = q.writes, time.Now()
			wake.Reset(detachStall)
		} else if time.Since(since) >= detachStall {
			q.pending = nil
			return
		}
		q.changed.Wait()
	}
}

// send writes what is queued to a, maxWrite bytes at a time, until the
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
		n := min(len(q.pending), maxWrite)
		b := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.changed.Broadcast() // room for push
		q.mu.Unlock()
		_, err := a.Write(b)
		q.mu.Lock()
		q.writes++
		q.changed.Broadcast()
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
