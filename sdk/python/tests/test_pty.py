import asyncio
import os
import signal
import threading
import time
import unittest
from typing import Any, List, Optional
from unittest import mock
from urllib.parse import urlsplit

from conch import AuthenticationError, NetworkError, NotFoundError, Sandbox, UnsupportedOperationError
from conch.attach import _unsent

from .daemon import shared
from .proxy import DroppingProxy
from .signals import sigint_raises

try:
    import websockets  # noqa: F401

    HAVE_WEBSOCKETS = True
except ImportError:
    HAVE_WEBSOCKETS = False


class PtyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_start_resize_logs(self) -> None:
        h = self.sandbox.pty.start("stty size; read x; stty size", cols=100, rows=30)
        self.addCleanup(self.sandbox.pty.delete, h.id)
        self.assertEqual(h.kind, "pty")
        self.assertIn(h.id, [p.id for p in self.sandbox.pty.list()])
        h.ready(pattern="30 100", timeout=30)
        h.resize(120, 40)
        h.stdin("go\r")
        self.assertEqual(h.wait(timeout=30).exit_code, 0)
        text = "".join(f.data for f in h.logs().items)
        self.assertIn("30 100", text)
        self.assertIn("40 120", text)
        p = h.get()
        self.assertEqual((p.terminal.cols, p.terminal.rows) if p.terminal else None, (120, 40))

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package (pip install websockets; "
                                          "Debian: python3-websockets), which this Python does not have")
    def test_attach(self) -> None:
        handle, conn = self.sandbox.pty.attach("read line; echo got:$line; stty size", cols=90, rows=20)
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        with conn:
            conn.resize(91, 21)
            with self.assertRaises(TypeError):
                conn.send(5)  # type: ignore[arg-type]  # would type five NUL bytes
            with self.assertRaises(TypeError) as cm:
                conn.send("\udc00")  # half of a pair: no UTF-8, nothing typed
            self.assertIn("lone surrogate (U+DC00 at index 0)", str(cm.exception))
            conn.send("hello\r")
            seen = b"".join(conn)
        self.assertIn(b"got:hello", seen)
        self.assertIn(b"21 91", seen)
        self.assertEqual(conn.missed_bytes, 0)
        self.assertEqual(handle.wait(timeout=30).exit_code, 0)

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_attach_async(self) -> None:
        import asyncio

        from conch.aio import AsyncSandbox

        async def main() -> bytes:
            sandbox = AsyncSandbox(shared().url, shared().token)
            handle, conn = await sandbox.pty.attach("read line; echo async:$line")
            await conn.send("x\r")
            out = b"".join([b async for b in conn])
            await sandbox.pty.delete(handle.id)
            await sandbox.close()
            return out

        self.assertIn(b"async:x", asyncio.run(asyncio.wait_for(main(), 60)))

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_attach_refusals_raise_the_api_error(self) -> None:
        h = self.sandbox.process.start("sleep 30")
        self.addCleanup(h.delete)
        with self.assertRaises(UnsupportedOperationError):
            h.attach().close()
        with self.assertRaises(NotFoundError):
            self.sandbox.pty.connect("nosuchprocess").attach().close()
        wrong = Sandbox(shared().url, "wrong-token")
        self.addCleanup(wrong.close)
        p = self.sandbox.pty.start("sleep 30")
        self.addCleanup(self.sandbox.pty.delete, p.id)
        with self.assertRaises(AuthenticationError):
            wrong.pty.connect(p.id).attach().close()

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_connection_gone_while_attached_is_a_network_error(self) -> None:
        # The connection ends without a close frame, as when the daemon is killed.
        proxy = DroppingProxy(urlsplit(shared().url).port or 0, drop=10**6)
        self.addCleanup(proxy.close)
        sb = Sandbox(proxy.url, shared().token)
        self.addCleanup(sb.close)
        before = set(threading.enumerate())
        h, conn = sb.pty.attach("echo hi; sleep 30")
        thread = next(t for t in threading.enumerate() if t not in before and t.name == "conch-attach")
        self.addCleanup(self.sandbox.pty.delete, h.id)
        self.addCleanup(conn.close)
        self.assertIn(b"hi", conn.recv() or b"")
        proxy.hang_up()
        with self.assertRaises(NetworkError):
            while conn.recv() is not None:
                pass
        thread.join(10)  # a guard: the broken connection ended it
        self.assertFalse(thread.is_alive(), "a broken connection's thread runs on")
        self.assertIsNone(conn.recv(), "after the error, the end")

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_input_held_back_keeps_the_attachment(self) -> None:
        # While the program leaves its input unread, the daemon reads no more of the
        # client's messages, pings included: a client that pings (the library's default,
        # every 20 s with 20 s for the pong) closed the attachment with "1011 keepalive ping
        # timeout" and the rest of the input was lost. Here a library whose default pings
        # every 0.3 s: the SDK's attachment must send none of its own.
        import hashlib
        from unittest import mock

        def pinging(connect: Any) -> Any:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                kwargs.setdefault("ping_interval", 0.3)
                kwargs.setdefault("ping_timeout", 0.3)
                return connect(*args, **kwargs)
            return wrapped

        patches = [mock.patch.object(websockets, "connect", pinging(websockets.connect))]
        try:
            import websockets.asyncio.client as newclient  # type: ignore
        except ImportError:
            pass
        else:
            patches.append(mock.patch.object(newclient, "connect", pinging(newclient.connect)))
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        total = 3 << 20
        data = bytes(97 + i % 26 for i in range(total))
        handle, conn = self.sandbox.pty.attach(f"stty raw -echo; printf R; sleep 3; head -c {total} | sha256sum")
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        guard = threading.Timer(60, conn.close)  # a hang ends as a failure, not a stuck suite
        guard.start()
        self.addCleanup(guard.cancel)
        with conn:
            seen = b""
            while b"R" not in seen:
                seen += conn.recv() or b""
            errors: List[BaseException] = []

            def write() -> None:
                try:
                    for i in range(0, total, 32 << 10):  # as a terminal sends it
                        conn.send(data[i:i + (32 << 10)])
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            writer = threading.Thread(target=write)
            writer.start()
            want = hashlib.sha256(data).hexdigest().encode()
            while want not in seen:
                b = conn.recv()
                if b is None:
                    break
                seen += b
            writer.join(30)
        self.assertEqual(errors, [])
        self.assertIn(want, seen, "the program read every byte")

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_with_output_unread_closes_at_once(self) -> None:
        # A caller that read a little of a busy terminal and detaches: the library stops
        # reading once it holds its max_queue of messages, and the daemon's close frame waits
        # behind the output still coming. close() must read and drop that output rather than
        # wait for the library's close timeouts (30 s with websockets 10) and end without a
        # close frame (1006).
        handle, conn = self.sandbox.pty.attach("yes")
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        self.assertTrue(conn.recv())
        time.sleep(1)  # the output the caller does not read piles up
        closing = threading.Thread(target=conn.close, daemon=True)
        closing.start()
        closing.join(15)
        self.assertFalse(closing.is_alive(), "close() waited on the output nobody read")
        self.assertEqual(conn._conn._ws.close_code, 1000, "the close handshake did not complete")


    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_with_input_unread_ends_soon(self) -> None:
        # Input written to a program that reads none: the daemon takes what its buffers hold
        # and then reads no more of the connection, and the client's close frame waits behind
        # the rest. close() waited the library's close timeouts (30 s with websockets 10);
        # once the unsent input stood still for 2 s it ends the connection without the
        # handshake, and the process goes on.
        handle, conn, unsent = self._input_unread(4 << 20)
        if unsent[0] == 0:
            # The sockets' buffers, grown by the kernel's autotuning on loopback, took it all
            # (seen once in CI): the case of the test below, which covers it.
            self.skipTest("the input all left this host: the test below covers that")
        self._close_ends_soon(handle, conn, unsent)

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_with_input_unread_all_sent_ends_soon(self) -> None:
        # A little more input than the daemon takes for a program that reads none: it all
        # leaves this socket and waits in the daemon's, unread, and the close frame behind
        # it. Nothing unsent here: close() waited the library's 30 s all the same.
        handle, conn, unsent = self._input_unread((1 << 20) + (160 << 10))
        if unsent[0] != 0:
            # A daemon slow to take its part (a loaded machine) leaves some here: the case of
            # the test above, which covers it.
            self.skipTest(f"{unsent[0]} bytes of input left unsent: the test above covers that")
        self._close_ends_soon(handle, conn, unsent)

    def _input_unread(self, size: int) -> "tuple[Any, Any, List[int]]":
        """Attaches to a program that reads none of its input, sends it size bytes, and returns
        its handle, the connection and its unsent bytes once they stood still (or after 5 s)."""
        handle, conn = self.sandbox.pty.attach("stty raw -echo; printf R; sleep 60")
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        seen = b""
        while b"R" not in seen:
            seen += conn.recv() or b""
        data = b"x" * size
        writer = threading.Thread(target=lambda: [conn.send(data[i:i + (32 << 10)])
                                                  for i in range(0, len(data), 32 << 10)], daemon=True)
        writer.start()
        writer.join(5)  # the library queues it all in the socket; the daemon takes about 1 MiB
        transport = conn._conn._ws.transport
        last, deadline = -1, time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = _unsent(transport)
            if now == last:
                break
            last = now
        return handle, conn, [_unsent(transport)]

    def _close_ends_soon(self, handle: Any, conn: Any, unsent: List[int]) -> None:
        transport = conn._conn._ws.transport

        def look() -> None:  # what close() found, and then every 0.5 s: said on a failure
            while closing.is_alive():
                time.sleep(0.5)
                unsent.append(_unsent(transport))

        closing = threading.Thread(target=conn.close, daemon=True)
        closing.start()
        threading.Thread(target=look, daemon=True).start()
        closing.join(15)
        self.assertFalse(closing.is_alive(), f"close() waited on the input nobody read; unsent bytes: {unsent}")
        self.assertEqual(conn._conn._ws.close_code, 1006)
        self.assertIsNone(conn.recv())
        self.assertEqual(handle.get().state, "running")

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_output_read_late_still_ends_cleanly(self) -> None:
        # A reader slower than the output: websockets 10 reads nothing more while it holds
        # max_queue messages unread, so the daemon's close frame (1000, process ended), sent
        # after the last of the output, waited unread; the daemon waits 5 s for the answer,
        # then drops the connection. Every byte had come, and the recv that met the end
        # raised NetworkError ("received 1000 (OK) process ended; no close frame sent").
        n = 30000
        want = b"".join(b"%d\n" % i for i in range(1, n + 1))
        handle, conn = self.sandbox.pty.attach(f"stty raw -echo; seq 1 {n}")
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        self.addCleanup(conn.close)
        self.assertEqual(handle.wait(timeout=30).exit_code, 0)
        time.sleep(8)  # past the daemon's 5 s for the close handshake
        seen = b"".join(conn)  # raised NetworkError at the end
        self.assertEqual(conn.missed_bytes, 0)
        self.assertEqual(seen, want)
        self.assertIsNone(conn.recv())

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_during_a_send_ends_the_send_with_network_error(self) -> None:
        # A send under way when close() ends the connection without its handshake (a program
        # that reads none of its input): close() raised websockets' ConnectionClosedError
        # (out of a with block too) and the send returned as if all its input went.
        handle, conn = self.sandbox.pty.attach("stty raw -echo; printf R; sleep 60")
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        seen = b""
        while b"R" not in seen:
            seen += conn.recv() or b""
        got: List[Optional[BaseException]] = []

        def send() -> None:
            try:
                conn.send(b"a" * (20 << 20))  # far more than the daemon and the sockets take
            except BaseException as e:  # noqa: BLE001 - reported below
                got.append(e)
            else:
                got.append(AssertionError("the send returned"))

        sending = threading.Thread(target=send, daemon=True)
        sending.start()
        time.sleep(1)
        self.assertTrue(sending.is_alive(), "the send was over before the close")
        closing = threading.Thread(target=lambda: got.append(self._closed(conn)), daemon=True)
        closing.start()
        closing.join(30)
        sending.join(30)
        self.assertFalse(closing.is_alive() or sending.is_alive(), "close() or the send hung")
        errors = [e for e in got if e is not None]
        self.assertEqual(len(errors), 1, f"got {got}")
        self.assertIsInstance(errors[0], NetworkError)
        # Its words: how much input was not sent, or, when the end cancelled the send in the
        # thread that runs the connection first, that the connection was closed.
        self.assertRegex(str(errors[0]), "bytes of input not sent|the PTY connection was closed")
        self.assertIsNone(conn.recv())
        with self.assertRaises(NetworkError):
            conn.send("x")
        self.assertEqual(handle.get().state, "running")

    @staticmethod
    def _closed(conn: Any) -> Optional[BaseException]:
        try:
            with conn:
                pass
        except BaseException as e:  # noqa: BLE001 - the caller reports it
            return e
        return None

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_during_a_send_async(self) -> None:
        from conch.aio import AsyncSandbox

        async def main() -> "tuple[Optional[BaseException], BaseException, Any, Any]":
            sandbox = AsyncSandbox(shared().url, shared().token)
            try:
                handle, conn = await sandbox.pty.attach("stty raw -echo; printf R; sleep 60")
                try:
                    seen = b""
                    while b"R" not in seen:
                        seen += await conn.recv() or b""
                    send = asyncio.ensure_future(conn.send(b"a" * (20 << 20)))
                    await asyncio.sleep(1)
                    self.assertFalse(send.done(), "the send was over before the close")
                    closed: Optional[BaseException] = None
                    try:
                        await conn.close()
                    except BaseException as e:  # noqa: BLE001 - reported by the caller
                        closed = e
                    sent = await asyncio.gather(send, return_exceptions=True)
                    after = (await asyncio.gather(conn.recv(), return_exceptions=True))[0]
                    late = (await asyncio.gather(conn.send("x"), return_exceptions=True))[0]
                    return closed, sent[0], after, late
                finally:
                    await sandbox.pty.delete(handle.id)
            finally:
                await sandbox.close()

        closed, sent, after, late = asyncio.run(asyncio.wait_for(main(), 60))
        self.assertIsNone(closed)
        self.assertIsInstance(sent, NetworkError)
        self.assertIn("bytes of input not sent", str(sent))
        self.assertIsNone(after)
        self.assertIsInstance(late, NetworkError)


