"""Answers no daemon gives: every call still ends within its bounds, with one of the SDK's errors."""

from __future__ import annotations

import socket
import threading
import time
import unittest
from typing import Any, Tuple

from conch import NetworkError, Sandbox, UnexpectedResponseError

from .hostile import HostileServer, read_request


class HostileTest(unittest.TestCase):
    def _sandbox(self, script, read_timeout: float = 1.0) -> Sandbox:  # type: ignore[no-untyped-def]
        srv = HostileServer(script)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=read_timeout)
        self.addCleanup(sb.close)
        self._srv = srv
        return sb

    def test_a_body_that_trickles_in_ends_at_read_timeout(self) -> None:
        # One byte each 50 ms: every read is answered well within read_timeout, but the
        # whole answer is not; it was read to its end, 20 s later.
        body = b'{"status":"ok"}' + b" " * 400

        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            for i in range(len(body)):
                if self._srv.stop.is_set():
                    return
                c.sendall(body[i:i + 1])
                time.sleep(0.05)

        sb = self._sandbox(script)
        with self.assertRaises(NetworkError):
            sb.health()

    def test_interim_answers_without_end_end_at_read_timeout(self) -> None:
        def script(c: socket.socket) -> None:
            read_request(c)
            for _ in range(400):
                if self._srv.stop.is_set():
                    return
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                time.sleep(0.05)
            c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"status":"ok"}')

        sb = self._sandbox(script)
        with self.assertRaises(NetworkError):
            sb.health()

    def test_header_lines_that_trickle_in_end_at_read_timeout(self) -> None:
        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\n")
            for _ in range(90):
                if self._srv.stop.is_set():
                    return
                c.sendall(b"X-A: b\r\n")
                time.sleep(0.2)
            c.sendall(b'Content-Length: 15\r\n\r\n{"status":"ok"}')

        sb = self._sandbox(script)
        with self.assertRaises(NetworkError):
            sb.health()

    def test_a_chunked_body_larger_than_any_answer_is_refused(self) -> None:
        # 300 MiB of blanks, then JSON: it was read whole, into memory, and answered.
        chunk = b" " * (1 << 20)

        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(300):
                if self._srv.stop.is_set():
                    return
                c.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            c.sendall(b'f\r\n{"status":"ok"}\r\n0\r\n\r\n')

        sb = self._sandbox(script, read_timeout=120)
        with self.assertRaises(UnexpectedResponseError) as cm:
            sb.process.list()
        self.assertIn("larger than any answer", str(cm.exception))

    def test_a_content_length_larger_than_any_answer_is_refused_unread(self) -> None:
        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (1 << 40))
            self._srv.stop.wait(60)

        sb = self._sandbox(script, read_timeout=120)
        with self.assertRaises(UnexpectedResponseError):
            sb.process.connect("p1").get()


if __name__ == "__main__":
    unittest.main()


class ShapeTest(unittest.TestCase):
    def _fake(self, status: int, body: bytes) -> Sandbox:
        from .fake import FakeServer

        srv = FakeServer(status, body)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        return sb

    def test_json_nested_past_the_recursion_limit_is_not_the_apis(self) -> None:
        for deep in (b"[" * 100000 + b"]" * 100000, b'{"a":' * 100000 + b"1" + b"}" * 100000):
            for status in (200, 404, 500):
                with self.subTest(status=status, kind=deep[:1]):
                    sb = self._fake(status, deep)
                    with self.assertRaises(UnexpectedResponseError):
                        sb.process.connect("p1").get()


    def test_fields_of_the_wrong_type_are_not_leaked_errors(self) -> None:
        import json

        run = {"id": "p1", "reason": "exited", "exitCode": 0, "stdout": "", "output": "", "logs": []}
        for v in ("x", [1], {"a": 1}, 1e999, None, True):
            with self.subTest(omittedBytes=v):
                sb = self._fake(200, json.dumps(dict(run, omittedBytes=v)).encode())
                r = sb.exec("x")
                self.assertEqual(r.omitted_bytes, 0)
        proc = {"id": "p1", "kind": "pty", "state": "running"}
        for v in ("x", [1], {"a": 1}, 1e999, None):
            with self.subTest(cols=v):
                sb = self._fake(200, json.dumps(dict(proc, terminal={"cols": v, "rows": 24})).encode())
                p = sb.process.connect("p1").get()
                self.assertEqual(p.terminal.rows if p.terminal else None, 24)

