import asyncio
import unittest

from conch import NotFoundError
from conch.aio import AsyncCodeContext, AsyncSandbox

from .daemon import shared


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


if __name__ == "__main__":
    unittest.main()