class AttachLeavesNothingTest(unittest.TestCase):
    """A PtyConnection runs an event loop in a thread of its own: reading it to its end, or
    dropping it without close(), must end that thread and close its WebSocket. They ran on
    until close(), the socket for as long as the process ran."""

    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def _attach_thread(self, attach: Any) -> "tuple[Any, threading.Thread]":
        """What attach() returns, and the thread the connection it opened started."""
        before = set(threading.enumerate())
        got = attach()
        started = [t for t in threading.enumerate() if t not in before and t.name == "conch-attach"]
        self.assertEqual(len(started), 1, f"threads started by attach: {started}")
        return got, started[0]

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_read_to_the_end_ends_its_thread(self) -> None:
        (handle, conn), thread = self._attach_thread(lambda: self.sandbox.pty.attach("echo hi"))
        self.addCleanup(self.sandbox.pty.delete, handle.id)
        self.addCleanup(conn.close)
        self.assertIn(b"hi", b"".join(conn))
        thread.join(10)  # a guard: the end of the output already ended it
        self.assertFalse(thread.is_alive(), "the connection's thread outlived the end of its output")
        self.assertIsNone(conn.recv())
        with self.assertRaises(NetworkError):
            conn.send("x")
        conn.close()  # closing it after the end is harmless

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_dropped_without_close_is_freed_when_collected(self) -> None:
        import gc
        import weakref

        handle = self.sandbox.pty.start("while :; do echo x; sleep 0.1; done")
        self.addCleanup(handle.delete)

        def use() -> "tuple[Any, Any, threading.Thread]":
            conn, thread = self._attach_thread(handle.attach)
            for _ in conn:
                break  # and the connection is dropped, never closed
            return weakref.ref(conn), conn._conn._ws, thread

        dropped, socket, thread = use()
        gc.collect()
        self.assertIsNone(dropped(), "something still holds the dropped connection")
        thread.join(10)  # a guard: collecting the connection closes it
        self.assertFalse(thread.is_alive(), "a dropped connection's thread runs on")
        self.assertTrue(socket.closed, "a dropped connection's WebSocket stays open")
        self.assertEqual(handle.get().state, "running", "dropping a connection detaches, it kills nothing")


