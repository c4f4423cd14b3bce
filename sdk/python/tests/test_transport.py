import copy
import gc
import math
import os
import pickle
import resource
import signal
import sys
import tempfile
import threading
import time
import unittest
import warnings
from typing import Any, Callable, Tuple, TypeVar
from unittest import mock
from urllib.parse import urlsplit

from conch import NetworkError, Sandbox
from conch._transport import HttpTransport

from .daemon import Daemon, shared
from .proxy import DroppingProxy
from .signals import sigint_raises


class ResendTest(unittest.TestCase):
    """A request that may have reached the daemon is never sent twice unless that does no harm."""

    def _through_proxy(self, drop: int, rst: bool = False) -> Tuple[DroppingProxy, Sandbox]:
        """A proxy to the shared daemon that drops the answer to request number drop of its first
        connection, and a sandbox that goes through it; both closed when the test ends."""
        proxy = DroppingProxy(urlsplit(shared().url).port or 0, drop=drop, rst=rst)
        self.addCleanup(proxy.close)
        sb = Sandbox(proxy.url, shared().token)
        self.addCleanup(sb.close)
        return proxy, sb

    def _run_once(self, rst: bool) -> None:
        proxy, sb = self._through_proxy(drop=2, rst=rst)
        d = tempfile.mkdtemp(prefix="conch-pysdk-test-")
        out = os.path.join(d, "ran")
        self.addCleanup(lambda: (os.path.exists(out) and os.remove(out), os.rmdir(d)))
        sb.health()  # the first request: its connection is kept alive, then reused
        with self.assertRaises(NetworkError) as cm:
            sb.exec(f"echo ran >> {out}; sleep 0.5", timeout=30)
        self.assertIn("may have been carried out", str(cm.exception))
        time.sleep(1)
        with open(out) as f:
            self.assertEqual(f.read(), "ran\n", "the run was sent twice")
        self.assertEqual(proxy.dropped, 1)
        # The next call goes on a new connection and works.
        self.assertEqual(sb.exec("echo ok", timeout=30).stdout, "ok\n")

    def test_run_whose_answer_was_lost_is_not_sent_again(self) -> None:
        self._run_once(rst=False)

    def test_run_whose_connection_was_reset_is_not_sent_again(self) -> None:
        self._run_once(rst=True)

    def test_a_get_the_daemon_hung_up_on_says_it_was_reached(self) -> None:
        # A server that reads each request and closes without an answer: the daemon was
        # reached and the request went, which the error says (it said "cannot reach").
        import socket

        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        self.addCleanup(srv.close)

        def serve() -> None:
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                c.recv(65536)
                c.close()

        threading.Thread(target=serve, daemon=True).start()
        sb = Sandbox(f"http://127.0.0.1:{srv.getsockname()[1]}", "t")
        self.addCleanup(sb.close)
        with self.assertRaises(NetworkError) as cm:
            sb.process.connect("p1").get()
        self.assertIn("closed before the daemon answered GET", str(cm.exception))
        self.assertNotIn("cannot reach", str(cm.exception))
        self.assertNotIn("may have been carried out", str(cm.exception))

    def test_get_whose_answer_was_lost_is_sent_again(self) -> None:
        proxy, sb = self._through_proxy(drop=2)
        sb.health()
        self.assertEqual(sb.health().get("status"), "ok")
        self.assertEqual(proxy.dropped, 1)

    def test_connection_closed_while_idle_is_not_reused(self) -> None:
        # The kept-alive connection is closed while it sits idle: the run goes on a new one.
        proxy, sb = self._through_proxy(drop=1000)
        sb.health()
        proxy.hang_up()
        time.sleep(0.2)
        r = sb.exec("echo once", timeout=30)
        self.assertEqual((r.exit_code, r.stdout), (0, "once\n"))
        self.assertEqual(proxy.connections, 2)

    def test_close_during_a_call_leaves_its_connection_closed(self) -> None:
        # close() while a run is in flight on another thread: once the run is done with its
        # connection, that connection is closed, not kept for the next call.
        proxy, sb = self._through_proxy(drop=1000)
        got = []
        t = threading.Thread(target=lambda: got.append(sb.exec("sleep 1; echo done", timeout=30)))
        t.start()
        time.sleep(0.4)
        self.assertEqual(proxy.connections, 1)
        sb.close()
        t.join(30)
        self.assertFalse(t.is_alive())
        self.assertEqual(got[0].stdout, "done\n")
        self.assertEqual(sb.health().get("status"), "ok")
        self.assertEqual(proxy.connections, 2, "the connection of the call in flight at close() was kept")


