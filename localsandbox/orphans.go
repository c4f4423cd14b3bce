package localsandbox

import (
	"syscall"

	"github.com/conchsh/conch/internal/proctree"
)

// SandboxEnv is the environment variable that carries a session's id into
// every command it starts, and from there into their descendants, so that
// Stop finds the ones that were reparented away from the trees it walks.
const SandboxEnv = "CONCH_SANDBOX"

// signalOrphans sends sig to every process whose environment carries the
// session's SandboxEnv, and to their descendants: the orphans a command left
// behind, also after the command itself has exited. It reads
// /proc/PID/environ, which is the environment a process started with, so a
// process that cleared its environment (env -i) is not found.
func (s *Session) signalOrphans(sig syscall.Signal) {
	for _, pid := range proctree.Holding(SandboxEnv + "=" + s.id) {
		proctree.Signal(pid, sig, true)
	}
}
