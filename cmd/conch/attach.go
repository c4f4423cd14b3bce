package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/conchsh/conch/client"
)

// detachKey (Ctrl-]) typed on an attached terminal detaches, leaving the
// process running.
const detachKey = 0x1d

func cmdAttach(ctx context.Context, e *env, args []string) int {
	fs := flags(e, "attach", "ID", `Connects this terminal to a PTY process (conch start --pty): it replays what
the process wrote, then shows it live; what you type goes to it, Ctrl-C
included (it reaches the program as at its own terminal).

Ctrl-] detaches: conch exits 0 and the process goes on; attach again later.
The terminal modes the program left on (its alternate screen, a hidden
cursor, mouse and focus reports, bracketed paste, application cursor keys)
are put back as conch leaves.
When the process ends, conch exits with its status.`)
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	c, err := dial()
	if err != nil {
		return fail(e, exitOwn, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := c.Attach(ctx, id)
	if err != nil {
		return fail(e, exitOwn, err)
	}
	defer a.Close()

	detached := make(chan struct{})
	var out io.Writer = e.stdout
	if in, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fail(e, exitOwn, err)
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
	} else {
		go func() { _, _ = io.Copy(a, e.stdin) }()
	}

	err = copyOutput(out, e.stderr, a)
	select {
	case <-detached:
		return 0
	default:
	}
	if err != nil && !errors.Is(err, io.EOF) {
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

// copyUntilDetach copies the terminal's input to a until the detach key
// (reporting true) or the end of input.
func copyUntilDetach(a *client.Attachment, in io.Reader) bool {
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		chunk := buf[:n]
		if i := bytes.IndexByte(chunk, detachKey); i >= 0 {
			_, _ = a.Write(chunk[:i])
			return true
		}
		if n > 0 {
			if _, werr := a.Write(chunk); werr != nil {
				return false
			}
		}
		if err != nil {
			return false
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
