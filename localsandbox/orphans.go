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

// terminate sends SIGTERM once to each process of procs still running, to
// their descendants and groups, to what carries their tags, and to what
// signalOrphans reaches, all in one delivery: a process reached through
// several of them, a command's child found in its tree and by its
// environment, gets it once. A second SIGTERM makes many programs give up
// their graceful shutdown. A tracked command is signalled by its pid too,
// since it may have replaced its environment (exec env -i ...).
func (s *Session) terminate(procs []*Process) {
	var pids []int
	for _, p := range procs {
		if p.exited() { // its pid may be another process's once reaped
			continue
		}
		pids = append(pids, p.p.Info().PID)
		pids = append(pids, proctree.Tagged(p.p.ID())...)
	}
	pids = append(pids, proctree.Holding(SandboxEnv+"="+s.id)...)
	proctree.SignalAll(pids, syscall.SIGTERM)
}
