package localsandbox

import (
	"context"
	"syscall"
	"time"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/inputwait"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// started is what Run and Spawn use of a command started by package exec.
type started interface {
	ID() string
	Info() process.Info
	Log() *logstore.Log
	Done() <-chan struct{}
	Exited() <-chan struct{}
	Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error
	WriteStdinWait(ctx context.Context, p []byte) (int, error)
	CloseStdin() error
	InputTree() (pids []int, in inputwait.Input, ok bool)
}

// startProcess starts command with Shell -c in dir, stdin closed unless
// open, with env added to this process's environment. exec gives the
// process its own process group and a tag, so that its Kill reaches every
// descendant.
func startProcess(command, dir string, env map[string]string, open bool) (started, error) {
	stdin := process.StdinClosed
	if open {
		stdin = process.StdinOpen
	}
	return exec.Start(exec.Options{Cmd: command, Shell: Shell, Cwd: dir, Env: env, Stdin: stdin})
}
