import unittest
from urllib.parse import urlsplit

from conch import Sandbox

from .daemon import shared
from conch.errors import ConchError, InvalidArgumentError, NetworkError, ResourceExhaustedError

from .proxy import BadGatewayProxy, CutAfterProxy, CutBeforeProxy, CuttingProxy, ExhaustedProxy, HangUpProxy


class StreamTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_stream_until_eof(self) -> None:
        h = self.sandbox.process.start("for i in 1 2 3; do echo $i; sleep 0.05; done; echo err >&2; exit 5")
        events = list(h.stream_logs())
        logs = [e.frame for e in events if e.type == "log" and e.frame]
        self.assertEqual("".join(f.data for f in logs if f.channel == "stdout"), "1\n2\n3\n")
        self.assertEqual("".join(f.data for f in logs if f.channel == "stderr"), "err\n")
        self.assertEqual([e.type for e in events][-2:], ["state", "eof"])
        state = events[-2].result
        self.assertEqual((state.reason, state.exit_code) if state else None, ("exited", 5))

    def test_stream_limit_and_resume_cursor(self) -> None:
        h = self.sandbox.process.start("seq 1 5")
        h.wait(timeout=30)
        first = list(h.stream_logs(limit=1))
        self.assertEqual(len(first), 1)
        rest = list(h.stream_logs(cursor=first[0].cursor))
        got = first[0].frame.data + "".join(e.frame.data for e in rest if e.type == "log" and e.frame)
        self.assertEqual(got, "1\n2\n3\n4\n5\n")

    def test_stream_limit_refused_as_logs_refuses_it(self) -> None:
        h = self.sandbox.process.start("echo a; sleep 0.05; echo b; sleep 0.05; echo c")
        h.wait(timeout=30)
        for limit in (-1, 2.5, float("nan"), float("inf"), True):
            with self.subTest(limit=limit):
                with self.assertRaises(InvalidArgumentError) as want:
                    h.logs(limit=limit)  # type: ignore[arg-type]
                with self.assertRaises(InvalidArgumentError) as got:
                    next(h.stream_logs(limit=limit))  # type: ignore[arg-type]
                self.assertEqual((got.exception.status, got.exception.message), (400, want.exception.message))
        everything = [e for e in h.stream_logs(limit=0) if e.type == "log"]
        self.assertEqual(len(everything), 3, "limit 0 is no bound")

    def test_resumes_after_dropped_connections_without_loss_or_repeat(self) -> None:
        # The process writes 2000 numbered lines slowly; every connection is cut after 3000 bytes.
        port = urlsplit(shared().url).port
        proxy = CuttingProxy(port or 0, cut_after=3000)
        self.addCleanup(proxy.close)
        via = Sandbox(proxy.url, shared().token)
        self.addCleanup(via.close)
        h = self.sandbox.process.start("for i in $(seq 1 2000); do echo line-$i; [ $((i % 200)) = 0 ] && sleep 0.05; done")
        frames = []
        for e in via.process.connect(h.id).stream_logs():
            if e.type == "log" and e.frame:
                frames.append(e.frame)
            self.assertLess(len(frames), 5000, "the stream repeats itself")
        cursors = [f.cursor for f in frames]
        self.assertEqual(len(cursors), len(set(cursors)), "a frame came twice")
        self.assertEqual("".join(f.data for f in frames), "".join(f"line-{i}\n" for i in range(1, 2001)))
        self.assertGreater(proxy.cuts, 0, "the proxy never cut a connection: the test tested nothing")

    def test_a_first_request_refused_raises_at_once(self) -> None:
        # A first request refused (a proxy's 502 or 504, a 503) is the caller's to handle, as any
        # other call's refusal is, and as the Go client and the TypeScript SDK do: not asked again.
        h = self.sandbox.process.start("seq 1 3; exit 4")
        h.wait(timeout=30)
        port = urlsplit(shared().url).port
        for status in (502, 503, 504):
            proxy = BadGatewayProxy(port or 0, times=1, status=status)
            self.addCleanup(proxy.close)
            via = Sandbox(proxy.url, shared().token)
            self.addCleanup(via.close)
            with self.assertRaises(ConchError) as cm:
                list(via.process.connect(h.id).stream_logs())
            self.assertEqual(cm.exception.status, status)
            self.assertEqual(proxy.connections, 1, status)

    def test_a_resume_refused_by_a_proxy_is_tried_again(self) -> None:
        # A proxy's 502 or 504, or a 503, on a resume may pass: the stream tries again rather
        # than lose the rest of the output.
        port = urlsplit(shared().url).port
        for status in (502, 503, 504):
            proxy = ExhaustedProxy(port or 0, b"two", refused=frozenset([2]), status=status)
            self.addCleanup(proxy.close)
            via = Sandbox(proxy.url, shared().token)
            self.addCleanup(via.close)
            h = self.sandbox.process.start("echo one; sleep 0.5; echo two; exit 3")
            events = list(via.process.connect(h.id).stream_logs())
            self.assertEqual(proxy.cuts, 1, status)
            self.assertEqual(proxy.connections, 3, f"{status}: cut, refused, then resumed")
            self.assertEqual([e.frame.data if e.type == "log" and e.frame else e.type for e in events],
                             ["one\n", "two\n", "state", "eof"], status)

    def test_a_resume_refused_at_max_streams_is_tried_again(self) -> None:
        # A stream cut while the daemon is at its --max-streams (another client took the place the
        # cut gave back) is refused 429 on its resume, with no Retry-After: the stream tries again
        # rather than lose the rest of the output.
        port = urlsplit(shared().url).port
        proxy = ExhaustedProxy(port or 0, b"two", refused=frozenset([2]))
        self.addCleanup(proxy.close)
        via = Sandbox(proxy.url, shared().token)
        self.addCleanup(via.close)
        h = self.sandbox.process.start("echo one; sleep 0.5; echo two; exit 3")
        events = list(via.process.connect(h.id).stream_logs())
        self.assertEqual(proxy.cuts, 1, "the stream was cut")
        self.assertEqual(proxy.connections, 3, "cut, refused, then resumed")
        self.assertEqual([e.frame.data if e.type == "log" and e.frame else e.type for e in events],
                         ["one\n", "two\n", "state", "eof"])

    def test_a_first_request_refused_at_max_streams_raises_at_once(self) -> None:
        port = urlsplit(shared().url).port
        proxy = ExhaustedProxy(port or 0, b"", refused=frozenset([1]))
        self.addCleanup(proxy.close)
        via = Sandbox(proxy.url, shared().token)
        self.addCleanup(via.close)
        h = self.sandbox.process.start("echo one")
        with self.assertRaises(ResourceExhaustedError):
            list(via.process.connect(h.id).stream_logs())
        self.assertEqual(proxy.connections, 1, "not asked again")
        h.wait(timeout=30)

    def test_a_first_request_not_answered_raises_at_once(self) -> None:
        # A first request that cannot be sent, or gets no answer, is the caller's to handle, as any
        # other call's failure is, and as the Go client and the TypeScript SDK do: not sent again.
        h = self.sandbox.process.start("echo one")
        h.wait(timeout=30)
        port = urlsplit(shared().url).port
        proxy = HangUpProxy(port or 0, b"", hung=frozenset(range(1, 100)))
        self.addCleanup(proxy.close)
        via = Sandbox(proxy.url, shared().token)
        self.addCleanup(via.close)
        with self.assertRaises(NetworkError):
            list(via.process.connect(h.id).stream_logs())
        self.assertEqual(proxy.connections, 1, "not asked again")
        # No daemon at the address at all: the same.
        proxy.close()
        with self.assertRaises(NetworkError):
            list(via.process.connect(h.id).stream_logs())

    def test_a_resume_not_answered_is_tried_again(self) -> None:
        # A resume that gets no answer (the daemon restarting) is tried again, as a refusal that
        # may pass is, up to five times in a row; then the stream raises.
        port = urlsplit(shared().url).port
        for hung, connections in ((frozenset([2, 3]), 4), (frozenset(range(2, 100)), 6)):
            proxy = HangUpProxy(port or 0, b"two", hung=hung)
            self.addCleanup(proxy.close)
            via = Sandbox(proxy.url, shared().token)
            self.addCleanup(via.close)
            h = self.sandbox.process.start("echo one; sleep 0.5; echo two; exit 3")
            events = []
            if connections == 4:
                events = list(via.process.connect(h.id).stream_logs())
                self.assertEqual([e.frame.data if e.type == "log" and e.frame else e.type for e in events],
                                 ["one\n", "two\n", "state", "eof"])
            else:
                with self.assertRaises(NetworkError):
                    for e in via.process.connect(h.id).stream_logs():
                        events.append(e)
                self.assertEqual([e.frame.data if e.type == "log" and e.frame else e.type for e in events], ["one\n"])
            self.assertEqual(proxy.cuts, 1)
            self.assertEqual(proxy.connections, connections, "the cut, the resumes")
            h.wait(timeout=30)

    def test_state_kept_when_the_connection_drops_before_it(self) -> None:
        # The first connection ends after the last frame, before state: the resume answers 204.
        port = urlsplit(shared().url).port
        proxy = CutBeforeProxy(port or 0, b"event: state")
        self.addCleanup(proxy.close)
        via = Sandbox(proxy.url, shared().token)
        self.addCleanup(via.close)
        h = self.sandbox.process.start("seq 1 3; exit 4")
        h.wait(timeout=30)
        events = list(via.process.connect(h.id).stream_logs())
        self.assertEqual(proxy.cuts, 1, "the proxy never cut the stream: the test tested nothing")
        self.assertEqual([e.type for e in events], ["log", "state", "eof"])
        self.assertEqual(events[0].frame.data if events[0].frame else None, "1\n2\n3\n")
        state = events[1].result
        self.assertEqual((state.reason, state.exit_code) if state else None, ("exited", 4))

    def test_state_comes_once_when_the_connection_drops_after_it(self) -> None:
        # The first connection ends after state, before eof. For a process that wrote
        # nothing the stream has no frame to resume after: the daemon would send state
        # again to a stream resumed without a cursor.
        port = urlsplit(shared().url).port
        for cmd, types in (("exit 4", ["state", "eof"]), ("echo hi; exit 4", ["log", "state", "eof"])):
            proxy = CutAfterProxy(port or 0, b"event: state")
            self.addCleanup(proxy.close)
            via = Sandbox(proxy.url, shared().token)
            self.addCleanup(via.close)
            h = self.sandbox.process.start(cmd)
            h.wait(timeout=30)
            events = list(via.process.connect(h.id).stream_logs())
            self.assertEqual(proxy.cuts, 1, "the proxy never cut the stream: the test tested nothing")
            self.assertEqual([e.type for e in events], types, cmd)
            state = events[-2].result
            self.assertEqual((state.reason, state.exit_code) if state else None, ("exited", 4), cmd)

    def test_stream_resumed_past_the_end_still_says_how_it_ended(self) -> None:
        h = self.sandbox.process.start("echo x; exit 3")
        h.wait(timeout=30)
        last = h.logs().items[-1].cursor
        events = list(h.stream_logs(cursor=last))
        self.assertEqual([e.type for e in events], ["state", "eof"])
        self.assertEqual(events[0].result.exit_code if events[0].result else None, 3)

    def test_state_after_a_resume_past_the_end_is_the_results(self) -> None:
        # The state of a stream resumed past the end is the command's result, as its
        # wait gives it: the directory it ended in, nothing of its record beside it.
        with self.sandbox.process.create_session(cwd="/tmp") as sess:
            h = sess.start("cd /usr; echo hi")
            self.assertEqual(h.wait(timeout=30).cwd, "/usr")
            page = h.logs()
            events = list(h.stream_logs(cursor=page.next))
            self.assertEqual([e.type for e in events], ["state", "eof"])
            state = events[0].result
            self.assertIsNotNone(state)
            assert state is not None
            self.assertEqual((state.reason, state.exit_code, state.cwd), ("exited", 0, "/usr"))
            self.assertEqual(state, h.wait(timeout=30))


if __name__ == "__main__":
    unittest.main()
