package codecontext

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/process"
)

// TestDynamicImport: import() in a JavaScript cell loads a node: builtin, a
// module by a path relative to the context's current directory (which
// follows process.chdir), by an absolute path, and an ESM-only package from
// node_modules, a JSON module with its import attribute, also from a function a cell defined and a later cell calls.
func TestDynamicImport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write("m.mjs", "export const x = 42;\n")
	write("d.json", `{"z": 7}`)
	write("sub/n.mjs", "export const y = 'abs';\n")
	write("node_modules/esmonly/package.json", `{"name":"esmonly","type":"module","exports":{"import":"./i.js"}}`)
	write("node_modules/esmonly/i.js", "export default 'esm only';\n")
	c := newContext(t, Options{Language: JavaScript, Cwd: dir})
	runEach(t, c, []cellOut{
		{`const { setTimeout: wait } = await import("node:timers/promises"); await wait(1, "waited")`, "'waited'\n"},
		{`(await import("./m.mjs")).x`, "42\n"},
		{`(await import(` + "`" + dir + "/sub/n.mjs`" + `)).y`, "'abs'\n"},
		{`(await import("esmonly")).default`, "'esm only'\n"},
		{`(await import("./d.json", { with: { type: "json" } })).default.z`, "7\n"},
		{`globalThis.later = () => import("../m.mjs"); process.chdir("sub"); (await import("./n.mjs")).y`, "'abs'\n"},
		{`(await later()).x`, "42\n"},
	})
	r, _, errOut := run(t, c, `await import("./missing.mjs")`)
	require.Equal(t, 1, code(r))
	require.Contains(t, errOut, "ERR_MODULE_NOT_FOUND")
	require.NotContains(t, errOut, "driver")
	// As at Node's REPL, the referrer is "repl" in the directory (it was
	// "[cell]").
	sub := filepath.Join(dir, "sub")
	require.Contains(t, errOut, "Cannot find module '"+filepath.Join(sub, "missing.mjs")+"' imported from "+filepath.Join(sub, "repl")+"\n", errOut)
	runEach(t, c, []cellOut{{`await import("nopkg").catch((e) => console.log(e.message))`, "Cannot find package 'nopkg' imported from " + filepath.Join(sub, "repl") + "\n"}})
}

// TestLateRawWrites: raw writes to fds 1 and 2 (fs.writeSync, fs.write,
// fs.writev, fs.writeFileSync, a write stream on the fd) from a timer of a
// cell that has ended reach neither a later cell nor the interpreter's own
// output, while the running cell's own raw writes, also from its timers,
// stay in its log.
func TestLateRawWrites(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `const fs = require('fs');
globalThis.ticks = 0;
const ws = fs.createWriteStream(null, { fd: 1, autoClose: false });
setInterval(() => {
  fs.writeSync(1, 'tick\n');
  fs.writeSync(2, Buffer.from('tock\n'));
  fs.write(1, 'write\n', () => {});
  fs.writev(2, [Buffer.from('writev\n')], () => {});
  fs.writeFileSync(1, 'file\n');
  fs.appendFileSync(2, 'append\n');
  ws.write('stream\n');
  globalThis.ticks++;
}, 5);
undefined`)
	require.Equal(t, 0, code(r), errOut)
	// Ticks between cells.
	for range 3 {
		r, _, errOut = run(t, c, "{ const n = ticks; await new Promise(r => setTimeout(r, 1)); while (ticks < n + 3) await new Promise(r => setTimeout(r, 5)) }")
		require.Equal(t, 0, code(r), errOut)
	}
	r, out, errOut := run(t, c, `fs.writeSync(1, 'own\n');
const m = ticks;
await new Promise(r => setTimeout(() => { fs.writeSync(2, 'own timer\n'); r(); }, 1));
while (ticks < m + 10) await new Promise(r => setTimeout(r, 5));
'done'`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "own\n'done'\n", out)
	require.Equal(t, "own timer\n", errOut)
	require.NotContains(t, c.h.Diag().Tail(), "tick")
}

// TestContextDirRemoved: a JavaScript cell that removes its context's
// directory (the interrupting worker's socket in it) before the first
// await leaves later cells running, and interrupts still reach a pending
// await and a busy script. Before, the worker, which could not connect,
// never said it was up, and every cell after the first await waited for it
// for ever.
func TestContextDirRemoved(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, "require('fs').rmSync("+strconv.Quote(c.dir.Path())+", { recursive: true }); var kept = 1")
	require.Equal(t, 0, code(r), errOut)
	for _, tc := range []struct{ code, out string }{{"await null; 1", "1\n"}, {"2", "2\n"}} {
		r, out, errOut := run(t, c, tc.code)
		require.Equal(t, 0, code(r), errOut)
		require.Equal(t, tc.out, out)
	}
	interruptKeeps(t, c, CellOptions{Code: "await new Promise(r => setTimeout(r, 60000))\nkept = 2"})
	interruptKeeps(t, c, CellOptions{Code: "for(;;){}\nkept = 2"})
}

