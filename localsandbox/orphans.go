package localsandbox

import (
	"bytes"
	"os"
	"strconv"
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
	tag := []byte(SandboxEnv + "=" + s.id)
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if bytes.Equal(kv, tag) {
				proctree.Signal(pid, sig, true)
				break
			}
		}
	}
}
