package shellsession

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/process"
)

// FuzzCommandText sends random text to a live session of bash (or of the
// shell CONCH_FUZZ_SHELL names: CONCH_FUZZ_SHELL=ksh go test -fuzz
// FuzzCommandText ./shellsession): it never hangs, and either runs the text
// or refuses it with exit status 2; either way the session answers the next
// command. PATH is empty so that only builtins run, and text that could
// reach beyond the session's directory is skipped. Run so, it found ksh93's
// loop on a here-document that is not UTF-8 (see check) and zsh's dense
// arrays (a large positional parameter, 2000…0=, allocates without end).
func FuzzCommandText(f *testing.F) {
	shell := os.Getenv("CONCH_FUZZ_SHELL")
	for _, seed := range []string{
		"echo hi", "echo 'x", "if true; then", "cat <<EOF\nx", ";;", "echo a \\", "}", "{",
		"`", "$(", "((", "case x in", "f() {", "echo ${x", "a=(", "[[ -n", "echo \"\\\"",
		"while :; do break; done", "for i in 1 2; do echo $i; done", "# only", "\\", "echo \x1eCONCH",
		"set -u; echo $nope", "set -e", "exec 2>&1", "trap 'echo t' EXIT", "alias x=", "read x",
		"<<0\n00\xff\xff000000000000", "cat <<0\nx\xff\n0", "unset PWD; (exit 3)", "PWD=x",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	var s *Session
	f.Cleanup(func() {
		if s != nil {
			s.Close()
		}
	})
	f.Fuzz(func(t *testing.T, text string) {
		for _, bad := range []string{"/", "kill", "exec", "ulimit", "cd", "..", "exit", "return", "set -e", "logout", "suspend", "trap"} {
			if strings.Contains(text, bad) {
				t.Skip("could reach beyond the session, or end it on purpose")
			}
		}
		if s == nil || s.Info().State == process.Terminal {
			if s != nil {
				s.Close()
			}
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			var err error
			if s, err = New(ctx, Options{Shell: shell, Cwd: dir, Env: map[string]string{"PATH": ""}}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		c, err := s.Submit(CommandOptions{Cmd: text, ExecutionTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r, err := process.Wait(ctx, c)
		if err != nil {
			t.Fatalf("%q hung: %v", text, err)
		}
		if s.Info().State == process.Terminal {
			return // the text ended the shell (an error under set -e, say): reported, not hung
		}
		if r.Reason == process.Exited && *r.ExitCode == 2 {
			_, stderr := output(c)
			_ = stderr // a refusal says why on stderr, or the shell itself exited 2
		}
		_, next, err := s.Run(ctx, CommandOptions{Cmd: "echo ok", ExecutionTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("after %q: %v", text, err)
		}
		if next.Reason == process.Exited && *next.ExitCode != 0 && s.Info().State != process.Terminal {
			t.Fatalf("after %q the session no longer runs commands: %+v", text, next)
		}
	})
}