// TestLeftoverCallbackHoldsThread: a callback that a cell which ended by
// itself left behind, and that holds the thread (a busy loop in a timer),
// is ended as an interrupted cell's is once the next cell waits for the
// thread: the next cell runs, is not blamed, and the context lives on.
// Before, the next cell never started: it hung, or at its execution
// timeout ended timed_out with the context lost.
func TestLeftoverCallbackHoldsThread(t *testing.T) {
	t.Parallel()
	for name, cell := range map[string]string{
		"script": "setTimeout(() => { for(;;){} }, 300); var kept = 1",
		"await":  "await null; setTimeout(() => { for(;;){} }, 300); var kept = 1",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			looping := filepath.Join(t.TempDir(), "looping")
			r, _, errOut := run(t, c, strings.Replace(cell, "for(;;){}", "require('fs').writeFileSync("+strconv.Quote(looping)+", ''); for(;;){}", 1))
			require.Equal(t, 0, code(r), errOut)
			waitFile(t, looping)
			r, out, errOut := runOpts(t, c, CellOptions{Code: "kept + 1", ExecutionTimeout: 20 * time.Second})
			require.Equal(t, 0, code(r), "%+v %s", r, errOut)
			require.Equal(t, "2\n", out)
			interruptKeeps(t, c, CellOptions{Code: "for(;;){}\nkept = 2"})
		})
	}
}

// TestMicrotaskThrow: an error thrown in a queueMicrotask callback fails
// the cell with its message on stderr, as one thrown in a process.nextTick
// or a then callback does. The cell failed with an empty stderr: Node
// reports such a throw outside the callback, where no cell is named, and
// the message went the way of a callback of an ended cell.
func TestMicrotaskThrow(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `queueMicrotask(() => { throw new Error("micro") }); await null`)
	require.Equal(t, 1, processtest.Code(r), "%+v", r)
	require.Contains(t, errOut, "Error: micro")
}

// TestLateMicrotaskThrow: the throw of a queueMicrotask callback that a
// timer of an ended cell queued fails no later cell, as the throw of the
// timer itself would not; and what a cell's 'uncaughtException' listener
// prints of its own microtask's throw is that cell's output. Node reports
// such a throw outside any callback, where the driver took it for the
// running cell's, and the listener's output went nowhere.
func TestLateMicrotaskThrow(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `setTimeout(() => queueMicrotask(() => { throw new Error("late micro") }), 100); 1`)
	require.Equal(t, 0, code(r), errOut)
	r, out, errOut := run(t, c, `await new Promise(r => setTimeout(r, 600)); 2`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "2\n", out)
	require.Empty(t, errOut)
	r, out, errOut = run(t, c, `process.on("uncaughtException", e => console.log("caught:", e.message));
queueMicrotask(() => { throw new Error("own micro") }); await new Promise(r => setTimeout(r, 50)); 3`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "caught: own micro\n3\n", out)
	require.Empty(t, errOut)
}

// TestLateLibraryMicrotaskThrow: what holds for a cell's queueMicrotask
// holds for a module's, which runs in Node's own context and calls the
// queueMicrotask of that context, also one it kept from when it loaded:
// the throw of a callback that a timer of an ended cell had the module
// queue fails no later cell, and what a cell's 'uncaughtException' listener
// prints of its own is that cell's output; the error's stack, the
// module's frames too, has no frame of the driver. Node's queueMicrotask reports such a throw where no
// cell is named: the running cell failed with it, and the listener's output
// went nowhere.
func TestLateLibraryMicrotaskThrow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lib := filepath.Join(dir, "node_modules", "later")
	require.NoError(t, os.MkdirAll(lib, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "index.js"), []byte(`const q = queueMicrotask;
exports.later = (f, ms) => setTimeout(() => q(f), ms);
exports.now = (f) => queueMicrotask(f);
exports.fail = (m) => queueMicrotask(() => { throw new Error(m) });
`), 0o644))
	c := newContext(t, Options{Language: JavaScript, Cwd: dir})
	r, _, errOut := run(t, c, `const later = require("later"); later.later(() => { throw new Error("late lib micro") }, 100); 1`)
	require.Equal(t, 0, code(r), errOut)
	r, out, errOut := run(t, c, `await new Promise(r => setTimeout(r, 600)); 2`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "2\n", out)
	require.Empty(t, errOut)
	r, out, errOut = run(t, c, `process.on("uncaughtException", e => console.log("caught:", e.message, e.stack.includes("driver")));
later.fail("own lib micro"); await new Promise(r => setTimeout(r, 50)); 3`)
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "caught: own lib micro false\n3\n", out)
	require.Empty(t, errOut)
	r, _, errOut = run(t, c, `process.removeAllListeners("uncaughtException"); later.now(() => { throw new Error("failing micro") }); await null`)
	require.Equal(t, 1, code(r), "%+v %q", r, errOut)
	require.Contains(t, errOut, "Error: failing micro\n    at <cell 4>")
	require.NotContains(t, errOut, "driver")
	r, _, errOut = run(t, c, `later.fail("failing lib micro"); await null`)
	require.Equal(t, 1, code(r), "%+v %q", r, errOut)
	require.Contains(t, errOut, "Error: failing lib micro\n    at "+filepath.Join(lib, "index.js"))
	require.NotContains(t, errOut, "driver")
}

