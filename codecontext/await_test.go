package codecontext

import (
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/processtest"
	"github.com/conchsh/conch/process"
)

// TestPythonTopLevelAwait: a Python cell may await at its top level, as in
// IPython: its value is the awaited one, the statements before an await run
// in the event loop too, and the loop lives from cell to cell. A cell
// without await runs outside it (asyncio.run works there). Before, every
// such cell was "SyntaxError: 'await' outside function".
func TestPythonTopLevelAwait(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	for _, s := range []step{
		{code: "import asyncio\nx = await asyncio.sleep(0, result=5)\nx + 1", stdout: "6\n"},
		{code: "x", stdout: "5\n"},
		{code: "async def f():\n    return 3\nawait f()", stdout: "3\n"},
		{code: "t = asyncio.create_task(asyncio.sleep(0, result=7))\nawait t", stdout: "7\n"},
		{code: "asyncio.run(f())", stdout: "3\n"},
		{code: "import contextlib\nasync with contextlib.AsyncExitStack():\n    y = await f()\n[i async for i in (lambda: (yield_ async for yield_ in []))()] if False else y", stdout: "3\n"},
		{code: "await asyncio.to_thread(print, 'from a thread')", stdout: "from a thread\n"},
		{code: "await asyncio.to_thread(print, 'from it again')", stdout: "from it again\n"},
	} {
		r, out, errOut := run(t, c, s.code)
		require.Equal(t, 0, code(r), "%q: %s", s.code, errOut)
		require.Equal(t, s.stdout, out, s.code)
		require.Empty(t, errOut, s.code)
	}

	// An exception shows the cell's frames, none of the loop that ran it.
	r, out, errOut := run(t, c, "async def boom():\n    raise ValueError('inside')\nawait boom()")
	require.Equal(t, 1, code(r))
	require.Empty(t, out)
	require.True(t, strings.HasPrefix(errOut, "Traceback (most recent call last):\n  File \"<cell 9>\", line 3, in <module>\n"), errOut)
	require.True(t, strings.HasSuffix(errOut, "ValueError: inside\n"), errOut)
	require.NotContains(t, errOut, "asyncio")
	require.NotContains(t, errOut, "driver")
}

// TestPythonAwaitLeftTask: a task a cell left running goes on while later
// cells await, but what it prints reaches no later cell, as a thread's of
// an ended cell does not.
func TestPythonAwaitLeftTask(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import asyncio
ticks = 0
async def tick():
    global ticks
    while True:
        ticks += 1
        print('tick', flush=True)
        await asyncio.sleep(0.02)
t = asyncio.create_task(tick())
await asyncio.sleep(0.05)`)
	require.Equal(t, 0, code(r), errOut)
	require.Contains(t, out, "tick\n")
	r, out, errOut = run(t, c, "before = ticks\nawait asyncio.sleep(0.3)\nticks > before")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "True\n", out, "the task went on, and printed nothing here")
	r, out, _ = run(t, c, "t.cancel()")
	require.Equal(t, 0, code(r))
	require.Equal(t, "True\n", out)
}

// TestPythonAwaitInterrupt: an interrupt ends a cell that awaits, which is
// cancelled (its finally runs), and the next cell awaits on the same loop.
func TestPythonAwaitInterrupt(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	cell, err := c.Submit(CellOptions{Code: `import asyncio
async def long():
    try:
        print('waiting', flush=True)
        await asyncio.sleep(30)
    finally:
        print('cleaned up', flush=True)
await long()`})
	require.NoError(t, err)
	waitStarted(t, cell)
	// Once the line is whole: an interrupt between print's two writes
	// would cut it.
	require.Eventually(t, func() bool { out, _ := output(cell); return out == "waiting\n" }, deadline, 10e6)
	require.NoError(t, cell.Kill(syscall.SIGINT, 0, 0))
	r := wait(t, cell)
	require.Equal(t, process.Signaled, r.Reason)
	out, errOut := output(cell)
	require.Equal(t, "waiting\ncleaned up\n", out)
	// "KeyboardInterrupt" alone when it came as the loop waited, after the
	// cell's frames when it came as the cell's code ran on (with those of
	// asyncio.sleep's own code under them, when it came as sleep set its
	// timer): never the frames of the loop the driver runs the cell in.
	require.True(t, strings.HasSuffix(errOut, "KeyboardInterrupt\n"), errOut)
	for _, loops := range []string{"run_until_complete", "run_forever", "_run_once", "selectors.py", "driver"} {
		require.NotContains(t, errOut, loops)
	}
	r, out, errOut = run(t, c, "await asyncio.sleep(0, result='next')")
	require.Equal(t, 0, code(r), errOut)
	require.Equal(t, "'next'\n", out)
}

// TestPythonTooDeepToCompile: a cell nested too deep for Python's parser
// or compiler is text that does not compile: exit 1, the language's
// message, and the context goes on. The RecursionError it raised was taken
// for the driver's own failure, which ended the context.
func TestPythonTooDeepToCompile(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, _, errOut := run(t, c, "1"+strings.Repeat("+1", 5000))
	require.Equal(t, 1, processtest.Code(r), "%+v, stderr %q", r, errOut)
	require.Contains(t, errOut, "RecursionError")
	_, out, _ := run(t, c, "print('after')")
	require.Equal(t, "after\n", out)
}

// TestPythonPoolWorkIsItsCells: work a cell submits to a thread pool (the
// loop's default executor, or one an earlier cell made) runs as that
// cell's, on a worker thread an earlier cell started: its output is the
// cell's own. A worker belonged to the cell that started it, and the later
// cell's work printed nothing.
func TestPythonPoolWorkIsItsCells(t *testing.T) {
	t.Parallel()
	c := newContext(t, Options{Language: Python})
	r, out, errOut := run(t, c, `import asyncio, concurrent.futures
pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(print, "cell1 pool").result()
await asyncio.get_running_loop().run_in_executor(None, print, "cell1 loop")`)
	require.Equal(t, 0, processtest.Code(r), errOut)
	require.Equal(t, "cell1 pool\ncell1 loop\n", out)
	r, out, errOut = run(t, c, `pool.submit(print, "cell2 pool").result()
await asyncio.get_running_loop().run_in_executor(None, print, "cell2 loop")`)
	require.Equal(t, 0, processtest.Code(r), errOut)
	require.Equal(t, "cell2 pool\ncell2 loop\n", out)
}
