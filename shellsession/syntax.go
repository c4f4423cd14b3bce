package shellsession

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/internal/proctree"
	"github.com/conchsh/conch/internal/shells"
	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"
)

// checkResult is what the syntax check says of a command's text.
type checkResult struct {
	empty bool   // nothing to run: only blanks and comments
	err   string // the parser's message; non-empty when the text must not run
	// parsedLater says that the parser took text that bash may refuse
	// when it runs it (see bashMayRefuse): the session has bash eval it,
	// so that a refusal is the command's exit code 2 with bash's message.
	parsedLater bool
}

// bashMayRefuse reports whether f, parsed as bash, holds what the parser
// takes and bash refuses or takes by the session's state alone: an
// extended glob (@(a|b), !(x)), a syntax error unless the command before
// turned extglob on; a group with no command in it ({ }); or a function
// whose body is a simple command (f() {}, where "{}" is a word). Sourced, as
// every bash command is, a text bash cannot parse is no command that ran:
// the frame's guard in the text is never set, and the command was reported
// failed, bash's message quoting the command file's path and the guard's
// words.
func bashMayRefuse(f *syntax.File) bool {
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ExtGlob:
			found = true
		case *syntax.Block:
			found = found || len(n.Stmts) == 0 // comments alone too: "{ #c\n}" is refused
		case *syntax.FuncDecl:
			// A body that is a simple command (f() {}, where "{}" is a word).
			_, simple := n.Body.Cmd.(*syntax.CallExpr)
			found = found || simple
		}
		return !found
	})
	return found
}

// The in-process parser builds a syntax tree of about 50 bytes per byte of
// text, and spends a few kilobytes of stack per level of nesting, with time
// that grows with the square of the depth (a 128 KiB run of "(" took 500 MB
// and 16 s; a 4 MiB one overflowed the stack and ended the process). Text
// longer than parserMax, or nesting deeper than parserDepth, is therefore
// checked by the shell's own -n in a child process reading it from a file:
// the engine then holds the text only, whatever its shape.
const (
	parserMax   = 64 << 10
	parserDepth = 256
)

// check parses text in the dialect of sh. mvdan.cc/sh/v3/syntax has bash,
// POSIX, mksh and (partial) zsh dialects; for ksh93, zsh and bash, text
// that the parser refuses is asked of the shell's own -n check, so that no
// valid command is refused for the parser's want of a dialect, or for its
// checking more than bash does before it runs a command. Large or deeply
// nested text goes to the shell's -n check alone (see parserMax).
func check(ctx context.Context, sh shells.Shell, p *syntax.Parser, text string) checkResult {
	if strings.IndexByte(text, 0) >= 0 {
		return checkResult{err: sh.Name + ": command text contains a NUL byte"}
	}
	valid := utf8.ValidString(text)
	parsed, lastBad := text, -1
	if !valid {
		parsed, lastBad = byteStandIns(text)
	}
	// With no tree to find the here-documents in (text the parser is not
	// given, or an unclosed here-document, which ksh93 takes and the parser
	// does not), a byte that is not UTF-8 after a "<<" may be in one.
	kshRisk := !valid && sh.Family == shells.Ksh && strings.Contains(text[:lastBad], "<<")
	if len(text) > parserMax || nesting(text) > parserDepth {
		if kshRisk {
			return checkResult{err: sh.Name + kshHeredocBytes}
		}
		if msg, ok := shellCheck(ctx, sh, text); ok {
			return checkResult{}
		} else if msg != "" {
			return checkResult{err: msg}
		}
		return checkResult{err: fmt.Sprintf("%s: the syntax check of this %d-byte command could not run", sh.Name, len(text))}
	}
	// The parser refuses bytes that are not UTF-8; the shells take them as
	// they take any other word character, which is what a stand-in is: one
	// for each byte, so that the tree's offsets are the text's.
	f, err := p.Parse(strings.NewReader(parsed), "")
	if err == nil {
		if !valid && sh.Family == shells.Ksh && heredocNotUTF8(f, text) {
			return checkResult{err: sh.Name + kshHeredocBytes}
		}
		return checkResult{empty: len(f.Stmts) == 0, parsedLater: sh.Family == shells.Bash && bashMayRefuse(f)}
	}
	if kshRisk {
		return checkResult{err: sh.Name + kshHeredocBytes}
	}
	switch sh.Family {
	case shells.Ksh, shells.Zsh:
		// The parser wants their dialect: the shell's check decides.
		if msg, ok := shellCheck(ctx, sh, text); ok {
			return checkResult{}
		} else if msg != "" {
			return checkResult{err: msg}
		}
	case shells.Bash:
		// The parser refuses some text bash runs: bash evaluates `$(( ))`,
		// and an arithmetic error in a branch not taken, only as it runs
		// them. What bash's check takes, bash evals (see
		// checkResult.parsedLater); a refusal keeps the parser's message.
		if _, ok := shellCheck(ctx, sh, text); ok {
			return checkResult{parsedLater: true}
		}
	}
	return checkResult{err: parseMessage(sh, err, text)}
}