class StreamTest(unittest.TestCase):
    def _stream(self, events):  # type: ignore[no-untyped-def]
        """The events stream_logs yields from a daemon that answers each stream with events()'s bytes."""

        def script(c: socket.socket) -> None:
            read_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for b in events():
                if srv.stop.is_set():
                    return
                c.sendall(b)

        srv = HostileServer(script)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        return sb.process.connect("p1").stream_logs()

    def test_an_endless_line_is_not_the_apis(self) -> None:
        # 64 MiB without a newline (then an eof): it was read whole into memory.
        def events():  # type: ignore[no-untyped-def]
            yield b"data: "
            for _ in range(64):
                yield b"x" * (1 << 20)
            yield b"\n\nevent: eof\ndata: {}\n\n"

        with self.assertRaises(UnexpectedResponseError):
            list(self._stream(events))

    def test_an_event_of_endless_lines_is_not_the_apis(self) -> None:
        def events():  # type: ignore[no-untyped-def]
            yield b"event: log\n"
            for _ in range(64):
                yield b"data: " + b"x" * (1 << 20) + b"\n"
            yield b"\nevent: eof\ndata: {}\n\n"

        with self.assertRaises(UnexpectedResponseError):
            list(self._stream(events))

    def test_events_of_the_wrong_shape_are_skipped(self) -> None:
        def events():  # type: ignore[no-untyped-def]
            yield b"retry: 1\n\n"
            yield b"event: log\ndata: " + b"[" * 100000 + b"]" * 100000 + b"\n\n"
            yield b"event: log\ndata: [1, 2]\n\n"
            yield b'event: log\nid: 7\ndata: {"cursor": 7, "data": ["x"], "timestamp": "now"}\n\n'
            yield b"event: warning\ndata: null\n\n"
            yield b"event: eof\ndata: {}\n\n"

        types = [ev.type for ev in self._stream(events)]
        self.assertEqual(types, ["log", "eof"])


class PagingTest(unittest.TestCase):
    def _ends(self, body: bytes, call) -> BaseException:  # type: ignore[no-untyped-def]
        """The error call(sandbox) raises against a daemon that answers body to every request."""
        from .fake import FakeServer

        srv = FakeServer(200, body)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        out = _ended_within(self, lambda: call(sb))
        self.assertIsInstance(out, UnexpectedResponseError)
        return out

    def test_a_pty_list_whose_next_does_not_move_ends(self) -> None:
        self._ends(b'{"items":[{"id":"p1","kind":"pty","state":"running"}],"next":"c1"}', lambda sb: sb.pty.list())

    def test_logs_pages_that_do_not_move_end(self) -> None:
        body = (b'{"id":"p1","reason":"exited","exitCode":0,"omittedBytes":5,"omittedAfter":"c1","next":"c9",'
                b'"logs":[{"cursor":"c1","channel":"stdout","data":"x"}],'
                b'"items":[{"cursor":"c1","channel":"stdout","data":"x"}]}')
        self._ends(body, lambda sb: sb.exec("x"))

    def test_logs_pages_that_each_name_a_new_cursor_end(self) -> None:
        # A run's answer that left 10 bytes out, then logs pages each of a new cursor, for ever.
        for data in (b"z", b""):
            def script(n: int, data: bytes = data) -> Tuple[int, bytes, str]:
                if n == 1:
                    return (200, b'{"id":"p1","reason":"exited","exitCode":0,"omittedBytes":10,"omittedAfter":"1",'
                                 b'"next":"9","logs":[{"cursor":"1","channel":"stdout","data":"x"},'
                                 b'{"cursor":"9","channel":"stdout","data":"y"}]}', "application/json")
                return _new_cursor_page(n, data)

            srv = self._scripted(script)
            out = _ended_within(self, lambda: self._sb(srv).exec("x"))
            self.assertIsInstance(out, UnexpectedResponseError)
            self.assertIn("past the 10 bytes", str(out))
            self.assertLessEqual(srv.calls, 1 + 12)  # the run, the 11 bytes up to next, then one

    def test_a_runs_logs_read_from_the_start_from_pages_that_each_name_a_new_cursor_end(self) -> None:
        """A run past its wait window reads its output from the logs once it is back: the answers told 6
        bytes (2 held and 3 left out by the run's, 1 by the interact's), and pages past them are not the
        daemon's for a process that ended; one still running (waiting for input) wrote on after its last
        answer, and its result stops there."""
        for ended in (True, False):
            for data in (b"z", b""):
                # The run's 202, an interact's answer (200: ended, else 202 waiting for input),
                # then logs pages each of a new cursor, for ever.
                def script(n: int, ended: bool = ended, data: bytes = data) -> Tuple[int, bytes, str]:
                    if n == 1:
                        return (202, b'{"id":"p1","processId":"p1","kind":"exec","state":"running","next":"1",'
                                     b'"omittedBytes":3,"omittedAfter":"0",'
                                     b'"logs":[{"cursor":"1","channel":"stdout","data":"ab"}]}', "application/json")
                    if n == 2:
                        logs = b'"logs":[{"cursor":"2","channel":"stdout","data":"c"}],"next":"2"'
                        if ended:
                            return (200, b'{"id":"p1","reason":"exited","exitCode":0,' + logs + b'}', "application/json")
                        return (202, b'{"id":"p1","processId":"p1","kind":"exec","state":"running",'
                                     b'"waitingForInput":true,' + logs + b'}', "application/json")
                    return _new_cursor_page(n, data)

                srv = self._scripted(script)
                out = _ended_within(self, lambda: self._sb(srv).exec("x"))
                if ended:
                    self.assertIsInstance(out, UnexpectedResponseError)
                    self.assertIn("past the 6 bytes", str(out))
                else:
                    self.assertEqual(out.output, data.decode() * 6)
                    self.assertTrue(out.waiting_for_input)
                self.assertLessEqual(srv.calls, 2 + 7)  # the run, the interact, the 6 bytes, then one

    def _scripted(self, script: Any) -> Any:
        from .fake import ScriptedServer
        srv = ScriptedServer(script)
        self.addCleanup(srv.close)
        return srv

    def _sb(self, srv: Any) -> Sandbox:
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        return sb