class PoolTest(unittest.TestCase):
    def test_a_connection_past_descriptor_1024_is_reused(self) -> None:
        # A runtime with many files open gets descriptors past select()'s FD_SETSIZE for its
        # connections: the check that an idle one is still open refused each, so that every
        # request opened a new connection.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 1200
        if soft < want:
            if hard != resource.RLIM_INFINITY and hard < want:
                self.skipTest(f"RLIMIT_NOFILE {hard} is under {want}")
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        held = []
        self.addCleanup(lambda: [os.close(fd) for fd in held])
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        proxy = DroppingProxy(urlsplit(shared().url).port or 0, drop=1000)
        self.addCleanup(proxy.close)
        sb = Sandbox(proxy.url, shared().token)
        self.addCleanup(sb.close)
        for _ in range(3):
            self.assertEqual(sb.health().get("status"), "ok")
        self.assertEqual(proxy.connections, 1, "the kept-alive connection was not reused")


    def test_a_sandbox_collected_unclosed_closes_its_connections(self) -> None:
        # Dropped without close() (or with), its kept-alive connections are closed as it is
        # collected, not left for the socket's own finalizer to warn about.
        sb = Sandbox(shared().url, shared().token)
        sb.health()
        sock = sb.transport._idle[0].sock
        del sb
        gc.collect()
        self.assertEqual(sock.fileno(), -1, "the pooled connection is still open")

        unraisable = []
        self.addCleanup(setattr, sys, "unraisablehook", sys.unraisablehook)
        sys.unraisablehook = unraisable.append
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ResourceWarning)
            sb = Sandbox(shared().url, shared().token)
            sb.health()
            del sb
            gc.collect()
        self.assertEqual([str(w.message) for w in seen if issubclass(w.category, ResourceWarning)], [])
        self.assertEqual([repr(u.exc_value) for u in unraisable], [])


class InterruptTest(unittest.TestCase):
    def test_ctrl_c_during_a_call_closes_its_connection(self) -> None:
        # The connection a call was interrupted on (its answer not read) is never kept, and
        # was left open for as long as the KeyboardInterrupt's traceback lived.
        proxy = DroppingProxy(urlsplit(shared().url).port or 0, drop=1000)
        self.addCleanup(proxy.close)
        sb = Sandbox(proxy.url, shared().token)
        self.addCleanup(sb.close)
        sb.health()
        self.assertEqual(proxy.connections, 1)
        conn = sb.transport._idle[0]
        name = "interrupted-" + str(os.getpid())
        watcher = shared().sandbox()
        self.addCleanup(watcher.close)

        def interrupt_once_running() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if watcher.process.list(name=name, state="running").items:
                    time.sleep(0.2)  # the run's answer is being waited for
                    os.kill(os.getpid(), signal.SIGINT)
                    return
                time.sleep(0.05)

        sigint_raises(self)
        t = threading.Thread(target=interrupt_once_running, daemon=True)
        t.start()
        caught = None
        try:
            sb.exec("sleep 10", name=name, timeout=30)
        except KeyboardInterrupt as e:
            caught = e  # its traceback kept, as a REPL keeps the last one
        t.join(30)
        self.addCleanup(lambda: [watcher.process.connect(p.id).kill("KILL")
                                 for p in watcher.process.list(name=name, state="running").items])
        self.assertIsNotNone(caught, "the call was not interrupted")
        self.assertIsNone(conn.sock, "the interrupted call's connection is still open")
        self.assertEqual(sb.exec("echo next", timeout=30).stdout, "next\n")
        self.assertEqual(proxy.connections, 2)


class CopyTest(unittest.TestCase):
    def test_copied_handles_share_the_connection_and_pickling_says_why_not(self) -> None:
        # deepcopy of a handle (an agent's state copied whole) raised "cannot pickle 'socket'
        # object" once the pool held a connection.
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        h = sb.process.start("echo copied")
        self.assertEqual(h.wait(timeout=30).reason, "exited")
        with sb.process.create_session() as s:
            for obj in (h, s, sb):
                for c in (copy.copy(obj), copy.deepcopy(obj)):
                    self.assertIsNot(c, obj)
                    self.assertIs(c.transport if isinstance(c, Sandbox) else c._t, sb.transport)
            self.assertEqual(copy.deepcopy(h).logs().items[0].data, "copied\n")
            self.assertEqual(copy.deepcopy(s).run("echo in copy", timeout=30).stdout, "in copy\n")
            for obj in (h, s, sb):
                with self.assertRaises(TypeError) as cm:
                    pickle.dumps(obj)
                self.assertIn("to_json", str(cm.exception))
                self.assertNotIn(shared().token, str(cm.exception))


