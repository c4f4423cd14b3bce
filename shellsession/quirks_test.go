package shellsession

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// The promises a shell keeps only in part, as the README's shell matrix
// says: each pinned here as it is, so that a change to it is seen and the
// matrix said again.

// zsh numbers a job a command starts from [2]: the engine's eval of the
// command holds job 1 while it runs, as any eval, "." or { } group at a
// zsh prompt does. %1 then names that eval: kill %1 signals nothing and
// returns 0, and the job runs on; %% names the job.
func TestZshJobsFromTwo(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "zsh"})
	run(t, s, CommandOptions{Cmd: "sleep 30 &"})
	_, out, _ := run(t, s, CommandOptions{Cmd: "jobs"})
	require.True(t, strings.HasPrefix(out, "[2]"), "%q", out)
	r, out, _ := run(t, s, CommandOptions{Cmd: "kill %1; echo $?; jobs"})
	require.Equal(t, 0, code(r))
	require.True(t, strings.HasPrefix(out, "0\n[2]"), "kill %%1 leaves the job: %q", out)
	_, out, _ = run(t, s, CommandOptions{Cmd: "kill %%; wait; jobs; echo done"})
	require.Equal(t, "done\n", out, "%% names the job")
}

// zsh's $? can pass 255 (a function's return 256): the command reports it
// as zsh says it, and the next command's $? is it too, as at a terminal:
// the frame gives it back by a sourced file's return (see
// sentinel.Paths.StatusFile), where a subshell's exit gave it modulo 256.
func TestZshStatusPast255(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "zsh"})
	r, _, _ := run(t, s, CommandOptions{Cmd: "f() { return 300; }; f"})
	require.Equal(t, 300, code(r))
	_, out, _ := run(t, s, CommandOptions{Cmd: "echo $?"})
	require.Equal(t, "300\n", out)
}

// With a DEBUG trap set, ksh93 gives the command the frame sources $? 0,
// whatever the command before ended with (bash keeps it: its command file
// gives $? back itself).
func TestKshDebugTrapStatus(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"ksh": "0\n", "bash": "3\n"} {
		s := newSession(t, Options{Shell: shell})
		run(t, s, CommandOptions{Cmd: "trap ': D' DEBUG"})
		r, _, _ := run(t, s, CommandOptions{Cmd: "(exit 3)"})
		require.Equal(t, 3, code(r), shell)
		_, out, _ := run(t, s, CommandOptions{Cmd: "echo $?"})
		require.Equal(t, want, out, shell)
	}
}

// bash with return (or false) disabled by enable -n: the frame gives $?
// back through them (return, from the status file it sources, for a
// status past 1; false for 1), so the next command's $? is 1, and bash's
// refusal goes to the shell's own stderr, which no command's output holds.
func TestBashReturnDisabled(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "bash"})
	run(t, s, CommandOptions{Cmd: "enable -n return"})
	r, _, _ := run(t, s, CommandOptions{Cmd: `sh -c "exit 4"`})
	require.Equal(t, 4, code(r))
	_, out, errs := run(t, s, CommandOptions{Cmd: "echo p=$?"})
	require.Equal(t, "p=1\n", out)
	require.Empty(t, errs)
	run(t, s, CommandOptions{Cmd: "enable return; enable -n false; sh -c 'exit 1'"})
	_, out, errs = run(t, s, CommandOptions{Cmd: "echo p=$?"})
	require.Equal(t, "p=1\n", out)
	require.Contains(t, errs, "false: not a shell builtin")
}

