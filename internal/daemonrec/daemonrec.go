// Package daemonrec tells whether the daemon a state directory records
// runs. Each running daemon keeps a record of its instance there
// (instances/ID.json), naming its process by its pid, when that process
// started, the boot and the pid namespace: a pid alone can name a zombie
// not yet reaped, or a later program the kernel gave it to. The daemon
// reads the records to find what dead instances left, and `conch serve`,
// the CLI and the Go client to tell a daemon that runs from one that is
// gone; all of them ask here, so that they agree.
package daemonrec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/conchsh/conch/internal/procfs"
	"github.com/conchsh/conch/internal/statefile"
)

// Dir is the directory of the state directory where each running daemon
// keeps the record of its instance.
const Dir = "instances"

// Process is a process as a record names it, in the record's JSON.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`    // of PID, in clock ticks after boot
	BootID    string `json:"bootId"`       // the boot PID was started in
	PIDNS     string `json:"pidNamespace"` // where PID means that process
}

// Self is this process, as a record names it.
func Self() Process {
	start, _ := procfs.StartTime(os.Getpid())
	return Process{PID: os.Getpid(), StartTime: start, BootID: BootID(), PIDNS: PIDNamespace()}
}

// Alive reports whether p runs: the same boot, and its pid held by the
// process that started then, not by a zombie or a later process.
func (p Process) Alive() bool {
	t, ok := procfs.StartTime(p.PID)
	return ok && t == p.StartTime && p.BootID == BootID()
}

// Unseen reports whether p is of another pid namespace of this boot: its
// pid names another process here, if any, and whether it runs cannot be
// told from here.
func (p Process) Unseen() bool {
	return p.PIDNS != PIDNamespace() && p.BootID == BootID()
}

// Running reports whether the daemon of pid, as the state directory's
// endpoint record names it, runs: its pid is that of a live instance
// recorded in stateDir, of this pid namespace.
func Running(stateDir string, pid int) bool {
	if pid <= 0 {
		return false
	}
	paths, _ := filepath.Glob(filepath.Join(stateDir, Dir, "*.json"))
	for _, path := range paths {
		var rec Process
		b, err := statefile.Read(path)
		if err != nil || json.Unmarshal(b, &rec) != nil {
			continue
		}
		if rec.PID == pid && rec.PIDNS == PIDNamespace() && rec.Alive() {
			return true
		}
	}
	return false
}

// BootID returns the kernel's id of the current boot, or "" when it cannot
// be read.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// PIDNamespace names this process's pid namespace, in which the pids it
// reads are meant; "" when it cannot be read.
func PIDNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}
