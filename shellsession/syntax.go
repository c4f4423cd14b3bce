package shellsession

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/shells"
	"mvdan.cc/sh/v3/syntax"
)

// checkResult is what the syntax check says of a command's text.
type checkResult struct {
	empty bool   // nothing to run: only blanks and comments
	err   string // the parser's message; non-empty when the text must not run
}

// check parses text in the dialect of sh. mvdan.cc/sh/v3/syntax has bash,
// POSIX, mksh and (partial) zsh dialects; for ksh93 and zsh, text that the
// parser refuses is asked of the shell's own -n check, so that no valid
// command is refused for the parser's want of a dialect.
func check(ctx context.Context, sh shells.Shell, p *syntax.Parser, text string) checkResult {
	if strings.IndexByte(text, 0) >= 0 {
		return checkResult{err: sh.Name + ": command text contains a NUL byte"}
	}
	_, exact := dialect(sh.Family)
	// The parser refuses bytes that are not UTF-8; the shells take them as
	// they take any other word character, which is what a stand-in is.
	f, err := p.Parse(strings.NewReader(strings.ToValidUTF8(text, "x")), "")
	if err == nil {
		return checkResult{empty: len(f.Stmts) == 0}
	}
	if !exact {
		if msg, ok := shellCheck(ctx, sh, text); ok {
			return checkResult{}
		} else if msg != "" {
			return checkResult{err: msg}
		}
	}
	return checkResult{err: parseMessage(sh, err)}
}

// newParser returns a parser in the dialect of sh; a session keeps one and
// uses it from its queue's goroutine only.
func newParser(sh shells.Shell) *syntax.Parser {
	lang, _ := dialect(sh.Family)
	return syntax.NewParser(syntax.Variant(lang))
}

func dialect(f shells.Family) (lang syntax.LangVariant, exact bool) {
	switch f {
	case shells.Bash:
		return syntax.LangBash, true
	case shells.Mksh:
		return syntax.LangMirBSDKorn, true
	case shells.Zsh:
		return syntax.LangZsh, false
	case shells.Ksh:
		return syntax.LangMirBSDKorn, false
	}
	return syntax.LangPOSIX, true
}

// parseMessage renders a parse error as the shell would: "bash: line 1: ...".
func parseMessage(sh shells.Shell, err error) string {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: line %d: syntax error: %s", sh.Name, pe.Pos.Line(), pe.Text)
	}
	return fmt.Sprintf("%s: syntax error: %v", sh.Name, err)
}

// shellCheck runs the shell's own -n check on text: ok when it parses; else
// the shell's message, or "" when the check itself could not run.
func shellCheck(ctx context.Context, sh shells.Shell, text string) (msg string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(append([]string{}, sh.Prefix...), "-n", "-c", text)
	cmd := exec.CommandContext(ctx, sh.Path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	err := proctree.Start(cmd)
	if err == nil {
		err = proctree.Wait(cmd)
	}
	if err == nil {
		return "", true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && stderr.Len() > 0 {
		return strings.TrimRight(stderr.String(), "\n"), false
	}
	return "", false
}
