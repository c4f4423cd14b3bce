package exec

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/creack/pty"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// startPTY starts p.cmd on a new pseudo-terminal of the given size, as the
// leader of a new session with the terminal as its controlling terminal, and
// returns the terminal's master side.
func (p *Process) startPTY(size process.TerminalSize) ([]output, error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	master, err := pollable(m)
	if err != nil {
		closeAll(tty)
		return nil, fmt.Errorf("open pty: %w", err)
	}
	if err := pty.Setsize(tty, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		closeAll(master, tty)
		return nil, fmt.Errorf("pty size: %w", err)
	}
	if c := p.cmd.SysProcAttr.Credential; c != nil {
		// Where the daemon may not (a user namespace that does not map
		// the tty group, say), the terminal stays the daemon's, as it
		// was: the program still has it on its descriptors.
		_ = giveTerminal(tty, c)
	}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	p.cmd.SysProcAttr.Setsid = true
	p.cmd.SysProcAttr.Setctty = true // Ctty 0: the child's stdin, the terminal
	err = p.cg.Start(p.cmd, proctree.Start)
	if err != nil {
		closeAll(master, tty)
		return nil, startFailed(err)
	}
	// The master reads EIO once every copy of the terminal's other side
	// is closed, which ends the copy of its output. A program that closes
	// its terminal and opens it again (exec >/dev/tty, a daemonizing
	// step, a program that reopens its controlling terminal by name)
	// would have what it wrote after lost: this process holds a copy
	// until the program exits (wait closes it), as a terminal emulator
	// holds the terminal for its shell.
	p.tty = tty
	p.pty = master
	p.feed = newFeeder(master, nil)
	return []output{{r: master, ch: logstore.PTY}}, nil
}

// giveTerminal makes tty the user's, as login does: owned by c's uid, in
// group tty where there is one (else c's group), mode 0620. A program run
// as another user otherwise gets a terminal it cannot open again by its
// name (stty -F $(tty), exec 3<>$(tty)), which its own descriptors reach.
func giveTerminal(tty *os.File, c *syscall.Credential) error {
	gid, mode := int(c.Gid), uint32(0o600)
	if g, err := ttyGroup(); err == nil {
		gid, mode = g, 0o620
	}
	if err := tty.Chown(int(c.Uid), gid); err != nil {
		return err
	}
	return tty.Chmod(os.FileMode(mode))
}

// ttyGroup is the gid of the group tty, looked up once.
var ttyGroup = sync.OnceValues(func() (int, error) {
	g, err := user.LookupGroup("tty")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
})

// pollable returns f as a non-blocking file in Go's poller, and closes f.
// creack/pty hands the master out after calling its Fd method, which leaves
// it blocking: a read of it could then not be cut off by a deadline, and a
// child that keeps the terminal open would hold the drain forever.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	cerr := rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
	if err = errors.Join(cerr, err); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setSize sets the terminal size through f without making it blocking
// (which pty.Setsize would, through f.Fd).
func setSize(f *os.File, size process.TerminalSize) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ws := &unix.Winsize{Col: size.Cols, Row: size.Rows}
	cerr := rc.Control(func(fd uintptr) { err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) })
	return errors.Join(cerr, err)
}

// readSizeLocked takes the terminal's size as it is now into the process's
// Info: the program may have changed it (stty cols 132), which the size
// asked for at the start or by Resize no longer says. p.mu must be held.
func (p *Process) readSizeLocked() {
	rc, err := p.pty.SyscallConn()
	if err != nil {
		return
	}
	var ws *unix.Winsize
	_ = rc.Control(func(fd uintptr) { ws, err = unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ) })
	if err != nil || ws == nil {
		return
	}
	if t := p.info.Terminal; t == nil || t.Cols != ws.Col || t.Rows != ws.Row {
		p.info.Terminal = &process.TerminalSize{Cols: ws.Col, Rows: ws.Row} // a new value, as Resize's
	}
}

// Resize changes a PTY process's terminal size, which sends SIGWINCH to its
// foreground process group. ErrNotPTY for an exec process; ErrUnsupported
// once the process has ended.
func (p *Process) Resize(size process.TerminalSize) error {
	if p.pty == nil {
		return process.ErrNotPTY
	}
	if size.Cols == 0 || size.Rows == 0 {
		return fmt.Errorf("%w: terminal size %dx%d: cols and rows must be positive", process.ErrInvalidArgument, size.Cols, size.Rows)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return fmt.Errorf("%w: the process has ended", process.ErrUnsupported)
	}
	if err := setSize(p.pty, size); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	p.info.Terminal = &size // a new value: snapshots handed out keep theirs
	return nil
}
