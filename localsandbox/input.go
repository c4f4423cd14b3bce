package localsandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/conchsh/conch/process"
)

// ErrExited is returned by WaitForInput when the command exited before it
// waited for input.
var ErrExited = errors.New("the command exited")

// WriteStdin writes all of b to the command's stdin, which Spawn opened
// with RunOptions.OpenStdin; otherwise it fails. Like a write to a pipe, it
// returns once the command could take the bytes: up to 1 MiB not read yet
// is queued, and past that it waits for the command to read. It fails when
// the command ends or its stdin is closed before it took them all, saying
// how many were queued (of which the command may not have read all). Writes from several goroutines at once are written one
// after the other, each whole.
func (p *Process) WriteStdin(b []byte) error {
	if err := p.spawned(); err != nil {
		return err
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	n, err := p.p.WriteStdinWait(p.stdinOpen, b)
	if err != nil && p.stdinOpen.Err() != nil {
		err = fmt.Errorf("%w: it was closed", process.ErrStdinNotOpen)
	}
	if n > 0 || err == nil {
		p.input.Written()
	}
	if err != nil && n > 0 {
		return fmt.Errorf("queued %d of %d bytes: %w", n, len(b), err)
	}
	return err
}

// CloseStdin closes the command's open stdin: it reads end-of-file.
func (p *Process) CloseStdin() error {
	if err := p.spawned(); err != nil {
		return err
	}
	if err := p.p.CloseStdin(); err != nil {
		return err
	}
	p.closeStdin() // a write waiting for room now fails: stdin takes no more
	p.input.Written()
	return nil
}

// WaitingForInput reports whether the command waits for input on its open
// stdin now: a process of it is blocked reading it, every other one is
// blocked on the command itself, and it has written nothing since. It is
// false for a command spawned without OpenStdin.
func (p *Process) WaitingForInput() bool { return p.spawned() == nil && p.input.Waiting() }

// WaitForInput blocks until the command waits for input and returns nil,
// or returns ErrExited when it exits first (at its exit, not once a job it
// left holding its output is done), or ctx.Err() when ctx ends first. A command spawned without OpenStdin never waits for input: for
// it, WaitForInput blocks until the command exits and returns ErrExited
// (or until ctx ends).
func (p *Process) WaitForInput(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := p.spawned(); err != nil {
		return err
	}
	for {
		changed := p.input.Changed()
		if p.input.Waiting() {
			return nil
		}
		select {
		case <-p.p.Exited(): // not Done: a job may hold its output long after
			return ErrExited
		default:
		}
		select {
		case <-changed:
		case <-p.p.Exited():
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