def _new_cursor_page(n: int, data: bytes) -> Tuple[int, bytes, str]:
    """A logs page of one frame holding data, at a cursor of its own, naming it next."""
    c = str(100 + n).encode()
    return (200, b'{"items":[{"cursor":"' + c + b'","channel":"stdout","data":"' + data + b'"}],'
                 b'"next":"' + c + b'"}', "application/json")


def _ended_within(test: unittest.TestCase, call: Any) -> Any:
    """What call returned, or raised, within 60 s (a hang guard: the daemon's pages go on for ever)."""
    out: list = []

    def go() -> None:
        try:
            out.append(call())
        except BaseException as e:  # noqa: B902
            out.append(e)

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(60)
    test.assertFalse(th.is_alive(), "the call pages for ever")
    return out[0]


class WaitTest(unittest.TestCase):
    def _always(self, body: bytes) -> "tuple":
        """A sandbox of a daemon that answers every request 202 with body at once, and the
        daemon, whose ``calls`` counts the requests."""
        from .fake import ScriptedServer

        srv = ScriptedServer(lambda n: (202, body, "application/json"))
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        return sb, srv

    def test_a_wait_answered_202_at_once_is_not_asked_again_before_its_window_passed(self) -> None:
        sb, srv = self._always(b'{"id":"p1","kind":"exec","state":"running"}')
        r = sb.process.connect("p1").wait(timeout=1)
        self.assertEqual(r.raw_reason, "wait_timeout")
        # One window of a second: a wait or two, not the thousands asked at once.
        self.assertLess(srv.calls, 4)

    def test_a_ready_answered_202_at_once_is_not_asked_again_before_its_window_passed(self) -> None:
        sb, srv = self._always(b'{"id":"p1","kind":"exec","state":"running"}')
        r = sb.process.connect("p1").ready(port=80, timeout=1)
        self.assertFalse(r.ready)
        self.assertLess(srv.calls, 4)

    def test_a_runs_interacts_answered_202_at_once_are_not_asked_again_before_their_window_passed(self) -> None:
        sb, srv = self._always(b'{"id":"p1","processId":"p1","kind":"exec","state":"running","next":"0"}')
        # The logs pages are answered 202 too, not the API's: the run's end, paging them, raises.
        with self.assertRaises(UnexpectedResponseError):
            sb.exec("x", timeout=1)
        # One window of a second: a run, an interact or two and a page, not the dozens asked at once.
        self.assertLess(srv.calls, 6)


try:
    import websockets  # noqa: F401

    HAVE_WEBSOCKETS = True
except ImportError:
    HAVE_WEBSOCKETS = False


@unittest.skipUnless(HAVE_WEBSOCKETS, "attach needs the websockets package")
class AttachTest(unittest.TestCase):
    def _recv(self, frames) -> BaseException:  # type: ignore[no-untyped-def]
        """What the first recv of an attachment raises when the daemon sends frames()'s bytes."""
        import threading

        from .hostile import accept_websocket

        def script(c: socket.socket) -> None:
            accept_websocket(c)
            for b in frames():
                if srv.stop.is_set():
                    return
                c.sendall(b)
            srv.stop.wait(120)

        srv = HostileServer(script)
        self.addCleanup(srv.close)
        sb = Sandbox(srv.url, "t", read_timeout=10)
        self.addCleanup(sb.close)
        conn = sb.process.connect("p1").attach()
        self.addCleanup(conn.close)
        out: list = []

        def go() -> None:
            try:
                out.append(conn.recv())
            except BaseException as e:  # noqa: B902
                out.append(e)

        th = threading.Thread(target=go, daemon=True)
        th.start()
        th.join(60)  # a hang guard: the message never ends
        self.assertFalse(th.is_alive(), "recv waits for a message that never ends, holding what came of it")
        self.assertIsInstance(out[0], NetworkError)
        return out[0]

    def test_a_frame_of_2_to_the_63_bytes_is_refused(self) -> None:
        def frames():  # type: ignore[no-untyped-def]
            yield b"\x82\x7f" + ((1 << 63) - 1).to_bytes(8, "big")
            for _ in range(64):
                yield b"x" * (1 << 20)

        self._recv(frames)

    def test_a_message_fragmented_without_end_is_refused(self) -> None:
        def frames():  # type: ignore[no-untyped-def]
            chunk = b"x" * (1 << 16)
            yield b"\x02\x7f" + len(chunk).to_bytes(8, "big") + chunk
            for _ in range(1024):
                yield b"\x00\x7f" + len(chunk).to_bytes(8, "big") + chunk

        self._recv(frames)
