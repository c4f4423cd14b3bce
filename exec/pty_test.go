package exec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
)

// ptyScript reports whether it has a terminal and its size, then waits for a
// line before reporting the size again, then echoes a line it reads.
const ptyScript = `test -t 0 && test -t 1 && echo on-a-tty
echo "size $(stty size)"
read go
echo "size $(stty size)"
read line
echo "got:$line"`

func TestPTY(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: ptyScript, Terminal: &process.TerminalSize{Cols: 100, Rows: 30}})
	if info := p.Info(); info.Kind != process.KindPTY || info.Stdin != process.StdinOpen || *info.Terminal != (process.TerminalSize{Cols: 100, Rows: 30}) {
		t.Fatalf("info %+v", info)
	}
	waitOutput(t, p, "size 30 100")
	if err := p.Resize(process.TerminalSize{Cols: 120, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteStdin([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "size 40 120")
	if err := p.WriteStdin([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, p); !sameResult(r, process.ExitedWith(0)) {
		t.Fatalf("result %s", show(r))
	}
	out := logText(p.Log(), logstore.PTY)
	for _, want := range []string{"on-a-tty\r\n", "got:hello\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if got := logText(p.Log(), 0); got != out {
		t.Errorf("frames on channels other than pty: %q", got)
	}
	if err := p.Resize(process.TerminalSize{Cols: 80, Rows: 24}); !errors.Is(err, process.ErrUnsupported) {
		t.Errorf("resize after the end: %v", err)
	}
}

func TestPTYDefaultSizeAndTerm(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `echo "$(stty size) $TERM"`})
	wait(t, p)
	if got := logText(p.Log(), 0); got != "24 80 xterm-256color\r\n" {
		t.Errorf("output %q", got)
	}
}

func TestNotPTY(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Cmd: "exit 0"})
	if err := p.Resize(process.TerminalSize{Cols: 80, Rows: 24}); !errors.Is(err, process.ErrNotPTY) {
		t.Errorf("Resize: %v", err)
	}
	if _, err := p.Attach(t.Context()); !errors.Is(err, process.ErrNotPTY) {
		t.Errorf("Attach: %v", err)
	}
	wait(t, p)
}

// readUntil reads a until what it read holds s, at most 20 s.
func readUntil(t *testing.T, a *Attachment, s string) string {
	t.Helper()
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), s) {
			n, err := a.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read %q, then %v; want %q", got.String(), err, s)
		}
	case <-time.After(20 * time.Second):
		a.Close() // ends the reader
		<-done
		t.Fatalf("read %q in 20 s; want %q", got.String(), s)
	}
	return got.String()
}

func TestAttach(t *testing.T) {
	t.Parallel()
	p := start(t, Options{Kind: process.KindPTY, Cmd: `echo before; while read line; do echo "echo:$line"; done; echo bye`})
	waitOutput(t, p, "before")

	// Two clients at once: both get the replay first, then live output.
	a1, err := p.Attach(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Close()
	a2, err := p.Attach(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	for _, a := range []*Attachment{a1, a2} {
		if got := readUntil(t, a, "before\r\n"); !strings.HasPrefix(got, "before\r\n") {
			t.Errorf("replay %q does not start with the retained output", got)
		}
	}
	// Input from one client reaches the PTY; its output reaches both.
	if _, err := a1.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, a1, "echo:one")
	readUntil(t, a2, "echo:one")
	if err := a2.Resize(process.TerminalSize{Cols: 90, Rows: 20}); err != nil {
		t.Fatal(err)
	}
	// A client that detaches leaves the process running.
	a2.Close()
	if _, err := a1.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, a1, "echo:two")

	// The end: Ctrl-D ends the read loop; the reader gets the rest, then EOF.
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	readUntil(t, a1, "bye")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); a1.Close() }()
	if rest, err := io.ReadAll(a1); err != nil {
		t.Errorf("after bye: %q, %v; want io.EOF", rest, err)
	}
	if r := wait(t, p); !sameResult(r, process.ExitedWith(0)) {
		t.Errorf("result %s", show(r))
	}
	// Attaching to an ended process replays what it retained, then EOF.
	a3, err := p.Attach(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a3.Close()
	if all, err := io.ReadAll(a3); err != nil || !strings.HasPrefix(string(all), "before\r\n") || !strings.HasSuffix(string(all), "bye\r\n") {
		t.Errorf("attach after the end: %q, %v", all, err)
	}
}
