"""What a careless caller of the SDK must not get: output silently lost, a caller's error turned into
no limit, a timeout named as another reason, an int sent as NUL bytes, another server's page taken for
the daemon's answer, a stream that waits minutes on a frozen daemon."""

import math
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock

from conch import (NetworkError, NotFoundError, PayloadTooLargeError, Sandbox, UnavailableError,
                   UnexpectedResponseError)
from conch._transport import HttpTransport
from conch.errors import error_from

from .daemon import shared
from .fake import FakeServer


class TextOfTwoChannelsTest(unittest.TestCase):
    """output never makes a character of two channels' bytes, as the daemon's answer does not."""

    def test_past_the_wait_window(self) -> None:
        # F0 9F 98 on stderr, then 80 on stdout: each is the start of a character cut, not U+1F600.
        write = r"printf '\360\237\230' >&2; sleep 0.2; printf '\200'"
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        past = shared().sandbox(wait_window=0.2)
        self.addCleanup(past.close)
        for r in (sb.exec(f"sleep 0.6; {write}", timeout=30), past.exec(f"sleep 0.6; {write}", timeout=30)):
            self.assertEqual((r.output, r.stdout, r.stderr), ("\ufffd\ufffd", "\ufffd", "\ufffd"))


class KeepLogsNoneTest(unittest.TestCase):
    """Under keep_logs="none" the daemon keeps nothing for later reading: a result is what its
    answers held, and says when output is missing."""

    def test_an_answer_over_its_limit_keeps_its_head_and_tail(self) -> None:
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        r = sb.exec("seq 1 400000", keep_logs="none")
        whole = "".join(f"{i}\n" for i in range(1, 400001))
        self.assertEqual(r.reason, "exited")
        self.assertGreater(r.omitted_bytes, 0, "output was left out and the result does not say so")
        self.assertEqual(len(r.stdout) + r.omitted_bytes, len(whole))
        self.assertTrue(whole.startswith(r.stdout[:1000]))
        self.assertTrue(r.stdout.endswith("400000\n"), "the tail the daemon sent was dropped")

    def test_a_run_past_the_wait_window_says_what_it_lost(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        r = sb.exec("echo a; sleep 2; echo b", keep_logs="none", timeout=30)
        self.assertEqual(r.reason, "exited")
        self.assertTrue(r.stdout.startswith("a\n"), repr(r.stdout))
        if r.stdout != "a\nb\n":
            self.assertTrue(r.truncated, f"output {r.stdout!r} is missing b and the result does not say so")

    def test_output_limit_past_the_wait_window_is_what_the_answers_held(self) -> None:
        # Nothing is kept to cut the output from the start: the answers held it. The output comes
        # in the middle of the second request's window, not between two requests, where it is lost.
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        for kw in ({}, {"plain": True}):
            with self.subTest(**kw):
                r = sb.exec("sleep 1.5; echo hello", keep_logs="none", output_limit=100, timeout=30, **kw)
                self.assertEqual((r.reason, r.output, r.stdout, r.omitted_bytes), ("exited", "hello\n", "hello\n", 0), r)
                self.assertFalse(r.truncated)
        r = sb.exec("sleep 1.5; seq 1 200000", keep_logs="none", output_limit=1000, timeout=30)
        whole = "".join(f"{i}\n" for i in range(1, 200001))
        self.assertEqual(r.reason, "exited")
        self.assertLessEqual(len(r.output.encode()), 1000)
        if not r.truncated:
            self.assertEqual(len(r.output) + r.omitted_bytes, len(whole))
        self.assertTrue(whole.startswith(r.output[:400]), r.output[:400])
        self.assertTrue(r.output.endswith("200000\n"), r.output[-100:])
        self.assertIsNotNone(r.omitted_after)

    def test_output_limit_holds_several_answers_to_the_limit(self) -> None:
        # Each answer is cut to the limit; together they are held to it as one answer is.
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        whole = "".join(f"{i}\n" for i in range(1, 100001))
        for kw in ({}, {"plain": True}):
            with self.subTest(**kw):
                r = sb.exec("sleep 0.5; seq 1 50000; sleep 1; seq 50001 100000", keep_logs="none",
                            output_limit=1000, timeout=30, **kw)
                self.assertEqual(r.reason, "exited")
                for text in (r.output, r.stdout):
                    self.assertLessEqual(len(text.encode()), 1000)
                    self.assertTrue(text.startswith("1\n2\n3\n"), text[:100])
                    self.assertTrue(text.endswith("\n99999\n100000\n"), text[-100:])
                self.assertLessEqual(sum(len(f.bytes) for f in r.logs), 1000)
                self.assertIsNotNone(r.omitted_after)
                self.assertGreater(r.extra["headFrames"], 0)
                if not r.truncated:
                    self.assertEqual(sum(len(f.bytes) for f in r.logs) + r.omitted_bytes, len(whole))

    def test_an_answer_cut_past_the_wait_window_says_what_it_left_out(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        r = sb.exec("sleep 1.5; seq 1 400000", keep_logs="none", timeout=30)
        whole = "".join(f"{i}\n" for i in range(1, 400001))
        self.assertEqual(r.reason, "exited")
        self.assertGreater(r.omitted_bytes, 0, "output was left out and the result does not say so")
        self.assertIsNotNone(r.omitted_after)
        if not r.truncated:
            self.assertEqual(len(r.stdout) + r.omitted_bytes, len(whole))
        self.assertTrue(whole.startswith(r.stdout[:1000]), (r.stdout[:200], r.omitted_bytes, r.omitted_after, r.truncated, len(r.logs)))
        self.assertTrue(r.stdout.endswith("400000\n"))


    def test_plain_past_the_wait_window_stays_plain(self) -> None:
        # Each answer's text is the daemon's plain rendering; the frames are raw escapes.
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        r = sb.exec(r"for i in 1 2 3 4 5 6; do printf '\033[31mred\033[0m\n'; sleep 0.5; done",
                    keep_logs="none", plain=True, timeout=30)
        self.assertEqual(r.exit_code, 0)
        self.assertTrue(r.stdout.startswith("red\n"), repr(r.stdout))
        self.assertNotIn("\x1b", r.stdout, "the raw frames were taken for the plain text")
        self.assertNotIn("\x1b", r.output)
        self.assertGreaterEqual(r.stdout.count("red\n"), 4, repr(r.stdout))


class TimesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_a_negative_time_is_refused(self) -> None:
        h = self.sandbox.process.start("sleep 30")
        self.addCleanup(h.kill, "KILL")
        for call in (lambda: h.interact(timeout=-1), lambda: h.wait(timeout=-5),
                     lambda: self.sandbox.exec("true", execution_timeout=-1),
                     lambda: self.sandbox.exec("true", timeout=-1),
                     lambda: h.kill(escalate_after=-1)):
            started = time.monotonic()
            with self.assertRaises(ValueError):
                call()
            self.assertLess(time.monotonic() - started, 5)

    def test_nan_is_refused_and_infinity_is_no_limit(self) -> None:
        for kw in ({"timeout": float("nan")}, {"idle_timeout": float("nan")}, {"execution_timeout": float("nan")}):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                self.sandbox.exec("true", **kw)  # type: ignore[arg-type]
        r = self.sandbox.exec("echo ok", timeout=math.inf, idle_timeout=math.inf, execution_timeout=math.inf)
        self.assertEqual((r.exit_code, r.stdout), (0, "ok\n"))

    def test_an_infinite_read_timeout_or_wait_window_is_no_limit(self) -> None:
        # Both raised OverflowError on every call they bound: a socket takes no infinite
        # timeout, and the window went out as int(math.inf) milliseconds.
        sb = shared().sandbox(read_timeout=math.inf, wait_window=math.inf)
        self.addCleanup(sb.close)
        self.assertEqual(sb.health().get("status"), "ok")
        h = sb.process.start("echo started; sleep 0.2")
        self.assertEqual(h.get().id, h.id)
        self.assertEqual(h.wait().reason, "exited")
        r = sb.exec("echo ok")
        self.assertEqual((r.exit_code, r.stdout), (0, "ok\n"))
        with sb.process.create_session() as s:
            self.assertEqual(s.run("echo in session").stdout, "in session\n")

    def test_a_fractional_page_size_or_window_is_rounded(self) -> None:
        # The daemon takes whole frames and milliseconds: 2.5 frames a page was refused.
        sb = shared().sandbox(logs_page_size=2.5, wait_window=1 / 3)
        self.addCleanup(sb.close)
        r = sb.exec("seq 1 20000; sleep 0.5", timeout=30)
        self.assertEqual((r.reason, r.stdout), ("exited", "".join(f"{i}\n" for i in range(1, 20001))))

    def test_an_infinite_or_huge_page_size_pages_at_the_largest(self) -> None:
        # math.inf raised OverflowError, and a page size over what the daemon takes was refused
        # only once a run paged its logs, after its command had run. Each is 2^53 - 1 frames,
        # as in the TypeScript SDK; a page ends at 1 MiB of output long before.
        for size in (math.inf, 1e300, 10**30):
            with self.subTest(size=size):
                sb = shared().sandbox(logs_page_size=size, wait_window=0.1)
                self.addCleanup(sb.close)
                self.assertEqual(sb.transport.logs_page_size, 2**53 - 1)
                r = sb.exec("sleep 0.3; seq 1 5", timeout=30)  # past the window: it pages the logs
                self.assertEqual((r.reason, r.stdout), ("exited", "1\n2\n3\n4\n5\n"))

    def test_a_body_past_the_limit_is_payload_too_large(self) -> None:
        # The daemon answers 413 and closes while the body is still going out: the answer is
        # read, not taken for a daemon that cannot be reached.
        h = self.sandbox.process.start("sleep 30", stdin="open")
        self.addCleanup(h.kill, "KILL")
        for size in (20 << 20, 64 << 20):
            with self.subTest(size=size), self.assertRaises(PayloadTooLargeError):
                h.stdin(b"a" * size)
        self.assertEqual(self.sandbox.exec("echo still").stdout, "still\n")

    def test_a_short_time_is_no_time_limit(self) -> None:
        started = time.monotonic()
        r = self.sandbox.exec("sleep 4", execution_timeout=0.0004, timeout=30)
        self.assertLess(time.monotonic() - started, 3, "a 0.4 ms execution timeout applied no limit")
        self.assertEqual(r.reason, "timed_out")
        h = self.sandbox.process.start("sleep 4")
        self.addCleanup(h.kill, "KILL")
        started = time.monotonic()
        r = h.interact(timeout=0.0004)
        self.assertLess(time.monotonic() - started, 3, "a 0.4 ms interact timeout waited for the process")
        self.assertTrue(r.is_running)

    def test_interact_names_the_callers_timeout(self) -> None:
        h = self.sandbox.process.start("echo x; sleep 4")
        self.addCleanup(h.kill, "KILL")
        r = h.interact(timeout=1)
        self.assertEqual((r.is_running, r.came_back), (True, "wait_timeout"))


class InputTest(unittest.TestCase):
    def test_an_int_is_no_input(self) -> None:
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        h = sb.process.start("cat", stdin="open")
        self.addCleanup(h.kill, "KILL")
        with self.assertRaises(TypeError):
            h.stdin(5)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            h.interact(3, eof=True)  # type: ignore[arg-type]
        r = h.interact(b"ok\n", eof=True, timeout=10)
        self.assertEqual(r.stdout, "ok\n")

    def test_a_lone_surrogate_is_refused_and_nothing_sent(self) -> None:
        # Half of a pair (a string cut in the middle of an emoji) has no UTF-8: refused as the
        # TypeScript SDK refuses it, by stdin and interact alike, never sent for the daemon to refuse.
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        h = sb.process.start("cat", stdin="open")
        self.addCleanup(h.kill, "KILL")
        for send in (h.stdin, h.interact):
            with self.subTest(send=send.__name__):
                with self.assertRaises(TypeError) as cm:
                    send("ab\ud800c")
                self.assertIn("lone surrogate (U+D800 at index 2)", str(cm.exception))
        r = h.interact("ok \U0001f600\n", eof=True, timeout=10)
        self.assertEqual(r.stdout, "ok \U0001f600\n")


class OtherServersTest(unittest.TestCase):
    def test_a_page_that_is_not_the_apis_is_unexpected_whatever_its_status(self) -> None:
        for status in (404, 500, 503):
            with self.subTest(status=status):
                e = error_from(status, b"<html><body>Error</body></html>")
                self.assertIsInstance(e, UnexpectedResponseError)
                self.assertEqual(e.status, status)
        self.assertIsInstance(error_from(404, b""), NotFoundError)
        server = FakeServer(404, b"<html>Not Found</html>", "text/html")
        self.addCleanup(server.close)
        sb = Sandbox(server.url, "t")
        self.addCleanup(sb.close)
        with self.assertRaises(UnexpectedResponseError):
            sb.process.get("abc")

    def test_an_error_keeps_its_retry_after(self) -> None:
        # A draining daemon's 503 says when to come back, as the TypeScript SDK's retryAfter
        # has it: the error had no retry_after.
        server = FakeServer(503, b'{"error":{"code":"draining","message":"the daemon is draining"}}')
        self.addCleanup(server.close)
        sb = Sandbox(server.url, "t")
        self.addCleanup(sb.close)
        for header, want in (("1", 1), ("120", 120), ("", None), ("soon", None)):
            with self.subTest(header=header):
                server.headers = {"Retry-After": header} if header else {}
                with self.assertRaises(UnavailableError) as cm:
                    sb.process.get("abc")
                self.assertEqual(cm.exception.retry_after, want)
        self.assertIsNone(error_from(404, b"").retry_after)


def silent_daemon(test: unittest.TestCase) -> str:
    """The URL of a listener that accepts connections and never answers, as a stopped daemon's
    kernel does; closed when test ends."""
    ln = socket.socket()
    ln.bind(("127.0.0.1", 0))
    ln.listen(16)
    test.addCleanup(ln.close)
    return f"http://127.0.0.1:{ln.getsockname()[1]}"


class FrozenStreamTest(unittest.TestCase):
    def test_a_stream_gives_up_on_a_daemon_that_sends_nothing(self) -> None:
        url = silent_daemon(self)
        from conch import _sse
        old = _sse.READ_TIMEOUT
        _sse.READ_TIMEOUT = 0.5
        self.addCleanup(setattr, _sse, "READ_TIMEOUT", old)
        sb = Sandbox(url, "t")
        self.addCleanup(sb.close)
        started = time.monotonic()
        with self.assertRaises(Exception):
            list(sb.process.connect("x").stream_logs())
        self.assertLess(time.monotonic() - started, 0.5 * 3, "the stream tried the frozen daemon again and again")

    def test_a_stream_whose_answer_head_trickles_in_ends_at_read_timeout(self) -> None:
        # A byte of a header line each 0.05 s: every read is answered well within
        # READ_TIMEOUT, but the head of the answer is not; the stream waited on it for as long
        # as it came (a line may be 64 KiB long).
        from conch import _sse

        from .hostile import HostileServer, read_request
        old = _sse.READ_TIMEOUT
        _sse.READ_TIMEOUT = 1.0
        self.addCleanup(setattr, _sse, "READ_TIMEOUT", old)

        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-A: ")
            while not srv.stop.wait(0.05):
                c.sendall(b"b")

        srv = HostileServer(script)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t")
        self.addCleanup(sb.close)
        done: list = []

        def follow() -> None:
            try:
                list(sb.process.connect("x").stream_logs())
            except Exception as e:  # noqa: BLE001 - what it ended with is what the test looks at
                done.append(e)

        th = threading.Thread(target=follow, daemon=True)
        th.start()
        th.join(30)  # a hang guard
        self.assertFalse(th.is_alive(), "the stream waits on the head of its answer for as long as it trickles in")
        self.assertIsInstance(done[0], NetworkError)

    def test_a_streams_events_each_have_read_timeout_after_a_slow_head(self) -> None:
        # The head of the answer comes in two pieces, the second read of it waiting with
        # 0.8 s of READ_TIMEOUT's 2 left; then heartbeats 1.4 s apart. Each read of the
        # events has the whole READ_TIMEOUT again, not what the head left of it.
        from conch import _sse

        from .hostile import HostileServer, read_request
        old = _sse.READ_TIMEOUT
        _sse.READ_TIMEOUT = 2.0
        self.addCleanup(setattr, _sse, "READ_TIMEOUT", old)

        def script(c: socket.socket) -> None:
            read_request(c)
            if srv.stop.wait(1.2):
                return
            c.sendall(b"HTTP/1.1 200 OK\r\n")
            if srv.stop.wait(0.1):
                return
            c.sendall(b"Content-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for _ in range(2):
                if srv.stop.wait(1.4):
                    return
                c.sendall(b": ping\n\n")
            c.sendall(b"event: eof\ndata: {}\n\n")

        srv = HostileServer(script)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t")
        self.addCleanup(sb.close)
        evs = list(sb.process.connect("x").stream_logs())
        self.assertEqual([e.type for e in evs], ["eof"])


class WholeAnswersTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_interact_pages_back_what_its_answer_left_out(self) -> None:
        h = self.sandbox.process.start("read x; seq 1 400000", stdin="open")
        self.addCleanup(h.kill, "KILL")
        r = h.interact("go\n", timeout=30)
        self.assertEqual(r.reason, "exited")
        self.assertEqual(r.omitted_bytes, 0)
        self.assertEqual(r.stdout, "".join(f"{i}\n" for i in range(1, 400001)))

    def test_plain_holds_past_the_wait_window(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        r = sb.exec("printf '\\033[31mred\\033[0m\\n'; sleep 2", plain=True, timeout=30)
        self.assertEqual((r.reason, r.stdout), ("exited", "red\n"))
        r = sb.exec("printf '\\033[31mred\\033[0m\\n'; sleep 3", plain=True, timeout=1)
        self.assertTrue(r.is_running)
        self.assertEqual(r.stdout, "red\n")
        r = self.sandbox.exec("printf '\\033[31mred\\033[0m\\n'; seq 1 400000", plain=True)
        self.assertTrue(r.stdout.startswith("red\n1\n"), repr(r.stdout[:20]))
        self.assertNotIn("\x1b", r.stdout)


class FrozenDaemonTest(unittest.TestCase):
    def test_a_post_sent_and_not_answered_says_it_may_have_been_carried_out(self) -> None:
        sb = Sandbox(silent_daemon(self), "t", read_timeout=0.5)
        self.addCleanup(sb.close)
        with self.assertRaises(NetworkError) as cm:
            sb.process.connect("x").kill("KILL")
        self.assertIn("may have been carried out", cm.exception.message)
        self.assertNotIn("is `conch serve` running", cm.exception.message)


class CallerMistakesTest(unittest.TestCase):
    """A value of the wrong type is refused before anything is sent, and the error names it: never a
    bare TypeError from deep inside, never None sent as an empty command that "succeeds"."""

    def test_a_token_that_is_not_a_string_is_refused(self) -> None:
        from conch import ConfigurationError
        with self.assertRaises(ConfigurationError) as cm:
            Sandbox(shared().url, None)  # type: ignore[arg-type]
        self.assertIn("NoneType", str(cm.exception))
        with self.assertRaises(ConfigurationError) as cm:
            Sandbox(None, "secret")  # type: ignore[arg-type]
        self.assertIn("URL must be a string", str(cm.exception))

    def test_a_command_of_the_wrong_type_is_refused(self) -> None:
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        for bad in (None, 5, b"true", {"cmd": "true"}, [], ["echo", 1]):
            with self.assertRaises(TypeError) as cm:
                sb.exec(bad)  # type: ignore[arg-type]
            self.assertIn("a command is a shell string", str(cm.exception))

    def test_a_session_command_or_cell_of_the_wrong_type_is_refused(self) -> None:
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        s = sb.process.create_session()
        self.addCleanup(s.delete)
        for call in (lambda: s.run(None), lambda: s.start(None), lambda: s.run(["true"]),
                     lambda: s.run_code(None), lambda: s.start_code(5)):
            with self.assertRaises(TypeError) as cm:
                call()  # type: ignore[arg-type]
            self.assertIn("is a string, not", str(cm.exception))
        self.assertEqual(s.run("echo ok").stdout, "ok\n")
        cmds = [p for p in sb.process.list(session_id=s.id).items if p.id != s.id]
        self.assertEqual(len(cmds), 1, f"a refused command reached the daemon: {cmds}")


if __name__ == "__main__":
    unittest.main()


class OutrunPagingTest(unittest.TestCase):
    """A process that writes on faster than its logs are paged back, under a small retention:
    the frames after those paged are dropped between pages. A run's join gives up (the answer's
    head and tail, ``omitted_bytes`` saying what is missing) and a collect keeps the tail it can,
    marked ``truncated``; neither pages on for ever, as they did while the writer ran."""

    def setUp(self) -> None:
        from .daemon import Daemon

        self.daemon = Daemon(["--log-retention", "2M"])
        self.addCleanup(self.daemon.stop)
        self.sandbox = self.daemon.sandbox(logs_page_size=5)
        self.addCleanup(self.sandbox.close)
        self.h = self.sandbox.process.start("while :; do seq 1 20000; done")
        self.addCleanup(self.h.delete)
        # Each page of the logs waits 20 ms, as over a slow link: the writer outruns it.
        real = HttpTransport.object

        def slow(t: HttpTransport, method: str, path: str, **kw: object):  # type: ignore[no-untyped-def]
            if path.endswith("/logs"):
                time.sleep(0.02)
            return real(t, method, path, **kw)

        patcher = mock.patch.object(HttpTransport, "object", slow)
        patcher.start()
        self.addCleanup(patcher.stop)

    def bounded(self, call):  # type: ignore[no-untyped-def]
        got: list = []
        th = threading.Thread(target=lambda: got.append(call()), daemon=True)
        th.start()
        th.join(60)
        self.assertFalse(th.is_alive(), "paging the logs did not end")
        return got[0]

    def test_join_gives_up(self) -> None:
        # The writer writes when told, so that the test holds at any rate it writes: a burst
        # (seq's 1.6 MB) that the answer cannot hold (its default limit is 1 MiB, the logs keep
        # 2 MiB), then, once the join has paged its first page whole, a flood until the frames
        # after that page are dropped (the second page waits for it), and on. (Before,
        # a writer that wrote on at its own rate held only within a window of rates: too slow,
        # and the answer held all of it; too fast, and the first page found frames dropped.)
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        burst, flood = os.path.join(d, "burst"), os.path.join(d, "flood")
        h = self.sandbox.process.start(
            f"echo start; while :; do if [ -e {flood} ]; then seq 1 40000; elif [ -e {burst} ]; then seq 1 250000; rm -f {burst}; "
            "else sleep 0.01; fi; done")
        self.addCleanup(h.delete)
        self.sandbox.close()
        self.sandbox = self.daemon.sandbox(logs_page_size=2)
        self.addCleanup(self.sandbox.close)
        h = self.sandbox.process.connect(h.id)
        deadline = time.monotonic() + 30
        while h.get().last_cursor is None and time.monotonic() < deadline:
            time.sleep(0.01)
        c = h.get().last_cursor  # after "start": the answer is what comes after
        open(burst, "w").close()
        while os.path.exists(burst) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(os.path.exists(burst), "the writer did not write its burst")
        pages = [0]
        real = HttpTransport.object

        def flooded(t: HttpTransport, method: str, path: str, **kw: object):  # type: ignore[no-untyped-def]
            if not path.endswith("/logs"):
                return real(t, method, path, **kw)
            pages[0] += 1
            if pages[0] == 1:
                return real(t, method, path, **kw)
            open(flood, "w").close()  # and on: a join that did not give up would page for ever
            while True:  # this page, again, until frames after its cursor were dropped
                got = real(t, method, path, **kw)
                if got[1].get("truncatedHead") or time.monotonic() > deadline:
                    return got
                time.sleep(0.05)

        with mock.patch.object(HttpTransport, "object", flooded):
            r = self.bounded(lambda: h.interact(cursor=c, timeout=0.3))
        self.assertGreater(pages[0], 1, "the join gave up at its first page: no later page was dropped")
        self.assertGreater(r.omitted_bytes, 0)

    def test_collect_keeps_the_tail(self) -> None:
        # One seq, which writes tens of MB a second even on a busy machine: the 2 MiB the logs
        # keep are passed within the wait (a loop of short ones wrote too slowly there).
        r = self.bounded(lambda: self.sandbox.exec("seq 1 1000000000", timeout=0.3))
        self.addCleanup(self.sandbox.process.connect(r.process_id).delete)
        self.assertTrue(r.is_running)
        self.assertTrue(r.truncated)
        nums = r.stdout.split("\n")
        # What is kept is the output's tail: no hole in it (each line follows the one before).
        for a, b in zip(nums[1:-2], nums[2:-1]):
            self.assertEqual(int(b), int(a) + 1, "a hole between %s and %s" % (a, b))
