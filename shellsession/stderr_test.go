package shellsession

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sentinel"
	"github.com/stretchr/testify/require"
)

// everyShell runs f in parallel on a session of each shell, with a context
// bounded by the package's hang guard.
func everyShell(t *testing.T, f func(t *testing.T, s *Session, ctx context.Context)) {
	t.Parallel()
	for _, sh := range testShells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			f(t, newSession(t, Options{Shell: sh}), ctx)
		})
	}
}

// TestStderrHasNoMarker: a command's stderr ends where its stdout's end
// marker is read, so bytes on stderr that look like an end marker, even
// one with the command's own nonce, are the command's output like any
// other, and what follows them is kept; a large stderr written just before
// the end is kept whole.
func TestStderrHasNoMarker(t *testing.T) {
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		c, r, err := s.Run(ctx, CommandOptions{Cmd: `printf '\036CONCH%s' "$__conch" >&2; echo after >&2; echo out`})
		require.NoError(t, err)
		require.Equal(t, 0, code(r))
		out, errs := output(c)
		require.Equal(t, "out\n", out)
		require.Equal(t, "\x1eCONCH"+string(c.frame.Nonce)+"after\n", errs)

		r, out, errs = run(t, s, CommandOptions{Cmd: `i=0; while [ $i -lt 3000 ]; do echo "line $i of stderr, long enough to fill pipes" >&2; i=$((i+1)); done; echo done`})
		require.Equal(t, 0, code(r))
		require.Equal(t, "done\n", out)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		require.Len(t, lines, 3000)
		require.Equal(t, "line 2999 of stderr, long enough to fill pipes", lines[2999])
	})
}

// TestFakeMarkerWithBadTrailer: a command that prints its own end marker on
// stdout (its nonce is in $__conch while it runs) with more after it than
// a trailer may hold, or a trailer that is not an end line's, ends there,
// failed, saying why: the marker is the engine's whatever follows it, and
// neither it nor what follows is output. Its shell runs it on, then the
// end line; the session goes on, later commands' output their own. Before,
// the marker and all after it were output, which put the shell's own
// marker, nonce and all, into the output of a command whose status the
// end line could not write as a number (TestStatusVariableTampered).
func TestFakeMarkerWithBadTrailer(t *testing.T) {
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		for _, fake := range []string{
			`printf '\036CONCH%s' "$__conch"; head -c 70000 /dev/zero | tr '\0' x`,
			`printf '\036CONCH%s1 \000' "$__conch"; exec >&-; sleep 0.5`,
		} {
			c, r, err := s.Run(ctx, CommandOptions{Cmd: "echo before; " + fake + "; echo; echo err >&2; (exit 3)"})
			require.NoError(t, err)
			require.Equal(t, process.Failed, r.Reason, "%+v", r)
			require.Contains(t, r.Error, "could not be read")
			out, _ := output(c)
			require.Equal(t, "before\n", out)
			for range 2 {
				r, out, errs := run(t, s, CommandOptions{Cmd: "echo out; echo err >&2; (exit 4)"})
				require.Equal(t, 4, code(r), "%+v", r)
				require.Equal(t, "out\n", out)
				require.Equal(t, "err\n", errs)
			}
		}
	})
}

// TestLateMarkerAfterImitation: a command that prints its own end marker
// with a trailer that parses is ended there (the status is its to give);
// its shell runs it on, then the end line, which writes the real marker to
// the command's stdout stream. With the command's stdout closed early
// (exec >&-), nothing held the stream between, and it went back to the
// pool: the marker came first in the next command's stderr on bash and
// ksh93 every time, and now and then on dash and busybox. A later command's
// output is its own.
func TestLateMarkerAfterImitation(t *testing.T) {
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		_, r, err := s.Run(ctx, CommandOptions{Cmd: `printf '\036CONCH%s_7_ hB /tmp\000' "$__conch"; exec >&-; sleep 0.5; (exit 3)`})
		require.NoError(t, err)
		require.Equal(t, 7, code(r))
		for range 4 {
			r, out, errs := run(t, s, CommandOptions{Cmd: "echo out; echo err >&2"})
			require.Equal(t, 0, code(r))
			require.Equal(t, "out\n", out)
			require.Equal(t, "err\n", errs)
		}
	})
}

// cdPastMaxCwd makes directories called name, each in the last, until
// their path passes sentinel.MaxCwd, and takes s's shell into the last.
func cdPastMaxCwd(t *testing.T, s *Session, name string) {
	t.Helper()
	r, _, errOut := run(t, s, CommandOptions{Cmd: "for i in $(seq " + strconv.Itoa(sentinel.MaxCwd/251+20) + "); do mkdir " + name + " && cd " + name + " || exit 1; done"})
	require.Equal(t, 0, code(r), "%s %q, stderr %q", r.Reason, r.Error, errOut)
}

// expectOutAndErr runs four commands that write a line to each stream in
// s, and requires each to come back whole.
func expectOutAndErr(t *testing.T, s *Session) {
	t.Helper()
	for range 4 {
		r, out, errs := run(t, s, CommandOptions{Cmd: "echo out; echo err >&2"})
		require.Equal(t, 0, code(r), "%s %q", r.Reason, r.Error)
		require.Equal(t, "out\n", out)
		require.Equal(t, "err\n", errs)
	}
}

