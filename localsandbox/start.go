package localsandbox

import (
	"syscall"
	"time"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// started is what Run and Spawn use of a command started by package exec.
type started interface {
	Info() process.Info
	Log() *logstore.Log
	Done() <-chan struct{}
	Kill(sig syscall.Signal, escalateAfter time.Duration, escalateTo syscall.Signal) error
}

// startProcess starts command with Shell -c in dir, stdin closed, with env
// added to this process's environment. exec gives the process its own
// process group and a tag, so that its Kill reaches every descendant.
func startProcess(command, dir string, env map[string]string) (started, error) {
	return exec.Start(exec.Options{Cmd: command, Shell: Shell, Cwd: dir, Env: env})
}
