package shellsession

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/conchsh/conch/internal/reapertest"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// big5Env is the environment of a session whose shell runs in a BIG5
// locale, generated for the test (no system has one installed), so that
// the test runs wherever localedef and glibc's locale sources (Debian's
// locales package) are; it skips the test elsewhere.
func big5Env(t *testing.T) map[string]string {
	t.Helper()
	localedef, err := exec.LookPath("localedef")
	if err != nil {
		t.Skip("no localedef to make a BIG5 locale with (glibc's libc-bin)")
	}
	dir := t.TempDir()
	if out, err := reapertest.CombinedOutput(exec.Command(localedef, "-i", "zh_TW", "-f", "BIG5", filepath.Join(dir, "zh_TW.BIG5"))); err != nil {
		t.Skipf("cannot make a BIG5 locale (are glibc's locale sources, Debian's locales package, installed?): %v: %s", err, out)
	}
	return map[string]string{"LOCPATH": dir, "LC_ALL": "zh_TW.BIG5", "LANG": "zh_TW.BIG5"}
}

// TestBig5LocaleText pins what the syntax check cannot promise in a locale
// whose characters can end in an ASCII byte (BIG5, GBK, GB18030,
// Shift_JIS): the check reads the text as UTF-8, bash and ksh93 by the
// locale, where the last byte of the UTF-8 "中" (0xAD) and a "\" after it
// are one character. Text the check takes may then not parse for them, or
// parse into other commands; either way the command ends, saying what the
// shell said, nothing of the engine's is in its output and the session
// goes on. The other shells read the text as the check does.
func TestBig5LocaleText(t *testing.T) {
	t.Parallel()
	env := big5Env(t)
	const unclosed = `echo "中\" ; echo x"; echo after` // the quote bash and ksh93 see is left open
	const split = `echo "中\"; echo split; echo 中\""`   // one echo to the check, three to them
	for _, sh := range testShells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, Options{Shell: sh, Cwd: t.TempDir(), Env: env})
			c, err := s.Submit(CommandOptions{Cmd: unclosed})
			require.NoError(t, err)
			r := wait(t, c)
			out, errOut := output(c)
			require.NotContains(t, out+errOut, "\x1eCONCH", "a marker in the output")
			require.NotContains(t, out+errOut, string(c.frame.Nonce), "the nonce in the output")
			switch sh {
			case "bash":
				// bash's parse error in the command's file keeps the file's
				// first words, which say that it ran, from running.
				require.Equal(t, process.Failed, r.Reason, "%+v", r)
				require.Equal(t, 2, code(r))
				require.Contains(t, r.Error, "locale")
				require.Empty(t, out)
				require.NotEmpty(t, errOut, "bash's message")
				expectRun(t, s, "echo $?", 0, "2\n")
			case "ksh":
				require.Equal(t, process.Exited, r.Reason, "%+v", r)
				require.Equal(t, 3, code(r))
				require.Empty(t, out)
				require.Contains(t, errOut, "syntax error")
				expectRun(t, s, "echo $?", 0, "3\n")
			default:
				require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
				require.Equal(t, "中\" ; echo x\nafter\n", out)
			}
			if sh == "bash" || sh == "ksh" {
				expectRun(t, s, split, 0, "中\\\nsplit\n中\\\n")
			} else {
				expectRun(t, s, split, 0, "中\"; echo split; echo 中\"\n")
			}
		})
	}
}

// TestBig5LocaleKshHeredoc pins the ksh93 bug the check keeps from a UTF-8
// locale (TestKshHeredocNotUTF8) as it is in a BIG5 one: a here-document
// whose bytes are UTF-8 but not BIG5 ("€") makes ksh93 loop for ever, deaf
// to interrupts, and the command's execution timeout ends the session.
func TestBig5LocaleKshHeredoc(t *testing.T) {
	t.Parallel()
	s := newSession(t, Options{Shell: "ksh", Env: big5Env(t), StopGrace: 500 * time.Millisecond})
	c, err := s.Submit(CommandOptions{Cmd: "cat <<E\n€\nE", ExecutionTimeout: time.Second})
	require.NoError(t, err)
	r := wait(t, c)
	require.Equal(t, process.TimedOut, r.Reason, "%+v", r)
	requireEnds(t, s, "a command that did not stop after its timeout")
	require.Contains(t, s.Info().Result.Error, "did not stop after its execution timeout")
}
