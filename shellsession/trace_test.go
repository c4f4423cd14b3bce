package shellsession

import (
	"testing"
)

// TestBusyboxTraceToStdout pins what the README says of busybox sh under
// BASH_XTRACEFD=1 and set -x: the command's lines are traced into its
// stdout, the engine's lines into the shell's own (busybox traces a line
// that redirects its trace descriptor to the copy it saved of it), every
// command still ends with its own status, and after set +x the output is
// exact again. When busybox ran with its stdout closed, there was no copy
// to save, and the engine's lines were traced into the command's stdout.
func TestBusyboxTraceToStdout(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "busybox"})
	run(t, s, CommandOptions{Cmd: "BASH_XTRACEFD=1; set -x"})
	expectRun(t, s, "echo ok; (exit 3)", 3, "+ echo ok\nok\n+ exit 3\n")
	expectRun(t, s, "echo ok", 0, "+ echo ok\nok\n")
	run(t, s, CommandOptions{Cmd: "set +x"})
	expectRun(t, s, "echo ok", 0, "ok\n")
}
