package server

import (
	"context"
	"regexp/syntax"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// logOnly is a process whose log is all a readiness reads.
type logOnly struct {
	process.Process
	log *logstore.Log
}

func (p logOnly) Log() *logstore.Log { return p.log }

// Output that retention dropped between two looks of a wait does not join
// what came before it to what came after: READ, then frames of x that
// retention dropped before the wait looked again, then Y-NOW, matched
// READY-NOW, text the program never wrote.
func TestReadyPatternNotAcrossAGap(t *testing.T) {
	log := logstore.New(logstore.Options{Retention: 4 << 10})
	re, window, piece, err := readyPattern(`READY-NOW`)
	require.NoError(t, err)
	rd := readiness{p: logOnly{log: log}, re: re, windowBytes: window, pieceBytes: piece}

	log.Write(logstore.Stdout, []byte("READ"))
	rd.scan(context.Background())
	require.False(t, rd.matched)
	log.Write(logstore.Stdout, []byte(strings.Repeat("x", 8<<10)))
	log.Page(0, 0) // another reader: Y-NOW goes in a frame of its own
	log.Write(logstore.Stdout, []byte("Y-NOW"))
	page := log.Page(0, 0)
	require.True(t, page.TruncatedHead)
	require.Equal(t, "Y-NOW", string(page.Frames[0].Data), "the retained frames begin at Y-NOW")
	rd.scan(context.Background())
	require.False(t, rd.matched, "matched %q across the gap", rd.match)

	// Across frames with no gap, it matches.
	log.Write(logstore.Stdout, []byte("READ"))
	log.Write(logstore.Stdout, []byte("Y-NOW"))
	rd.scan(context.Background())
	require.True(t, rd.matched)
	require.Equal(t, "READY-NOW", rd.match)
}

// A wait matches a piece only in a place of the server's (see matchSlots),
// waiting for one while others match, and heeds its end meanwhile: a
// hundred waits of a large pattern each matching on their own held every
// core, and /healthz took seconds.
func TestReadyPatternWaitsForAPlace(t *testing.T) {
	log := logstore.New(logstore.Options{})
	log.Write(logstore.Stdout, []byte("Ready"))
	re, window, piece, err := readyPattern(`Ready`)
	require.NoError(t, err)
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // another wait matches
	rd := readiness{p: logOnly{log: log}, re: re, windowBytes: window, pieceBytes: piece, slots: slots}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rd.scan(ctx)
	require.False(t, rd.matched, "matched without a place")
	require.Error(t, ctx.Err(), "scan returned before its end, with no place")

	<-slots // the other is done
	rd = readiness{p: logOnly{log: log}, re: re, windowBytes: window, pieceBytes: piece, slots: slots}
	rd.scan(context.Background())
	require.True(t, rd.matched)
	require.Empty(t, slots, "the place is given back")
}

// The window a pattern is matched in starts where the output was cut to
// its last bytes, not where a line or the output starts: ^ and \b there
// see the byte before the cut as RE2 would in the whole output. ^Ready
// once matched a Ready that came after NotReady, 32 KiB in, where three
// pieces of output were cut to the last two.
func TestReadyPatternAtTheWindowsCut(t *testing.T) {
	mid := strings.Repeat("x", 32765) + "NotReady\n" + strings.Repeat("y", 70000) + "\n"
	line := strings.Repeat("x", 32767) + "\nReady\n" + strings.Repeat("y", 70000) + "\n"
	for _, tt := range []struct {
		out, pattern string
		match        bool
	}{
		{mid, `^Ready`, false},
		{mid, `(?m)^Ready$`, false},
		{mid, `\bReady`, false},
		{mid, `NotReady`, true},
		{mid, `Ready`, true},
		{line, `(?m)^Ready$`, true},
		{line, `\bReady\b`, true},
		{line, `^Ready`, false},
		{line, `\AReady`, false},
		{line, `\Axx`, true}, // the output's start
	} {
		log := logstore.New(logstore.Options{})
		re, window, piece, err := readyPattern(tt.pattern)
		require.NoError(t, err)
		rd := readiness{p: logOnly{log: log}, re: re, windowBytes: window, pieceBytes: piece}
		log.Write(logstore.Stdout, []byte(tt.out))
		rd.scan(context.Background())
		require.Equal(t, tt.match, rd.matched, "%q in output %d bytes long: matched %q", tt.pattern, len(tt.out), rd.match)
	}
}

// instBound is never below the instructions a pattern compiles to, so that
// no pattern past the bound is compiled, and at most a few times above
// them, so that none it refuses would have been taken.
func TestInstBound(t *testing.T) {
	for _, pattern := range []string{
		`a`, `Ready`, `(?i)ready`, `(?m)^Ready\r?$`, `\bReady\b`, `[a-z]+`, `x*`, `(x*)*`, `(a|b|c|d)`,
		`a{1000}`, `[\w\s-]{1000}|out`, `(?:abc){0,300}`, `(?:(x){2,}){100}`, `(?:a?){500}`,
		`((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}`, `(?s:.)(a|bc)*?d+`, `^$\A\z`, ``,
		`(?:[a-z]{2}(?:x|y){1,4}){50}`, `(a)(b)(c)(d)(e)(f)(g)(h)`,
	} {
		parsed, err := syntax.Parse(pattern, syntax.Perl)
		require.NoError(t, err, pattern)
		prog, err := syntax.Compile(parsed.Simplify())
		require.NoError(t, err, pattern)
		bound := instBound(parsed, 1<<30)
		require.GreaterOrEqual(t, bound, len(prog.Inst), pattern)
		require.LessOrEqual(t, bound, 8*len(prog.Inst), "%s: bound %d, %d instructions", pattern, bound, len(prog.Inst))
	}
}