// TestAwaitRewriteBroken: a cell whose top-level await Node's REPL rewrite
// cannot rewrite, for an earlier cell broke what the rewrite calls in
// Node's own context (Function.prototype.call), fails saying so, with the
// rewrite's error; it failed with V8's "await is only valid in async
// functions", a SyntaxError the cell's text does not have. Once the cell
// puts it back, await works again.
func TestAwaitRewriteBroken(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, `require("vm").runInThisContext("globalThis.savedCall = Function.prototype.call; Function.prototype.call = function () { throw new Error('no call') }"); 1`)
	r, out, errOut := run(t, c, "await 1")
	require.Equal(t, 1, code(r), "%+v %q", r, errOut)
	require.Empty(t, out)
	require.NotContains(t, errOut, "SyntaxError")
	require.Contains(t, errOut, "rewrite of the cell's top-level await failed")
	r, _, errOut = run(t, c, `require("vm").runInThisContext("Function.prototype.call = savedCall"); 2`)
	require.Equal(t, 0, code(r), errOut)
	r, out, errOut = run(t, c, "await 3")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "3\n", out)
}

// TestAwaitWordInDeepText: a cell that has "await" only as a word (a
// string, part of a name) and nests deeper than the parser of Node's REPL
// rewrite can (a thousand arrays), which V8 compiles, runs: it failed,
// saying that the rewrite failed, though it has no await to rewrite.
func TestAwaitWordInDeepText(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	deep := strings.Repeat("[", 1500) + strings.Repeat("]", 1500)
	runEach(t, c, []cellOut{
		{"const awaiting = 1; const x = " + deep + "; x.length + awaiting", "2\n"},
		{"const y = " + deep + "; 'await'", "'await'\n"},
	})
	// A top-level await in such text still says that the rewrite failed.
	r, _, errOut := run(t, c, "const z = "+deep+"; await 1")
	require.Equal(t, 1, code(r))
	require.Contains(t, errOut, "rewrite of the cell's top-level await failed")
}

// TestWorkerOpensFiles: a worker thread that opens and closes files all the
// while does not end the context: an open of its may take fd 0, 1 or 2 as
// the driver puts a cell's streams there, and the driver then waits for it
// to close it. It took that for the driver's own failure, and the context
// ended within a few dozen cells.
func TestWorkerOpensFiles(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, `const { Worker } = require("worker_threads");
globalThis.w = new Worker('const fs = require("fs"); for (;;) fs.closeSync(fs.openSync("/dev/null", "r"))', { eval: true }); 0`)
	require.Equal(t, 0, processtest.Code(r), errOut)
	for i := range 150 {
		r, out, errOut := run(t, c, strconv.Itoa(i))
		// The interpreter's own output says why, should it abort.
		require.Equal(t, 0, processtest.Code(r), "cell %d: %+v %s; the interpreter's own output: %s", i, r, errOut, c.h.Diag().Tail())
		require.Equal(t, strconv.Itoa(i)+"\n", out)
	}
	run(t, c, "w.terminate()")
}

// TestWorkersStartAsStreamsArePlaced: workers that cells start come up on
// threads of their own, each making its event loop's files as the driver
// puts the next streams on fds 0 to 2; one took such a number for good, and
// Node aborted the process as that worker's loop closed it (or the driver
// gave up on its streams), within a few dozen cells.
func TestWorkersStartAsStreamsArePlaced(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for i := range 30 {
		r, out, errOut := run(t, c, `{ const { Worker } = require("worker_threads"); for (let k = 0; k < 4; k++) new Worker("setTimeout(() => {}, 100)", { eval: true }) } `+strconv.Itoa(i))
		require.Equal(t, 0, processtest.Code(r), "cell %d: %+v %s; the interpreter's own output: %s", i, r, errOut, c.h.Diag().Tail())
		require.Equal(t, strconv.Itoa(i)+"\n", out)
	}
}

