package inputwait

import (
	"io"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// startPTY starts argv on a new pseudo-terminal, as its controlling
// terminal, and returns it with its Input taken from the master side.
func startPTY(t *testing.T, argv ...string) *proc {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	copied := make(chan struct{})
	t.Cleanup(func() {
		master.Close()
		<-copied
	})
	fromSlave, err := InputOf(slave)
	if err != nil {
		t.Fatal(err)
	}
	in, err := InputOf(master)
	if err != nil {
		t.Fatal(err)
	}
	if !in.sameFile(fromSlave) {
		t.Fatalf("InputOf(master) = %+v, InputOf(slave) = %+v", in, fromSlave)
	}
	cmd := command(t, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	p := &proc{cmd: cmd, in: in}
	startCmd(t, cmd)
	slave.Close()
	// Drain what it prints, so that it never blocks writing; the copy ends
	// when the tree is gone or the master closed.
	go func() {
		defer close(copied)
		io.Copy(io.Discard, master)
	}()
	return p
}

var ttyReaders = []struct {
	name string
	argv []string
}{
	{"bash read", []string{"bash", "-c", "read x"}},
	{"dash read", []string{"dash", "-c", "read x"}},
	{"python3 input", []string{"python3", "-c", "input()"}},
	{"bash prompt with readline", []string{"bash", "--norc", "--noprofile", "-i"}},
	{"python3 repl", []string{"python3", "-i", "-q"}},
	{"zsh line editor", []string{"zsh", "-f", "-i"}},
	{"read of /dev/tty", []string{"sh", "-c", "exec </dev/null; read x </dev/tty"}},
	{"node stdin", []string{"node", "-e", `process.stdin.on("data", () => process.exit(0))`}},
}

// Each reader on a terminal is seen waiting for input.
func TestReadersOnPTY(t *testing.T) {
	t.Parallel()
	for _, tc := range ttyReaders {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seenWaiting(t, startPTY(t, tc.argv...))
		})
	}
}

// A sleeper on a terminal is not waiting for input.
func TestSleepOnPTYIsNotWaiting(t *testing.T) {
	t.Parallel()
	p := startPTY(t, "sleep", "30")
	settled(t, p, "sleep")
	notWaiting(t, p)
}
