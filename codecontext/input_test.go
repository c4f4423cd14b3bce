package codecontext

import (
	"testing"
	"time"

	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// waitsForInput requires that the watcher of cell says it waits for input
// before the deadline, or fails naming what the cell wrote so far.
func waitsForInput(t *testing.T, cell *Cell, w *inputwatch.Watcher) {
	t.Helper()
	timeout := time.After(deadline)
	for !w.Waiting() {
		select {
		case <-w.Changed():
		case <-cell.Done():
			o, e := output(cell)
			t.Fatalf("the cell ended instead of waiting: %+v %q %q", cell.Result(), o, e)
		case <-timeout:
			o, e := output(cell)
			t.Fatalf("never seen waiting for input; it wrote %q %q", o, e)
		}
	}
}

// TestWaitingForInput: a cell blocked reading its open stdin — the
// interpreter itself, or a program the cell started — is seen waiting for
// input, and goes on when it is answered (promise 39).
func TestWaitingForInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lang       Language
		name, code string
		want       string
	}{
		{Python, "input", "n = input('name? ')\nprint('hi', n)", "name? hi ada\n"},
		{Python, "subprocess", "import subprocess\nr = subprocess.run(['head', '-1'])", "ada\n"},
		{JavaScript, "process.stdin", "let s = ''\nfor await (const b of process.stdin) { s += b; break }\n'hi ' + s.trim()", "'hi ada'\n"},
		{JavaScript, "execSync", "require('child_process').execSync('head -1', {stdio: 'inherit'}); undefined", "ada\n"},
	}
	for _, tc := range cases {
		t.Run(string(tc.lang)+" "+tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: tc.lang})
			// A child an earlier cell left running (with pipes the interpreter
			// watches, in JavaScript) neither hides the wait nor counts.
			run(t, c, map[Language]string{
				Python:     "import subprocess; bg = subprocess.Popen(['sleep', '30'])",
				JavaScript: "const bg = require('child_process').spawn('sleep', ['30'])",
			}[tc.lang])
			cell, err := c.Submit(CellOptions{Code: tc.code, Stdin: process.StdinOpen})
			require.NoError(t, err)
			w := inputwatch.Start(cell)
			waitsForInput(t, cell, w)
			require.NoError(t, cell.WriteStdin([]byte("ada\n")))
			w.Written()
			require.NoError(t, cell.CloseStdin())
			require.Equal(t, 0, code(wait(t, cell)))
			o, e := output(cell)
			require.Equal(t, tc.want, o, e)
			require.False(t, w.Waiting())
		})
	}
}