// TestInterruptWhileWorkersStart: a cell sent while the driver waits for a
// worker an earlier cell started to come online (5 s at most) is
// interrupted at once, before it runs, and ends as an interrupted cell
// does; the worker here is held before it is up until the test opens its
// gate. The interrupt waited for the cell to start, after the driver's wait,
// and the cell ran.
func TestInterruptWhileWorkersStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pre, gate := filepath.Join(dir, "pre.js"), filepath.Join(dir, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	require.NoError(t, os.WriteFile(pre, []byte("require('fs').readFileSync("+strconv.Quote(gate)+");\n"), 0o644))
	c := newContext(t, Options{Language: JavaScript})
	runEach(t, c, []cellOut{{`const { Worker } = require("worker_threads");
globalThis.w = new Worker("0", { eval: true, execArgv: ["--require", ` + strconv.Quote(pre) + `] }); 0`, "0\n"}})
	cell, err := c.Submit(CellOptions{Code: "globalThis.ran = true"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	for cell.state() == process.Starting {
		select {
		case <-ctx.Done():
			t.Fatal("the cell was never sent")
		case <-time.After(time.Millisecond):
		}
	}
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, cell)
	out, errOut := output(cell)
	require.Equal(t, process.Signaled, r.Reason, "%+v %q %q", r, out, errOut)
	require.Equal(t, "INT", r.Signal, "%+v", r)
	require.Empty(t, out)
	require.Equal(t, "Error: Script execution was interrupted by `SIGINT`\n", errOut)
	// The worker comes online once its gate opens, as soon as the worker
	// has it open to read, and the next cell runs.
	for {
		f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			require.NoError(t, f.Close())
			break
		}
		require.ErrorIs(t, err, syscall.ENXIO) // no reader yet
		select {
		case <-ctx.Done():
			t.Fatal("the worker never opened its gate")
		case <-time.After(10 * time.Millisecond):
		}
	}
	runEach(t, c, []cellOut{{"typeof ran", "'undefined'\n"}})
}

// TestWorkerListenersRemoved: a worker whose listeners a cell removed, or
// whose subclass's on ignores 'online' and 'exit', is still known to be up
// or gone: the driver noted it until it heard them, and every later cell
// waited twice for the driver's 5 s bound (10 s a cell, each past a 4 s
// execution timeout here) for a worker long gone.
func TestWorkerListenersRemoved(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for _, started := range []string{
		`new (require("worker_threads").Worker)("setTimeout(() => {}, 100)", { eval: true }).removeAllListeners()`,
		`new (class extends require("worker_threads").Worker { on(ev, fn) { return ev === "online" || ev === "exit" ? this : super.on(ev, fn) } })("0", { eval: true })`,
	} {
		r, _, errOut := run(t, c, started+`; 0`)
		require.Equal(t, 0, code(r), "%s: %+v %s", started, r, errOut)
		for i := range 2 {
			r, out, errOut := runOpts(t, c, CellOptions{Code: strconv.Itoa(i), ExecutionTimeout: 4 * time.Second})
			require.Equal(t, 0, code(r), "cell %d after %s: %+v %s", i, started, r, errOut)
			require.Equal(t, strconv.Itoa(i)+"\n", out)
		}
	}
}

// TestAwaitCellEndsWithComment: a cell that awaits at its top level and
// whose last line is a // comment runs, as at Node's REPL: the rewrite
// that makes its await legal closed its function after the text, inside
// the comment, and the cell was a SyntaxError.
func TestAwaitCellEndsWithComment(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for _, cell := range []string{"await 1; 42 // c", "const r = await Promise.resolve(42)\n// done"} {
		r, _, errOut := run(t, c, cell)
		require.Equal(t, 0, code(r), "%q: %+v, stderr %q", cell, r, errOut)
	}
	_, out, _ := run(t, c, "r")
	require.Equal(t, "42\n", out)
}

// TestPromiseThenReplaced: a cell that replaces Promise.prototype.then
// changes its own promises only: a later cell that awaits still ends with
// its value. The driver waited for a cell's promise through its then, and
// every later cell that awaited hung.
func TestPromiseThenReplaced(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	run(t, c, "Promise.prototype.then = function () { return this }; 1")
	for range 2 {
		r, out, errOut := run(t, c, "await 1; 12")
		require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
		require.Equal(t, "12\n", out)
	}
}

// TestJavaScriptCwdNotTheCells: the directory a cell's result reports is
// the interpreter's, whatever the cell made process.cwd return (it was
// that).
func TestJavaScriptCwdNotTheCells(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	dir := t.TempDir()
	r, _, errOut := run(t, c, `process.cwd = () => "/nonexistent\nfake"; process.chdir(`+strconv.Quote(dir)+`)`)
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, dir, r.Cwd)
}

// TestJavaScriptAwaitOfParenthesized: a top-level await of a parenthesized
// or bracketed expression is an await, as at the REPL; it is also a script
// calling (or indexing) a variable named await, and it ran as one, throwing
// "await is not defined". A cell whose only await is inside a function is
// still a script: its let stays in the context's global scope.
func TestJavaScriptAwaitOfParenthesized(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	runEach(t, c, []cellOut{
		{`(await (async () => 8)())`, "8\n"},
		{`await (new Function("return 9"))()`, "9\n"},
		{`await [Promise.resolve(10)][0]`, "10\n"},
		{`let kept = 11; async function f() { return await kept }`, ""},
		{`kept`, "11\n"},
	})
}