def _wait_stopped(pid: int) -> None:
    """Waits until every thread of pid is stopped: SIGSTOP reaches a process's threads one by one,
    and a thread still running can answer a request sent meanwhile (seen once in CI)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


T = TypeVar("T")


def frozen_with(test: unittest.TestCase, start: Callable[[Sandbox], T]) -> Tuple[Sandbox, T]:
    """A daemon of test's own frozen (SIGSTOP) once start(sandbox) has started what the test
    needs on it, with a read_timeout of 1 s: the sandbox, and what start returned."""
    d = Daemon(["--drain-timeout", "0"])  # what it started must not hold up its stop
    test.addCleanup(d.stop)
    sb = d.sandbox()
    test.addCleanup(sb.close)
    h = start(sb)
    sb.transport.read_timeout = 1.0  # as Sandbox(read_timeout=1.0)
    d.proc.send_signal(signal.SIGSTOP)
    test.addCleanup(d.proc.send_signal, signal.SIGCONT)
    _wait_stopped(d.proc.pid)
    return sb, h


class FrozenDaemonTest(unittest.TestCase):
    def test_calls_without_a_wait_time_out_on_a_frozen_daemon(self) -> None:
        sb, h = frozen_with(self, lambda sb: sb.process.start("sleep 30"))
        outcomes: list = []

        def calls() -> None:
            for call in (sb.health, lambda: sb.process.get(h.id), lambda: sb.process.list()):
                started = time.monotonic()
                try:
                    call()
                    outcomes.append(("answered", 0.0))
                except NetworkError:
                    outcomes.append(("NetworkError", time.monotonic() - started))

        t = threading.Thread(target=calls, daemon=True)
        t.start()
        t.join(15)
        self.assertFalse(t.is_alive(), "a call hung on the frozen daemon")
        self.assertEqual([o[0] for o in outcomes], ["NetworkError"] * 3)
        self.assertTrue(all(took < 5 for _, took in outcomes), outcomes)

    def test_interact_without_a_timeout_raises_on_a_frozen_daemon(self) -> None:
        # An interact with no timeout once asked the daemon for none and waited on its socket
        # with no limit: a frozen daemon held it for ever. It asks for at most MAX_WAIT_WINDOW
        # (280 s), lowered here to 1 ms so that the call raises once that plus 30 s is past.
        sb, h = frozen_with(self, lambda sb: sb.process.start("sleep 300"))
        outcome: list = []

        def call() -> None:
            try:
                h.interact()
                outcome.append("answered")
            except NetworkError as e:
                outcome.append(str(e))

        with mock.patch("conch.process.MAX_WAIT_WINDOW", 0.001):
            t = threading.Thread(target=call, daemon=True)
            t.start()
            t.join(120)
        self.assertFalse(t.is_alive(), "interact hung on the frozen daemon")
        self.assertEqual(len(outcome), 1)
        self.assertIn("may have been carried out", outcome[0])


class InteractCapTest(unittest.TestCase):
    def test_interact_asks_for_at_most_the_wait_cap(self) -> None:
        # What each interact asks the daemon to wait, and how long its socket waits: with no
        # timeout (or 0, or one past the cap) 280 s, as the TypeScript SDK's, plus 30 s.
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        h = sb.process.start("true")
        self.assertEqual(h.wait(timeout=30).reason, "exited")
        sent: list = []
        real = HttpTransport.object

        def recorded(t: HttpTransport, method: str, path: str, **kw: Any):  # type: ignore[no-untyped-def]
            if path.endswith("/interact"):
                sent.append((kw["json_body"]["timeout"], kw["timeout"]))
            return real(t, method, path, **kw)

        with mock.patch.object(HttpTransport, "object", recorded):
            for timeout in (None, 0, math.inf, 3600, 280, 5):
                self.assertEqual(h.interact(cursor="0", timeout=timeout).reason, "exited")
        self.assertEqual(sent, [(280000, 310.0)] * 5 + [(5000, 35.0)])

    def test_interact_comes_back_running_at_the_cap(self) -> None:
        # The cap lowered to 0.5 s: a process that runs on comes back running, with next.
        sb = shared().sandbox()
        self.addCleanup(sb.close)
        h = sb.process.start("echo up; sleep 30")
        self.addCleanup(h.kill, "KILL")
        self.assertTrue(h.ready(pattern="up", timeout=30).ready)
        with mock.patch("conch.process.MAX_WAIT_WINDOW", 0.5):
            r = h.interact(cursor="0")
        self.assertTrue(r.is_running)
        self.assertEqual(r.came_back, "wait_timeout")
        self.assertEqual(r.stdout, "up\n")
        self.assertIsNotNone(r.next)


if __name__ == "__main__":
    unittest.main()
