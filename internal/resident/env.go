package resident

import (
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/conchsh/conch/internal/proctree"
)

// Env returns the environment of a new interpreter: the daemon's, less
// CONCH_TOKEN, the names in drop and those env sets, then env, then extra
// ("NAME=value" entries such as the process tree's tag). env cannot
// override the daemon's instance mark (proctree.InstanceEnv), by which a
// later daemon finds what this one left, as an exec process's cannot.
func Env(env map[string]string, drop []string, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; (ok && k != proctree.InstanceEnv) || k == "CONCH_TOKEN" || slices.Contains(drop, k) {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		if k != proctree.InstanceEnv {
			out = append(out, k+"="+v)
		}
	}
	return append(out, extra...)
}

// PrivateBase is where sessions keep their private files (stream FIFOs, a
// driver and its socket): /dev/shm when it can, out of the way of commands
// that clean /tmp.
func PrivateBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && syscall.Access("/dev/shm", 2) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}