class AttachFrozenDaemonTest(unittest.TestCase):
    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_attach_to_a_frozen_daemon_says_it_did_not_answer(self) -> None:
        from .test_transport import frozen_with

        _, h = frozen_with(self, lambda sb: sb.pty.start("sleep 30"))
        got: List[BaseException] = []

        def attach() -> None:
            try:
                h.attach().close()
            except BaseException as e:
                got.append(e)

        t = threading.Thread(target=attach, daemon=True)
        t.start()
        t.join(60)  # the handshake's 1 s, and the 10 s websockets waits for the connection to close
        self.assertFalse(t.is_alive(), "attach hung on the frozen daemon")
        self.assertEqual(len(got), 1)
        self.assertIsInstance(got[0], NetworkError)
        self.assertIn("did not answer within 1 s", str(got[0]))


class AttachWithoutWebsocketsTest(unittest.TestCase):
    @unittest.skipIf(HAVE_WEBSOCKETS, "this Python has websockets")
    def test_says_what_to_install(self) -> None:
        sandbox = shared().sandbox()
        self.addCleanup(sandbox.close)
        h = sandbox.pty.start("sleep 5")
        self.addCleanup(h.delete)
        with self.assertRaises(ImportError) as cm:
            h.attach()
        self.assertIn("websockets", str(cm.exception))


