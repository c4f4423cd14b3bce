package codecontext

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/process"
	"github.com/stretchr/testify/require"
)

// step is one cell of a behaviour row and what it must print and return.
type step struct {
	code           string
	stdout, stderr string
	status         int
}

// TestBehaviour runs rows of cells, each row in a fresh context, and checks
// each cell's exact output and exit status.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	rows := map[Language]map[string][]step{
		Python: {
			"state": {
				{code: "import math\nx = 2\ndef f(y):\n    return y * x\nclass C:\n    v = 5"},
				{code: "print(round(math.pi), f(3), C.v)", stdout: "3 6 5\n"},
			},
			"last value": {
				{code: "1 + 1", stdout: "2\n"},
				{code: "'a'", stdout: "'a'\n"},
				{code: "None"},
				{code: "x = 3"},
				{code: "x; [x, 'b']", stdout: "[3, 'b']\n"},
				{code: "_", stdout: "[3, 'b']\n"},
			},
			"exact output": {
				{code: "import os, subprocess, sys\nprint('o')\nsys.stderr.write('e\\n')\nos.system('echo x')\n_ = subprocess.run(['ls'])\nprint('end')",
					stdout: "o\nx\nfile1\nend\n", stderr: "e\n"},
				{code: "print('next')", stdout: "next\n"},
				{code: "import threading\nt = threading.Thread(target=lambda: print('in thread'))\nt.start(); t.join()", stdout: "in thread\n"},
				{code: "sys.stdout.buffer.write(b'bytes\\n'); print('x', file=sys.stderr)", stdout: "bytes\n", stderr: "x\n"},
			},
			"syntax error runs nothing": {
				{code: "print('ran')\nx = ("}, // stderr checked by content below
				{code: "print('ran')\nreturn 5"},
				{code: "'x' in dir()", stdout: "False\n"},
			},
			"a __future__ import holds for later cells, as at the REPL": {
				{code: "from __future__ import annotations\ndef f(x: Undefined): return x\nf.__annotations__", stdout: "{'x': 'Undefined'}\n"},
				{code: "def g(y: AlsoUndefined): return y\ng.__annotations__", stdout: "{'y': 'AlsoUndefined'}\n"},
			},
			"exception keeps state": {
				{code: "a = 1\nraise ValueError('boom')\na = 2"},
				{code: "a", stdout: "1\n"},
			},
		},
		JavaScript: {
			"state": {
				{code: "const a = 2; let b = 3; var v = 4; function f(y) { return y * a }; class C { static v = 5 }"},
				{code: "console.log(a, b, v, f(3), C.v)", stdout: "2 3 4 6 5\n"},
				{code: "const z = await Promise.resolve(7); let w = 1"},
				{code: "z + a + w", stdout: "10\n"},
				{code: "const os = require('os'); typeof os.cpus", stdout: "'function'\n"},
			},
			"last value": {
				{code: "1 + 1", stdout: "2\n"},
				{code: "'a'", stdout: "'a'\n"},
				{code: "undefined"},
				{code: "let x = 3"},
				{code: "({a: x})", stdout: "{ a: 3 }\n"},
				{code: "await Promise.resolve([x])", stdout: "[ 3 ]\n"},
			},
			"_ and _error, as at the REPL": {
				{code: "1 + 1", stdout: "2\n"},
				{code: "_ * 10", stdout: "20\n"},
				{code: "let u = 3"},
				{code: "typeof _", stdout: "'undefined'\n"},
				{code: "null.x", status: 1, stderr: "TypeError: Cannot read properties of null (reading 'x')\n    at <cell 5>:1:6\n"},
				{code: "_error.message", stdout: "\"Cannot read properties of null (reading 'x')\"\n"},
				{code: "await Promise.resolve(9)", stdout: "9\n"},
				{code: "_", stdout: "9\n"},
				{code: "Object.keys(globalThis).includes('_')", stdout: "false\n"},
				{code: "_ = 'mine'", stdout: "'mine'\n"}, // from then on the cell's own
				{code: "1", stdout: "1\n"},
				{code: "_", stdout: "'mine'\n"},
			},
			"a cell in braces is an object first, as at the REPL": {
				{code: "{ a: 1, b: 2 }", stdout: "{ a: 1, b: 2 }\n"},
				{code: "{ a: 1 }", stdout: "{ a: 1 }\n"},
				{code: "{\n  n: await Promise.resolve(2)\n}", stdout: "{ n: 2 }\n"},
				{code: "{ let y = 4; console.log(y) }", stdout: "4\n"},
				{code: "{ console.log(5) }", stdout: "5\n"},
				{code: "{ a: 1 };", stdout: "1\n"}, // a block, whose value is its labelled statement's, as at the REPL
				{code: "{ a: 1, b: }", status: 1, // the text's own error, not the one of it wrapped
					stderr: "<cell 7>:1\n{ a: 1, b: }\n         ^\n\nSyntaxError: Unexpected token ':'\n"},
				{code: "{ a: 3 } // a comment", stdout: "{ a: 3 }\n"},
				// Text that closes the parenthesis the REPL would put around it
				// does not compile: nothing of it runs.
				{code: "{}); console.log('ran'); ({}", status: 1,
					stderr: "<cell 9>:1\n{}); console.log('ran'); ({}\n  ^\n\nSyntaxError: Unexpected token ')'\n"},
			},
			"exact output": {
				{code: "const cp = require('child_process'); console.log('o'); console.error('e'); cp.execSync('echo x', {stdio: 'inherit'}); process.stdout.write('w\\n'); cp.execSync('ls', {stdio: 'inherit'}); void 0",
					stdout: "o\nx\nw\nfile1\n", stderr: "e\n"},
				{code: "console.log('next')", stdout: "next\n"},
				{code: "try { require('./nonexistent') } catch (e) { console.log(e.code) }", stdout: "MODULE_NOT_FOUND\n"},
			},
			"syntax error runs nothing": {
				{code: "console.log('ran'); let = = 1"},
				{code: "console.log('ran'); await 1; let = = 1"},
				{code: "typeof ran", stdout: "'undefined'\n"},
			},
			"exception keeps state": {
				{code: "var a = 1; throw new Error('boom'); a = 2"},
				{code: "a", stdout: "1\n"},
				{code: "a = 3; await Promise.reject(new Error('rejected'))"},
				{code: "Promise.reject(new Error('unhandled')); a = 4; void 0"},
				{code: "a", stdout: "4\n"},
			},
		},
	}
	failing := map[string]bool{"print('ran')\nx = (": true, "print('ran')\nreturn 5": true,
		"a = 1\nraise ValueError('boom')\na = 2": true, "console.log('ran'); let = = 1": true,
		"console.log('ran'); await 1; let = = 1": true, "var a = 1; throw new Error('boom'); a = 2": true,
		"a = 3; await Promise.reject(new Error('rejected'))": true, "Promise.reject(new Error('unhandled')); a = 4; void 0": true}
	for lang, byName := range rows {
		for name, steps := range byName {
			t.Run(string(lang)+"/"+name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, "file1"), nil, 0o600))
				c := newContext(t, Options{Language: lang, Cwd: dir})
				for _, s := range steps {
					r, out, errOut := run(t, c, s.code)
					require.Equal(t, process.Exited, r.Reason, "cell %q: %+v %s", s.code, r, errOut)
					if failing[s.code] {
						require.Equal(t, 1, code(r), "cell %q", s.code)
						require.Empty(t, out, "cell %q", s.code)
						require.NotEmpty(t, errOut, "cell %q", s.code)
						require.NotContains(t, errOut, "driver", "cell %q", s.code)
						require.NotContains(t, errOut, "node:vm", "cell %q", s.code)
						continue
					}
					require.Equal(t, s.status, code(r), "cell %q: %s", s.code, errOut)
					require.Equal(t, s.stdout, out, "cell %q", s.code)
					require.Equal(t, s.stderr, errOut, "cell %q", s.code)
				}
			})
		}
	}
}