// TestJavaScriptEmitNotTheCells: a cell that replaces process.emit, with a
// function that drops every event or one that throws, leaves the driver
// working: an exception a later cell's timer throws, or a promise it leaves
// rejected, fails that cell, the worker the driver starts for a cell that
// awaits is started, and the context lives on, the cell's process.emit
// still its own. Node calls process.emit to report an uncaught exception
// (and to tell of a new worker): the interpreter ended between cells, or
// under a later cell that threw, with no reason given.
func TestJavaScriptEmitNotTheCells(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, emit, rejected string }{
		{"drops", "() => false", "rejected"},
		// Node reports the rejection through process.emit: what it threw
		// fails the cell.
		{"throws", `function () { throw new Error("emit broken") }`, "emit broken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newContext(t, Options{Language: JavaScript})
			r, _, errOut := run(t, c, "process.emit = globalThis.kept = "+tc.emit+"; setTimeout(() => {}, 10); 1")
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			r, out, errOut := run(t, c, "await new Promise(r => setTimeout(r, 50)); 2")
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			require.Equal(t, "2\n", out)
			r, _, errOut = run(t, c, `setTimeout(() => { throw new Error("boom") }, 10); await new Promise(r => setTimeout(r, 200)); 3`)
			require.Equal(t, 1, code(r), "%+v %q", r, errOut)
			require.Contains(t, errOut, "boom")
			r, _, errOut = run(t, c, `Promise.reject(new Error("rejected")); await new Promise(r => setTimeout(r, 50)); 4`)
			require.Equal(t, 1, code(r), "%+v %q", r, errOut)
			require.Contains(t, errOut, tc.rejected)
			r, out, errOut = run(t, c, "process.emit === kept")
			require.Equal(t, 0, code(r), "%+v %q", r, errOut)
			require.Equal(t, "true\n", out)
		})
	}
}

// TestJavaScriptAbort: a cell that calls process.abort() ends the
// interpreter: the cell is lost, saying SIGABRT killed the interpreter,
// with the output it wrote before and, on its stderr, its own frames of the
// JavaScript stack; the context ends signaled ABRT. Node's native stack and
// the driver's frames, which it wrote on the cell's stderr, go where only
// the engine reads.
func TestJavaScriptAbort(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, out, errOut := run(t, c, `console.log("before");
function crash() { process.abort() }
crash()`)
	require.Equal(t, process.Lost, r.Reason, "%+v", r)
	require.Equal(t, "the context's interpreter was killed by SIGABRT", r.Error)
	require.Equal(t, "before\n", out)
	require.Equal(t, "----- JavaScript stack trace -----\n\n1: crash (<cell 1>:2:28)\n2: <cell 1>:3:1\n\n", errOut)
	ended := wait(t, c)
	require.Equal(t, process.Signaled, ended.Reason, "%+v", ended)
	require.Equal(t, "ABRT", ended.Signal)
}

// TestJavaScriptGlobalsSetNotTheDrivers: a cell that assigns one of Node's
// globals that have a setter (process, Buffer, a web class loaded lazily)
// changes it for the cells, not for the driver: process = 1 replaced the
// driver's process too, and ended the context at its next call.
func TestJavaScriptGlobalsSetNotTheDrivers(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, _, errOut := run(t, c, "process = 1; Buffer = 2; TextEncoder = 3; globalThis.performance = 4")
	require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
	r, out, errOut := run(t, c, "console.log(process, Buffer, TextEncoder, performance); 5")
	require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
	require.Equal(t, "1 2 3 4\n5\n", out)
	r, out, errOut = run(t, c, "delete globalThis.process; typeof process")
	require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
	require.Equal(t, "'undefined'\n", out)
}

// TestJavaScriptGlobalIsTheContexts: a cell's global is its context's
// globalThis, as at Node's REPL: it was the driver's, so global.foo = 1 made
// no foo, and global.process = … or global.JSON = undefined replaced the
// driver's own and lost the context at the next cell.
func TestJavaScriptGlobalIsTheContexts(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	runEach(t, c, []cellOut{
		{"[global === globalThis, globalThis.global === globalThis, global.global === global]", "[ true, true, true ]\n"},
		{"global.foo = 1", "1\n"},
		{"foo", "1\n"},
		{`global.process = { ...process, env: { FAKE: "1" } }; "mocked"`, "'mocked'\n"},
		{"process.env.FAKE", "'1'\n"},
		{"global.Buffer = 2; global.Promise = undefined; global.JSON = undefined; global.Object = undefined; global.Error = undefined; 3", "3\n"},
		{"[Buffer, typeof Promise, typeof JSON, typeof Object, typeof Error]", "[ 2, 'undefined', 'undefined', 'undefined', 'undefined' ]\n"},
		{"global = 4; global", "4\n"},
		{"1 + 1", "2\n"},
	})
}