class AttachFailsTest(unittest.TestCase):
    """``pty.attach(command)`` that cannot attach deletes the PTY it started, sync and asyncio
    alike: the caller never got the handle, and the process would run on, orphaned."""

    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def _running(self, marker: str) -> List[str]:
        return [p.id for p in self.sandbox.pty.list() if p.state == "running" and marker in (p.shell_command or "")]

    def test_sync(self) -> None:
        marker = f"sleep 300 # sync {os.getpid()}"
        with mock.patch("conch.attach.PtyConnection.open", side_effect=ImportError("no websockets")):
            with self.assertRaises(ImportError):
                self.sandbox.pty.attach(marker)
        self.assertEqual(self._running(marker), [])

    def test_async(self) -> None:
        from conch.aio import AsyncSandbox

        async def attach(marker: str) -> None:
            sandbox = AsyncSandbox(shared().url, shared().token)
            try:
                await sandbox.pty.attach(marker)
            finally:
                await sandbox.close()

        marker = f"sleep 300 # aio {os.getpid()}"
        with mock.patch("conch.aio.AsyncPtyConnection.open", side_effect=ImportError("no websockets")):
            with self.assertRaises(ImportError):
                asyncio.run(attach(marker))
        self.assertEqual(self._running(marker), [])

        async def cancelled(marker: str) -> None:
            sandbox = AsyncSandbox(shared().url, shared().token)
            started = asyncio.Event()

            async def never(*_: Any) -> None:
                started.set()
                await asyncio.sleep(300)

            try:
                with mock.patch("conch.aio.AsyncPtyConnection.open", side_effect=never):
                    task = asyncio.ensure_future(sandbox.pty.attach(marker))
                    await asyncio.wait_for(started.wait(), 30)
                    task.cancel()
                    with self.assertRaises(asyncio.CancelledError):
                        await task
            finally:
                await sandbox.close()

        marker = f"sleep 300 # aio cancelled {os.getpid()}"
        asyncio.run(cancelled(marker))
        self.assertEqual(self._running(marker), [])