// kshHeredocBytes is why a command for ksh93 is refused: its check's
// message, after the shell's name.
const kshHeredocBytes = ": a here-document holds bytes that are not UTF-8, on which ksh93 loops for ever in a UTF-8 locale, deaf to interrupts (a ksh93 bug): write them with printf, or use another shell"

// byteStandIns returns text with each byte that is not part of a UTF-8
// sequence replaced by "x", and the offset of the last such byte.
func byteStandIns(text string) (string, int) {
	b, last := []byte(text), -1
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			b[i], last = 'x', i
		}
		i += n
	}
	return string(b), last
}

// heredocNotUTF8 reports whether a here-document of f, parsed from text
// (or its byteStandIns), holds bytes that are not UTF-8 in text.
func heredocNotUTF8(f *syntax.File, text string) bool {
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if r, ok := n.(*syntax.Redirect); ok && r.Hdoc != nil && !found {
			from, to := r.Hdoc.Pos().Offset(), r.Hdoc.End().Offset()
			found = from <= to && int(to) <= len(text) && !utf8.ValidString(text[from:to])
		}
		return !found
	})
	return found
}

// nesting is an upper bound of how deep the parser recurses for text: the
// most brackets ("(", "{", "[") open at once, quoting ignored, a closing one
// never taking the count below zero. Quoted brackets can only make it larger,
// which sends the text to the shell's check, never refuses it.
func nesting(text string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '(', '{', '[':
			depth++
			deepest = max(deepest, depth)
		case ')', '}', ']':
			depth = max(0, depth-1)
		}
	}
	return deepest
}

// newParser returns a parser in the dialect of sh; a session keeps one and
// uses it from its queue's goroutine only.
func newParser(sh shells.Shell) *syntax.Parser {
	return syntax.NewParser(syntax.Variant(dialect(sh.Family)))
}

func dialect(f shells.Family) syntax.LangVariant {
	switch f {
	case shells.Bash:
		return syntax.LangBash
	case shells.Mksh, shells.Ksh:
		return syntax.LangMirBSDKorn
	case shells.Zsh:
		return syntax.LangZsh
	}
	return syntax.LangPOSIX
}

// parseMessage renders a parse error of text as the shell would: "bash:
// line 1: ...". The parser calls a function's declaration that is not
// whole "foo(", "foo()" or "function foo(", whatever its name: the message
// names the one text has, so that print(x + 1) is told "`print(` must be
// followed by `)`", not of a foo it does not hold.
func parseMessage(sh shells.Shell, err error, text string) string {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		msg := pe.Text
		if strings.Contains(msg, "foo(") {
			if name := declared(text, int(pe.Pos.Offset())); name != "" {
				msg = strings.Replace(msg, "foo(", name+"(", 1)
			}
		}
		return fmt.Sprintf("%s: line %d: syntax error: %s", sh.Name, pe.Pos.Line(), msg)
	}
	return fmt.Sprintf("%s: syntax error: %v", sh.Name, err)
}

// declared returns the name of the function declaration at offset off of
// text (name(, or function name), "" when there is none.
func declared(text string, off int) string {
	if off < 0 || off >= len(text) {
		return ""
	}
	i := strings.IndexByte(text[off:], '(')
	if i < 0 {
		return ""
	}
	decl := strings.TrimSpace(text[off : off+i])
	if rest, ok := strings.CutPrefix(decl, "function"); ok && rest != strings.TrimLeft(rest, " \t") {
		decl = strings.TrimSpace(rest)
	}
	if strings.ContainsAny(decl, " \t\n") {
		return ""
	}
	return decl
}

// shellCheck runs the shell's own -n check on text: ok when it parses; else
// the shell's message, or "" when the check itself could not run. Text up to
// parserMax goes as the argument of -c; longer text, which an argument could
// not hold (Linux takes at most 128 KiB), in a file: bash reads a script
// from a pipe one byte per read.
func shellCheck(ctx context.Context, sh shells.Shell, text string) (msg string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(append([]string{}, sh.Prefix...), "-n")
	path := ""
	if len(text) <= parserMax {
		args = append(args, "-c", "--", text) // "--": a text may begin with "-"
	}
	cmd := exec.CommandContext(ctx, sh.Path, args...)
	if len(text) > parserMax {
		f, err := memFile(text)
		if err != nil {
			return "", false
		}
		defer f.Close()
		// The shell opens it anew by this path, as its fd 3.
		cmd.ExtraFiles = []*os.File{f}
		path = "/dev/fd/3"
		cmd.Args = append(cmd.Args, path)
	}
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
		msg = strings.TrimRight(stderr.String(), "\n")
		if path != "" {
			// The shell names the file where it would name itself.
			msg = strings.ReplaceAll(msg, path, sh.Name)
		}
		return msg, false
	}
	return "", false
}

// memFile returns a file that holds text, in memory (memfd_create): it
// needs no directory, such as a $TMPDIR that was removed.
func memFile(text string) (*os.File, error) {
	fd, err := unix.MemfdCreate("conch-check", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "conch-check")
	// Read from its start: ksh93 takes /dev/fd/N as a dup of N, with N's
	// offset, rather than opening it anew.
	_, err = f.WriteString(text)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