// TestJavaScriptNoMainModule: as at Node's REPL, a cell sees no main module
// and the driver as no module: require.cache listed the driver's file
// (/dev/shm/conch-code-N/driver.js), and process.mainModule, and
// require.main in a module a cell required, were the driver's module.
func TestJavaScriptNoMainModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "m.js"), []byte("exports.main = require.main;\n"), 0o644))
	c := newContext(t, Options{Language: JavaScript, Cwd: dir})
	runEach(t, c, []cellOut{
		{"Object.keys(require.cache)", "[]\n"},
		{"[process.mainModule, 'mainModule' in process, require.main]", "[ undefined, false, undefined ]\n"},
		{"[require('./m.js').main, Object.keys(require.cache).length]", "[ undefined, 1 ]\n"},
	})
}

// TestJavaScriptCryptoGlobal: crypto, a global getter without a setter in
// Node 20 that refuses any this but Node's global, works in a cell as at
// Node's REPL: every read threw ERR_INVALID_THIS. An assignment to it
// changes nothing, as at the REPL (sloppy mode), neither for the cells nor
// for the driver, whose later cells run on.
func TestJavaScriptCryptoGlobal(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	if _, out, _ := run(t, c, "typeof Object.getOwnPropertyDescriptor(require('vm').runInThisContext('globalThis'), 'crypto')?.get"); out != "'function'\n" {
		t.Skip("no global crypto getter in this Node")
	}
	runEach(t, c, []cellOut{
		{"crypto.randomUUID().length", "36\n"},
		{"crypto = 1", "1\n"},
		{"[typeof crypto, crypto === require('crypto').webcrypto]", "[ 'object', true ]\n"},
		{"await null; crypto.getRandomValues(new Uint8Array(3)).length", "3\n"},
		{"Object.getOwnPropertyDescriptor(globalThis, 'crypto').get.name", "'get crypto'\n"},
	})
}

// TestJavaScriptArgv: a cell's process.argv is node's path alone, as at
// Node's REPL; it held the driver's file and its control socket's path,
// which util.parseArgs refused as an unexpected positional. The driver
// still finds its socket: a cell after an await, which the interruptor
// worker (that connects to it) ends, is interrupted.
func TestJavaScriptArgv(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, out, errOut := run(t, c, `[process.argv.length, process.argv[0] === process.execPath, require("util").parseArgs({ options: {} }).positionals]`)
	require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
	require.Equal(t, "[ 1, true, [] ]\n", out)
	require.Empty(t, errOut)
	interruptRunning(t, c, CellOptions{Code: "await 0; for(;;){}"})
	r, out, errOut = run(t, c, "process.argv.length + 1")
	require.Equal(t, 0, code(r), "%+v, stderr %q", r, errOut)
	require.Equal(t, "2\n", out)
}

// TestJavaScriptExitListenerThrows: process.exit in a cell ends the context
// when an 'exit' listener throws, as it ends plain node: the listener's
// error on the cell's stderr, the status node exits with (the code asked
// for, process.exitCode if the listener set one, 1 when neither is). The
// throw came out of process.exit into the cell, which ended with 1 and left
// the context running. A listener that never ends is stopped by the cell's
// timeout, and the exit goes on.
func TestJavaScriptExitListenerThrows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ listener, exit string }{
		{"throw new Error('listener')", "process.exit(0)"},
		{"throw new Error('listener')", "process.exit(3)"},
		{"throw new Error('listener')", "process.exit()"},
		{"process.exitCode = 5; throw new Error('listener')", "process.exit(2)"},
		{"require('fs').unlinkSync(tmp)", "process.exit(0)"}, // the file is gone already
		{"throw new Error('listener')", "await null; process.exit(3)"},
		{"throw new Error('listener')", "setTimeout(() => process.exit(3)); await new Promise((r) => setTimeout(r, 10000))"},
	} {
		t.Run(tc.listener+"/"+tc.exit, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			set := "const tmp = 'x.tmp'; require('fs').writeFileSync(tmp, 'x');\n" +
				"process.on('exit', () => { " + tc.listener + " }); require('fs').unlinkSync(tmp); 'set'"
			end := "console.log('finishing'); " + tc.exit
			cmd := exec.Command("node", "-e", set+";\n(async () => { "+end+" })()")
			cmd.Dir = dir
			want := exitCode(t, cmd)
			c := newContext(t, Options{Language: JavaScript, Cwd: dir})
			r, _, errOut := run(t, c, set)
			require.Equal(t, 0, code(r), errOut)
			r, out, errOut := run(t, c, end)
			require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
			require.Equal(t, want, code(r), errOut)
			require.Equal(t, "finishing\n", out)
			require.Contains(t, errOut, map[bool]string{true: "listener", false: "ENOENT"}[strings.Contains(tc.listener, "listener")])
			require.NotContains(t, errOut, "driver")
			endsWithin(t, c)
			require.Equal(t, want, code(*c.Info().Result))
		})
	}
	t.Run("never ends", func(t *testing.T) {
		t.Parallel()
		c := newContext(t, Options{Language: JavaScript})
		r, _, errOut := runOpts(t, c, CellOptions{Code: "process.on('exit', () => { for (;;) {} }); process.exit(0)", ExecutionTimeout: 300 * time.Millisecond})
		require.Equal(t, process.TimedOut, r.Reason, "%+v %q", r, errOut)
		require.NotContains(t, errOut, "debugger")
		endsWithin(t, c)
		require.Equal(t, 130, code(*c.Info().Result))
	})
}

