import asyncio
import gc
import http.client
import threading
import time
import unittest
from urllib.parse import urlsplit

from conch import NotFoundError
from conch.aio import AsyncCodeContext, AsyncProcessHandle, AsyncSandbox

from .daemon import shared
from .proxy import CuttingProxy


class AsyncTest(unittest.TestCase):
    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 120))

    def test_event_loop_runs_while_a_command_runs(self) -> None:
        async def main() -> int:
            sandbox = AsyncSandbox(shared().url, shared().token)
            ticks = 0
            stop = asyncio.Event()

            async def ticker() -> None:
                nonlocal ticks
                while not stop.is_set():
                    ticks += 1
                    await asyncio.sleep(0.01)

            t = asyncio.ensure_future(ticker())
            async with await sandbox.process.create_session() as s:
                before = ticks
                r = await s.run("sleep 1; echo slept")
                during = ticks - before
            stop.set()
            await t
            await sandbox.close()
            self.assertEqual((r.exit_code, r.stdout), (0, "slept\n"))
            return during

        during = self.run_async(main())
        # A blocked loop would not tick at all during the second of sleep.
        self.assertGreater(during, 5)

    def test_surface(self) -> None:
        async def main() -> None:
            sandbox = AsyncSandbox(shared().url, shared().token)
            r = await sandbox.exec("echo hi; exit 2")
            self.assertEqual((r.exit_code, r.stdout), (2, "hi\n"))
            h = await sandbox.process.start("seq 1 3")
            w = await h.wait(timeout=30)
            self.assertEqual(w.exit_code, 0)
            events = [e async for e in h.stream_logs()]
            self.assertEqual("".join(e.frame.data for e in events if e.type == "log" and e.frame), "1\n2\n3\n")
            page = await h.logs()
            self.assertEqual(len(page.items) >= 1, True)
            h2 = await sandbox.process.start("cat", stdin="open")
            a = await h2.interact("x\n", eof=True, timeout=30)
            self.assertEqual(a.stdout, "x\n")
            async with await sandbox.process.create_context(language="python") as ctx:
                self.assertIsInstance(ctx, AsyncCodeContext)
                await ctx.run("v = 41")
                self.assertEqual((await ctx.run("v + 1")).stdout, "42\n")
            with self.assertRaises(NotFoundError):
                await sandbox.process.get("nope")
            await sandbox.close()

        self.run_async(main())


class AsyncCancelTest(unittest.TestCase):
    """A cancelled call ends its blocking work at once and leaves no thread or connection behind."""

    def test_cancelled_runs_end_their_threads_and_later_calls_work(self) -> None:
        sandbox = AsyncSandbox(shared().url, shared().token)
        pids = []

        async def main() -> float:
            for _ in range(40):  # more than the default executor's threads
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(sandbox.exec("sleep 8"), 0.05)
            started = time.monotonic()
            await asyncio.wait_for(sandbox.health(), 5)
            for p in (await sandbox.process.list(state="running")).items:
                if p.shell_command == "sleep 8":
                    pids.append(p.id)
            return time.monotonic() - started

        started = time.monotonic()
        took = asyncio.run(asyncio.wait_for(main(), 60))
        whole = time.monotonic() - started
        self.assertLess(took, 2, "a call after the cancellations waited for a thread")
        self.assertLess(whole, 6, "asyncio.run() waited for the cancelled calls' threads")
        deadline = time.monotonic() + 3
        while any(t.name == "conch-aio" for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([t.name for t in threading.enumerate() if t.name == "conch-aio"], [])
        for conn in sandbox.transport._idle:
            self.assertIsNotNone(conn.sock, "a cancelled call's connection went back to the pool")
        # The commands themselves go on: cancelling a call is not killing its command.
        sync = shared().sandbox()
        self.addCleanup(sync.close)
        for pid in pids:
            sync.process.connect(pid).kill("KILL")
        self.assertGreater(len(pids), 0)
        sandbox._sync.close()

    def test_cancelled_stream_raises_timeout_and_quiet_streams_do_not_starve_calls(self) -> None:
        async def main() -> None:
            sandbox = AsyncSandbox(shared().url, shared().token)
            quiet = [await sandbox.process.start("sleep 30") for _ in range(40)]

            async def follow(h: AsyncProcessHandle) -> None:
                async for _ in h.stream_logs():
                    pass

            followers = [asyncio.ensure_future(follow(h)) for h in quiet]
            await asyncio.sleep(0.5)
            await asyncio.wait_for(sandbox.health(), 5)  # 40 quiet followers hold no shared thread
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(follow(quiet[0]), 0.5)
            for f in followers:
                f.cancel()
            results = await asyncio.gather(*followers, return_exceptions=True)
            self.assertTrue(all(isinstance(r, asyncio.CancelledError) for r in results), results)
            for h in quiet:
                await h.kill("KILL")
            await sandbox.close()

        started = time.monotonic()
        asyncio.run(asyncio.wait_for(main(), 60))
        self.assertLess(time.monotonic() - started, 15)

    def test_stream_resumed_many_times_holds_no_closed_connection(self) -> None:
        # Each resume of a stream, on a connection of its own, was kept by the stream's
        # scope once closed: a long stream that resumed often held every connection it had.
        port = urlsplit(shared().url).port
        proxy = CuttingProxy(port or 0, cut_after=3000)
        self.addCleanup(proxy.close)

        def connections() -> int:
            gc.collect()
            return sum(isinstance(o, http.client.HTTPConnection) for o in gc.get_objects())

        async def main() -> None:
            sandbox = AsyncSandbox(proxy.url, shared().token)
            h = await sandbox.process.start(
                "for i in $(seq 1 6000); do echo line-$i; [ $((i % 100)) = 0 ] && sleep 0.02; done")
            before, most = connections(), 0
            async for e in h.stream_logs():
                if e.type == "log":
                    most = max(most, connections() - before)
            self.assertGreater(proxy.cuts, 10, "the proxy cut too few connections: the test tested little")
            self.assertLess(most, 5, f"{most} connections held over {proxy.cuts} resumes")
            await sandbox.close()

        asyncio.run(asyncio.wait_for(main(), 60))


if __name__ == "__main__":
    unittest.main()