class PtyInterruptTest(unittest.TestCase):
    def _attached(self, command: str) -> Any:
        """A PtyConnection to a PTY running ``stty -echo; echo ready; `` + command, once ready
        came; a hang ends in a failure, the connection closed after 60 s, not a stuck suite."""
        sandbox = shared().sandbox()
        self.addCleanup(sandbox.close)
        handle, conn = sandbox.pty.attach("stty -echo; echo ready; " + command)
        self.addCleanup(sandbox.pty.delete, handle.id)
        self.addCleanup(conn.close)
        guard = threading.Timer(60, conn.close)
        guard.start()
        self.addCleanup(guard.cancel)
        self.assertIn(b"ready", _recv_until(conn, b"ready"))
        return conn

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_ctrl_c_during_recv_loses_nothing(self) -> None:
        # Ctrl-C while recv waits: the connection stays usable, and the output that recv
        # would have returned comes from the next one (it raised RuntimeError, or lost it).
        conn = self._attached("read a; echo got:$a; read b; echo got:$b")
        if threading.current_thread() is not threading.main_thread():
            self.skipTest("SIGINT reaches only the main thread")
        sigint_raises(self)
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        with self.assertRaises(KeyboardInterrupt):
            while conn.recv() is not None:  # None: the guard closed it
                pass
        for line in ("one", "two"):
            conn.send(line + "\r")
            self.assertIn(b"got:" + line.encode(), _recv_until(conn, b"got:" + line.encode()))
        conn.close()
        self.assertIsNone(conn.recv(), "recv after close is the end")
        with self.assertRaises(NetworkError):
            conn.send("x")

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_ctrl_c_just_after_recv_asks_loses_nothing(self) -> None:
        # Ctrl-C landing as recv has just asked for a read, before it waits: the read goes on, and
        # what it takes is the next recv's (it was taken by a read no recv waited for).
        conn = self._attached("read a; echo got:$a; sleep 60")

        def then_interrupted(schedule: Any) -> Any:
            def scheduled(*args: Any, **kwargs: Any) -> Any:
                schedule(*args, **kwargs)
                raise KeyboardInterrupt

            return scheduled

        loop = conn._loop
        with mock.patch.object(loop, "call_soon_threadsafe", then_interrupted(loop.call_soon_threadsafe)), \
                mock.patch.object(asyncio, "run_coroutine_threadsafe", then_interrupted(asyncio.run_coroutine_threadsafe)):
            with self.assertRaises(KeyboardInterrupt):
                conn.recv()
        conn.send("one\r")
        self.assertIn(b"got:one", _recv_until(conn, b"got:one"))

    @unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
    def test_close_from_another_thread_ends_a_waiting_recv(self) -> None:
        conn = self._attached("sleep 60")
        got: List[Any] = []
        waiter = threading.Thread(target=lambda: got.append(_recv_until(conn, b"never")), daemon=True)
        waiter.start()
        time.sleep(0.3)  # the recv is waiting (its read under way)
        conn.close()
        waiter.join(30)
        self.assertFalse(waiter.is_alive(), "a recv waiting while the connection closed waits on")
        self.assertEqual(len(got), 1, "its recv returned None")
        self.assertIsNone(conn.recv())


