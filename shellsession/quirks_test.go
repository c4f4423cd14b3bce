package shellsession

import (
	"strings"
	"testing"

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