// kill %1 names a job by its number, and what it does depends on the shell
// (the README's shell matrix, promise 13). Once the job runs its program,
// bash, mksh, ksh93 and busybox sh signal it and wait returns; zsh's %1
// names the engine's eval (TestZshJobsFromTwo); dash without job control
// signals the process group the job would lead under it, which does not
// exist: "No such process", as dash -c says, and the job runs on. Either
// way $! names the job. A signal sent in the same line as the "&" is
// TestSignalBeforeJobRuns.
func TestKillJobByNumber(t *testing.T) {
	t.Parallel()
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			_, out, _ := run(t, s, CommandOptions{Cmd: "sleep 100 & echo $!"})
			pid, err := strconv.Atoi(strings.TrimSpace(out))
			require.NoError(t, err, "%q", out)
			// Past its exec, the job has the default disposition of
			// SIGTERM whatever the shell's own was. ksh93's sleep is
			// a builtin, run by the forked shell itself, which takes
			// TERM with a handler of its own whether or not it has
			// reset its traps: nothing tells from outside when a TERM
			// can no longer be lost (TestSignalBeforeJobRuns), so
			// there the job is sent KILL.
			require.Eventually(t, func() bool {
				exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
				return err == nil && (shell == "ksh" || strings.HasSuffix(exe, "/sleep"))
			}, deadline, 10*time.Millisecond, "the job never ran sleep")
			kill := "kill %1; echo $?"
			if shell == "ksh" {
				kill = "kill -s KILL %1; echo $?"
			}
			r, out, errs := run(t, s, CommandOptions{Cmd: kill})
			require.Equal(t, 0, code(r))
			switch shell {
			case "dash":
				require.Equal(t, "1\n", out)
				require.Contains(t, errs, "dash: 1: kill: No such process")
			default:
				require.Equal(t, "0\n", out, "stderr %q", errs)
			}
			alive := shell == "dash" || shell == "zsh"
			if alive {
				expectRun(t, s, "kill -0 $! && echo alive; kill $!", 0, "alive\n")
			}
			// Bounded by run's deadline: a job left alive would hold
			// wait for 100 s.
			expectRun(t, s, "wait; echo $?", 0, "0\n")

			switch shell {
			case "bash":
				expectRun(t, s, "sleep 100 & kill %1; wait; echo $?", 0, "0\n")
			case "dash", "zsh":
				_, out, _ = run(t, s, CommandOptions{Cmd: "sleep 100 & kill %1; echo $?; kill -0 $! && echo alive"})
				require.Equal(t, map[string]string{"dash": "1\nalive\n", "zsh": "0\nalive\n"}[shell], out)
			}
		})
	}
	// dash's own: not the engine's.
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	bare, err := reapertest.CombinedOutput(exec.CommandContext(ctx, "dash", "-c", "sleep 1 & kill %1"))
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", bare)
	require.Equal(t, 1, exit.ExitCode(), "%s", bare)
	require.Contains(t, string(bare), "kill: No such process")
}

// A signal sent in the same line as the "&" (sleep 1 & kill $!) reaches the
// job's forked shell before it has reset the shell's own handling of it:
// the engine's TERM trap (see initScript), whose handler the fork keeps.
// bash blocks SIGTERM across its fork until it has reset it, and zsh's job
// ends too: there the job always ends. dash, busybox sh and mksh take it
// with the inherited handler, then drop it as they reset their traps, and
// the job runs on, as in any interactive dash or busybox sh (without a
// trap, the forked shell ignores SIGTERM as the interactive shell does) and
// in mksh -c too (mksh catches SIGTERM always); dash -c and busybox sh -c
// end the job, but the engine runs its shells interactively. ksh93's
// forked shell sends itself the signal again once it has reset its
// handling, and wait returns 271, but under load it too lost it. wait
// then returns the job's own status. Where it can be lost, the loss came
// in most tries (mksh: fewer), but a race is no promise: there either
// outcome passes, and the test pins bash and zsh.
func TestSignalBeforeJobRuns(t *testing.T) {
	t.Parallel()
	// The status of a job TERM ended, where the job always ends; "0" is
	// sleep's own, the signal lost.
	ends := map[string]string{"bash": "143\n", "zsh": "143\n"}
	const tries = 50
	for _, shell := range testShells {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: shell})
			names := []string{"$!", "%1"}
			switch shell {
			case "zsh":
				names[1] = "%%" // %1 is the engine's eval (TestZshJobsFromTwo)
			case "dash":
				names = names[:1] // %1 signals no process (TestKillJobByNumber)
			}
			for _, name := range names {
				for range tries {
					cmd := "sleep 1 & kill " + name + "; wait $!; echo $?"
					_, out, errs := run(t, s, CommandOptions{Cmd: cmd})
					want, ok := ends[shell]
					if !ok {
						require.Contains(t, []string{"143\n", "271\n", "0\n"}, out, "%q: stderr %q", cmd, errs)
						if out == "0\n" {
							break // lost: sleep ran its second out
						}
						continue
					}
					require.Equal(t, want, out, "%q: stderr %q", cmd, errs)
				}
			}
		})
	}
}