// TestJavaScriptExitWhileWorkerStarts: a cell that exits as a worker thread
// starts ends the context with its status. The driver closed fd 2 on the
// way out and opened /dev/null in its place; a worker that made its event
// loop meanwhile took the number, and Node aborted the process as it ended
// that loop (libuv closes no fd below 3): the cell was lost to SIGABRT, as
// one that awaited, and so started the driver's own worker, and then
// exited was now and then. The cell starts its worker as fd 2 closes, and
// waits for the worker to take it.
func TestJavaScriptExitWhileWorkerStarts(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	r, out, errOut := run(t, c, `const { Worker } = require("worker_threads");
const fs = require("fs");
const b = require("internal/test/binding").internalBinding("fs");
const close = b.close;
b.close = function (fd, ...rest) {
  const r = Reflect.apply(close, this, [fd, ...rest]);
  if (fd === 2) {
    new Worker("setInterval(() => {}, 1000)", { eval: true });
    const nap = new Int32Array(new SharedArrayBuffer(4));
    for (let i = 0; i < 5000; i++) {
      try { fs.readlinkSync("/proc/self/fd/2"); break; } catch {}
      Atomics.wait(nap, 0, 0, 1);
    }
  }
  return r;
};
console.log("exiting"); process.exit(3)`)
	require.Equal(t, process.Exited, r.Reason, "%+v %q", r, errOut)
	require.Equal(t, 3, code(r), errOut)
	require.Equal(t, "exiting\n", out)
	endsWithin(t, c)
	require.Equal(t, 3, code(*c.Info().Result))
}

// endsWithin waits for c to end, failing t after deadline.
func endsWithin(t *testing.T, c *Context) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(deadline):
		t.Fatalf("the context did not end: %+v", c.Info())
	}
}

// TestAwaitCellSyntaxError: a cell with a top-level await whose text does
// not parse after it reports its own syntax error, where it is, as the
// REPL does, and never runs. It was reported as "await is only valid in
// async functions", the caret under the await: the rewrite that makes its
// await legal failed, and the text was compiled as it is. An await in a
// function that is not async still says so.
func TestAwaitCellSyntaxError(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	for _, tc := range []struct{ cell, stderr string }{
		{"globalThis.ran = 1; await 0;\nlet y9 = ;", "<cell 1>:2\nlet y9 = ;\n         ^\n\nSyntaxError: Unexpected token ';'\n"},
		{"await 0; f(", "<cell 2>:1\nawait 0; f(\n           ^\n\nSyntaxError: Unexpected end of input\n"},
		{"let z = 1;\nawait 0; const z = 2", "<cell 3>:2\nawait 0; const z = 2\n               ^\n\nSyntaxError: Identifier 'z' has already been declared\n"},
		{"await 0; function g() { await 1 }", "<cell 4>:1\nawait 0; function g() { await 1 }\n                        ^^^^^\n\nSyntaxError: await is only valid in async functions and the top level bodies of modules\n"},
	} {
		r, out, errOut := run(t, c, tc.cell)
		require.Equal(t, 1, code(r), "%q: %+v", tc.cell, r)
		require.Empty(t, out, tc.cell)
		require.Equal(t, tc.stderr, errOut, tc.cell)
	}
	r, out, errOut := run(t, c, "typeof ran")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "'undefined'\n", out)
}

