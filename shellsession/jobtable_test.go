package shellsession

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFinishedJobsLeaveTable: dash and busybox sh free a finished
// background job only when they report it, which without job control (the
// engine runs shells with set +m) only jobs does: every command's job
// stayed in the table, numbered on, dash's unreaped, and busybox's kill %1
// named a job long finished. The frame has them report, quietly, once the
// session has started a job; on every shell, finished jobs are gone by the
// next command, as at a terminal, and a new job takes the freed number.
func TestFinishedJobsLeaveTable(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newSession(t, Options{Shell: shell, Cwd: dir})
			const jobs = 20
			for i := range jobs {
				expectRun(t, s, "{ touch done"+strconv.Itoa(i)+"; } & echo $! >>pids", 0, "")
			}
			awaitReaped(t, s, "pids")
			r, out, errOut := run(t, s, CommandOptions{Cmd: "jobs"})
			require.Equal(t, 0, code(r), errOut)
			require.Empty(t, out, "finished jobs listed")

			if shell == "dash" || shell == "zsh" {
				return // their %1 is documented apart (README, shell matrix)
			}
			expectRun(t, s, "sleep 0.01 & echo $! >pids", 0, "")
			awaitReaped(t, s, "pids")
			expectRun(t, s, "sleep 100 & echo $! >pid", 0, "")
			// KILL: busybox's and mksh's background child takes TERM
			// with the shell's trap handler until it has reset its
			// traps, and drops it (TestSignalBeforeJobRuns); on a
			// loaded machine a TERM came before that and was lost, and
			// wait %1 waited for sleep 100.
			expectRun(t, s, "kill -s KILL %1; wait %1; :", 0, "")
			_, out, _ = run(t, s, CommandOptions{Cmd: "kill $(cat pid) 2>/dev/null; echo $?"})
			require.Equal(t, "1", strings.TrimSpace(out), "sleep 100 outlived kill %1")
		})
	}
}

// TestJobsFunctionTakesNoFrame: a function named jobs changes nothing the
// engine does. dash's and busybox's frames report finished jobs before each
// command once the session started one; called as \jobs, the user's
// function ran there instead: finished jobs were never freed, and one that
// exits ended the session at the next command, though the user never
// called jobs. Called as \command \jobs, a function named command that
// fails (dash and busybox let one take the name) left them unfreed too:
// the frame falls back to \jobs, as it does for printf.
func TestJobsFunctionTakesNoFrame(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newSession(t, Options{Shell: shell, Cwd: dir})
			expectRun(t, s, `jobs() { echo ran >>"$PWD/called"; }`, 0, "")
			finishJobs(t, s, "jobs")
			// The builtin's own list, the function gone: the frame
			// freed the finished jobs.
			expectRun(t, s, "unset -f jobs; jobs", 0, "")
			_, err := os.Stat(filepath.Join(dir, "called"))
			require.ErrorIs(t, err, os.ErrNotExist, "the frame ran the user's function")

			expectRun(t, s, "jobs() { exit 3; }", 0, "")
			for range 2 {
				expectRun(t, s, "echo after", 0, "after\n")
			}
		})
		t.Run(shell+"/command", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newSession(t, Options{Shell: shell, Cwd: dir})
			expectRun(t, s, "command() { return 1; }", 0, "")
			finishJobs(t, s, "command")
			expectRun(t, s, "jobs", 0, "")

			// The documented limit: with a function named jobs as well,
			// the fallback runs it, in dash's and busybox's frames.
			expectRun(t, s, `jobs() { echo ran >>"$PWD/called"; }`, 0, "")
			expectRun(t, s, "echo after", 0, "after\n")
			_, err := os.Stat(filepath.Join(dir, "called"))
			if reportsJobs(s.sh) {
				require.NoError(t, err, "the frame's fallback ran no jobs function")
			} else {
				require.ErrorIs(t, err, os.ErrNotExist, "the frame ran the user's function")
			}
		})
	}
}

// finishJobs starts three jobs in s, each a command of its own, and waits
// until each is done and its end seen by the shell; the files they touch,
// and the one that lists their pids, are named after prefix.
func finishJobs(t *testing.T, s *Session, prefix string) {
	t.Helper()
	const jobs = 3
	for i := range jobs {
		expectRun(t, s, "{ touch "+prefix+"-done"+strconv.Itoa(i)+"; } & echo $! >>"+prefix+"-pids", 0, "")
	}
	awaitReaped(t, s, prefix+"-pids")
}

// awaitReaped runs a command in s that returns once every process whose
// pid the file pids lists has been reaped by the shell, its end seen: a
// child the shell has not waited for is a zombie, which kill -0 still
// finds. The loop runs sleep, and the shell waiting for it reaps any child
// that ended (dash and busybox sh reap only when they wait). Bounded by
// the command's deadline.
func awaitReaped(t *testing.T, s *Session, pids string) {
	t.Helper()
	expectRun(t, s, `for p in $(cat `+pids+`); do while kill -0 "$p" 2>/dev/null; do sleep 0.01; done; done`, 0, "")
}