def _recv_until(conn: Any, want: bytes) -> bytes:
    """What conn's recv returns until it holds want, or until recv returns None (the end)."""
    seen = b""
    while want not in seen:
        b = conn.recv()
        if b is None:
            break
        seen += b
    return seen


if __name__ == "__main__":
    unittest.main()


def attach_to_fake(handler: Any, reader: Any, **serve: Any) -> Any:
    """What reader makes of an AsyncPtyConnection to a websocket server of handler's, standing in
    for the daemon (serve: websockets.serve's options), within 30 s."""
    import websockets

    from conch._transport import HttpTransport
    from conch.attach import AsyncPtyConnection

    async def main() -> Any:
        server = await websockets.serve(handler, "127.0.0.1", 0, **serve)
        t = HttpTransport(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", "token")
        try:
            conn = await AsyncPtyConnection.open(t, "p1")
            try:
                return await reader(conn)
            finally:
                await conn.close()
        finally:
            t.close()
            server.close()
            await server.wait_closed()

    return asyncio.run(asyncio.wait_for(main(), 30))


async def first_and_after(conn: Any) -> "tuple[Optional[bytes], Any]":
    """The first recv's bytes, and what the next recv gave or raised."""
    first = await conn.recv()
    after = (await asyncio.gather(conn.recv(), return_exceptions=True))[0]
    return first, after


@unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
class AttachGoingAwayTest(unittest.TestCase):
    def test_a_close_with_1001_is_not_the_end(self) -> None:
        # The daemon closes with 1001 when it could read no more of the output (it is stopping,
        # say): what came may not be all the process wrote. websockets counts 1001 among the
        # closes that are OK, and recv returned None, the end of the output, where the
        # TypeScript SDK fails.
        async def handler(ws: Any, *_: Any) -> None:
            await ws.send(b"some")
            await ws.close(1001)

        first, after = attach_to_fake(handler, first_and_after)
        self.assertEqual(first, b"some")
        self.assertIsInstance(after, NetworkError)
        self.assertIn("1001", str(after))


@unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
class AttachQuietDaemonTest(unittest.TestCase):
    """A daemon that sends nothing at all, not even its pings (frozen with SIGSTOP, its host
    still answering TCP keepalive): recv waited for ever."""

    def attach_to(self, handler: Any, idle: float, reader: Any) -> Any:
        from conch import attach

        with mock.patch.object(attach, "IDLE_TIMEOUT", idle):
            return attach_to_fake(handler, reader, ping_interval=None)

    def test_nothing_not_even_a_ping_raises(self) -> None:
        async def handler(ws: Any, *_: Any) -> None:
            await ws.send(b"hi")
            await ws.wait_closed()  # then nothing, as a daemon stopped

        first, after = self.attach_to(handler, 0.3, first_and_after)
        self.assertEqual(first, b"hi")
        self.assertIsInstance(after, NetworkError)
        self.assertIn("nothing from the daemon, not even a ping, within 0.3 s", str(after))

    def test_pings_keep_a_quiet_attachment(self) -> None:
        async def handler(ws: Any, *_: Any) -> None:
            for _ in range(20):  # 2 s of pings and no output
                await ws.ping()
                await asyncio.sleep(0.1)
            await ws.send(b"bye")
            await ws.close(1000)

        async def reader(conn: Any) -> "List[Optional[bytes]]":
            return [await conn.recv(), await conn.recv()]

        self.assertEqual(self.attach_to(handler, 0.5, reader), [b"bye", None])