// zsh's wait takes no SIGINT while the job it waits for ignores it, as a
// background job does without job control (zsh waits on, at a terminal
// too, so that such a job is still waited for): a wait past its command's
// execution timeout is then given the grace, and the session ends. bash's
// wait takes the interrupt, and its session lives on.
func TestZshWaitTakesNoInterrupt(t *testing.T) {
	t.Parallel()
	for shell, ends := range map[string]bool{"zsh": true, "bash": false} {
		s := newSession(t, Options{Shell: shell})
		c, err := s.Submit(CommandOptions{Cmd: "sleep 100 & wait", ExecutionTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, process.TimedOut, wait(t, c).Reason, shell)
		if ends {
			requireEnds(t, s, "a wait past its timeout")
			sr := s.Info().Result
			require.NotNil(t, sr)
			require.Contains(t, sr.Error, "did not stop after its execution timeout")
			continue
		}
		expectRun(t, s, "echo $?", 0, "130\n")
	}
}

// In bash and zsh a "#" starts a comment in a command whatever
// interactive_comments says: bash sources the command's file and zsh
// evaluates its text, and both parse that as a script, not as a line typed
// at a prompt, where with the option off "#" is a word ("echo a # b"
// prints "a # b"). zsh's engine turns the option on as the shell starts
// (a zsh terminal starts with it off).
func TestCommentsWhateverInteractiveComments(t *testing.T) {
	t.Parallel()
	for shell, off := range map[string]string{"bash": "shopt -u interactive_comments", "zsh": "unsetopt interactive_comments"} {
		s := newSession(t, Options{Shell: shell})
		expectRun(t, s, off, 0, "")
		expectRun(t, s, "echo a # b; (exit 3)", 0, "a\n")
		expectRun(t, s, "echo $?", 0, "0\n")
	}
}

// A PS4 whose expansion writes (a command substitution) under set -x:
// bash and ksh93 expand it once for each line of the command; mksh and
// busybox sh expand it for one of the engine's lines too, which writes
// into the command's stderr, though its trace goes where no command's
// output does; dash cannot expand a command substitution in PS4 inside an
// eval, which is how it runs each command, and says so, tracing with the
// PS4 unexpanded; zsh expands no substitution in PS4 (prompt_subst is off).
func TestPS4Substitution(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"bash":    "P4\n++ echo a\n",
		"ksh":     "P4\n+ echo a\n",
		"mksh":    "P4\nP4\n",
		"busybox": "P4\nP4\n+ echo a\n",
		"dash":    "P4\ndash: 1: eval: Syntax error: end of file unexpected (expecting \")\")\n$(echo P4 >&2)+ echo a\n",
		"zsh":     "$(echo P4 >&2)+ echo a\n",
	}
	for _, shell := range testShells {
		s := newSession(t, Options{Shell: shell})
		run(t, s, CommandOptions{Cmd: "PS4='$(echo P4 >&2)+ '; set -x"})
		r, out, errs := run(t, s, CommandOptions{Cmd: "echo a"})
		require.Equal(t, 0, code(r), shell)
		require.Equal(t, "a\n", out, shell)
		require.Equal(t, want[shell], errs, shell)
	}
}