// TestJavaScriptOwnExceptionListeners: an exception or a rejection that a
// cell's own 'uncaughtException' or 'unhandledRejection' listener handles
// (one an earlier cell added too) fails no cell, as it ends no plain node
// program; a rejection no 'unhandledRejection' listener handles goes to the
// 'uncaughtException' listeners, as in plain node. Without such a listener
// the cell fails as before. The listener ran, and the cell failed all the
// same, with the traceback on its stderr.
func TestJavaScriptOwnExceptionListeners(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	const later = "await new Promise(r => setTimeout(r, 20))"
	for _, s := range []struct {
		cell, stdout, failure string
	}{
		{`process.on("unhandledRejection", e => console.log("handled:", e.message)); Promise.reject(new Error("r1")); 1`, "1\nhandled: r1\n", ""},
		{`await 0; Promise.reject(new Error("r2")); 2`, "2\nhandled: r2\n", ""},
		{`process.removeAllListeners("unhandledRejection"); Promise.reject(new Error("r3")); 3`, "3\n", "Error: r3"},
		{`process.on("uncaughtException", (e, origin) => console.log("caught:", e.message, origin)); setTimeout(() => { throw new Error("u1") }); ` + later, "caught: u1 uncaughtException\n", ""},
		{`Promise.reject(new Error("r4")); ` + later, "caught: r4 unhandledRejection\n", ""},
		{`process.removeAllListeners("uncaughtException"); 0`, "0\n", ""},
		{`setTimeout(() => { throw new Error("u2") }); ` + later, "", "Error: u2"},
		{`process.once("uncaughtException", e => console.log("once:", e.message)); setTimeout(() => { throw new Error("u3") }); ` + later, "once: u3\n", ""},
		{`Promise.reject(new Error("r5")); 5`, "5\n", "Error: r5"},
	} {
		r, out, errOut := run(t, c, s.cell)
		require.Equal(t, s.stdout, out, s.cell)
		if s.failure == "" {
			require.Equal(t, 0, code(r), "%q: %+v %q", s.cell, r, errOut)
			require.Empty(t, errOut, s.cell)
		} else {
			require.Equal(t, 1, code(r), "%q: %+v", s.cell, r)
			require.Contains(t, errOut, s.failure, s.cell)
		}
	}
}

// TestJavaScriptExecArgv: the node flags the driver needs are not a
// cell's: process.execArgv is empty, as in a plain node program, and a
// child_process.fork child does not inherit them. Both had
// --expose-internals, --no-memory-reducer and --experimental-vm-modules.
func TestJavaScriptExecArgv(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: JavaScript})
	child := filepath.Join(t.TempDir(), "child.js")
	require.NoError(t, os.WriteFile(child, []byte("console.log(JSON.stringify(process.execArgv))"), 0o600))
	r, out, errOut := run(t, c, "console.log(JSON.stringify(process.execArgv));\nawait new Promise((r) => require('child_process').fork("+strconv.Quote(child)+", { stdio: 'inherit' }).on('exit', r))")
	require.Equal(t, 0, code(r), "%+v %q", r, errOut)
	require.Equal(t, "[]\n[]\n0\n", out) // the cell shows the exit code it awaited
}

// TestJavaScriptReplModule: a cell's module and require are as Node's
// REPL makes them: the module is "<repl>" with no file, which a module a
// cell requires sees as its parent and a failing require names in its
// "Require stack" (both were "<cwd>/[cell]"), and require.resolve.paths
// is there; there is no global exports (cells had module.exports there). Unlike the REPL's, they look from the current directory,
// also after a chdir, and module.paths follows it.
func TestJavaScriptReplModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"sub/m.js": "console.log(module.parent.id, module.parent.filename);\ntry { require('./nonexistent') } catch (e) { console.log(JSON.stringify(e.requireStack)) }\n",
		"a/x.js":   "module.exports = 'a';\n",
		"b/x.js":   "module.exports = 'b';\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	j := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	c := newContext(t, Options{Language: JavaScript, Cwd: dir})
	runEach(t, c, []cellOut{
		// As at the REPL, module and require are globals and exports is not.
		{"[typeof exports, typeof module, typeof require, 'exports' in globalThis]", "[ 'undefined', 'object', 'function', false ]\n"},
		{"console.log(JSON.stringify([module.id, module.filename, module.loaded, module.path, module.paths[0]]))",
			`["<repl>",null,false,".",` + j(filepath.Join(dir, "node_modules")) + "]\n"},
		{"console.log(JSON.stringify([Object.keys(require), require.main, require.resolve.paths('./x'), require.resolve.paths('x')[0]]))",
			`[["resolve","main","extensions","cache"],null,["."],` + j(filepath.Join(dir, "node_modules")) + "]\n"},
		{"require('./sub/m.js'); void 0", "<repl> null\n" + `[` + j(filepath.Join(dir, "sub/m.js")) + `,"<repl>"]` + "\n"},
		{"try { require('./nope') } catch (e) { console.log(e.message) }", "Cannot find module './nope'\nRequire stack:\n- <repl>\n"},
		{"process.chdir('a'); module.paths.push('/extra'); require('./x')", "'a'\n"},
		{"process.chdir('../b'); console.log(JSON.stringify([require('./x'), require.resolve('./x'), module.paths[0], module.paths.includes('/extra'), module.path]))",
			`["b",` + j(filepath.Join(dir, "b/x.js")) + "," + j(filepath.Join(dir, "b/node_modules")) + `,true,"."]` + "\n"},
		{"module.children.length", "3\n"},
	})
}