// TestLateMarkerPastBound: the late end line of a command in a directory
// whose path passes sentinel.MaxCwd, its marker imitated and its stdout
// closed early as in TestLateMarkerAfterImitation, is dropped whole: its
// trailer was cut at the scanner's bound, and the rest of the path and its
// NUL came first in the next command's output.
func TestLateMarkerPastBound(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	name := strings.Repeat("d", 250)
	s := newSession(t, Options{Cwd: base})
	defer run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + " && rm -rf " + name})
	cdPastMaxCwd(t, s, name)
	ctx := t.Context()
	_, r, err := s.Run(ctx, CommandOptions{Cmd: `printf '\036CONCH%s_7_ hB /tmp\000' "$__conch"; exec >&-; sleep 0.5; (exit 3)`})
	require.NoError(t, err)
	require.Equal(t, 7, code(r))
	expectOutAndErr(t, s)
}

// TestLateMarkerPastBoundUnread: as in TestLateMarkerPastBound, with the
// command's stdout held open until the next command has taken its streams
// and let go of only then. The stream went back to the pool, where nobody
// read it, and the shell blocked for good writing into it the late end
// line, longer than a pipe holds: the next command never ran, and the
// session hung (bash). On the shells that can cd into a directory that
// long; zsh's end line, read from a file the next command's start
// removes, does not run late, and ksh's $PWD stops at 4096 bytes.
func TestLateMarkerPastBoundUnread(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "ksh"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			lateMarkerPastBoundUnread(t, sh)
		})
	}
}

func lateMarkerPastBoundUnread(t *testing.T, sh string) {
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	s := newSession(t, Options{Shell: sh})
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	name := strings.Repeat("d", 250)
	run(t, s, CommandOptions{Cmd: "cd " + shQuote(base)})
	cdPastMaxCwd(t, s, name)
	defer run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + " && rm -rf " + name})
	// The first sleep keeps the stdout open past the next command's start,
	// the second lets the engine see it closed before the end line runs.
	_, r, err := s.Run(ctx, CommandOptions{Cmd: `printf '\036CONCH%s_7_ hB /tmp\000' "$__conch"; sleep 1; exec >&-; sleep 0.5; (exit 3)`})
	require.NoError(t, err)
	require.Equal(t, 7, code(r))
	expectOutAndErr(t, s)
}

// TestLateMarkerPastBoundBelow: as in TestLateMarkerPastBoundUnread, with
// the command's stdout back in the pool before the next command, but under
// two streams put there after it (an earlier command's, let go of by its
// background job meanwhile): the next command took those two, and nobody
// read the late end line.
func TestLateMarkerPastBoundBelow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	name := strings.Repeat("d", 250)
	closed := filepath.Join(base, "closed")
	s := newSession(t, Options{Cwd: base})
	defer run(t, s, CommandOptions{Cmd: "cd " + shQuote(base) + " && rm -rf " + name})
	cdPastMaxCwd(t, s, name)
	c, r, err := s.Run(ctx, CommandOptions{Cmd: `printf '\036CONCH%s_7_ hB /tmp\000' "$__conch"; exec >&-; : >` + shQuote(closed) + `; sleep 1; (exit 3)`})
	require.NoError(t, err)
	require.Equal(t, 7, code(r))
	out := c.streams.out
	require.Eventually(t, func() bool { _, err := os.Stat(closed); return err == nil }, deadline, time.Millisecond)
	s.settleUnsettled() // as the next command's start would
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Contains(s.pool, out)
	}, deadline, time.Millisecond)
	// The pool: that stream, then two new ones on top.
	s.mu.Lock()
	others := slices.DeleteFunc(slices.Clone(s.pool), func(st *stream) bool { return st == out })
	s.pool = append(s.pool[:0], out)
	s.mu.Unlock()
	for _, st := range others {
		s.discard(st)
	}
	for range 2 {
		st, err := s.newStream()
		require.NoError(t, err)
		s.putStream(st)
	}
	s.mu.Lock()
	pool := slices.Clone(s.pool)
	s.mu.Unlock()
	require.Equal(t, []*stream{out}, pool[:1])
	require.Len(t, pool, 3)
	expectOutAndErr(t, s)
}

// TestStderrEndsWithMarkersStart: a stream from the pool that served a
// command's stdout looks for that command's end marker at its start, for
// an end line the shell may run late (TestLateMarkerAfterImitation); bytes
// that only begin that marker are the stream's new user's once anything
// else follows them. When nothing followed — a stderr that is "\036", or
// "\036CONC", and no more — they were lost: on bash every time.
func TestStderrEndsWithMarkersStart(t *testing.T) {
	everyShell(t, func(t *testing.T, s *Session, ctx context.Context) {
		for i, text := range []string{"\x1e", "\x1eCONC", "\x1eCONCH", "\x1e", "\x1eCO"} {
			// Each command's streams are what the one before gave back.
			r, out, errs := run(t, s, CommandOptions{Cmd: fmt.Sprintf(`printf '%s' >&2; echo out`, strings.ReplaceAll(text, "\x1e", `\036`))})
			require.Equal(t, 0, code(r), "command %d", i)
			require.Equal(t, "out\n", out, "command %d", i)
			require.Equal(t, text, errs, "command %d", i)
			r, out, errs = run(t, s, CommandOptions{Cmd: fmt.Sprintf(`printf '%s'; echo err >&2`, strings.ReplaceAll(text, "\x1e", `\036`))})
			require.Equal(t, 0, code(r), "command %d", i)
			require.Equal(t, text, out, "command %d", i)
			require.Equal(t, "err\n", errs, "command %d", i)
		}
	})
}
