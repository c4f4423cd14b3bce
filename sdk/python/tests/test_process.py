import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from unittest import mock

from conch import (
    AuthenticationError, ConchError, ConfigurationError, InvalidArgumentError, NetworkError, NotFoundError, ProcessDto, RunResult, Sandbox,
    StdinFullError, UnexpectedResponseError, UnsupportedOperationError, WaitResult,
)
from conch.errors import error_from
from conch.sandbox import discover

from .daemon import shared
from .fake import FakeServer


class ProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_a_delete_longer_than_the_read_timeout_is_answered(self) -> None:
        # A DELETE stops the process first: KILL 5 s after TERM, which this one ignores.
        quick = shared().sandbox(read_timeout=1)
        self.addCleanup(quick.close)
        h = quick.process.start("trap '' TERM; echo up; while :; do sleep 1; done")
        h.ready(pattern="up", timeout=10)
        h.delete()
        with self.assertRaises(NotFoundError):
            h.get()

    def test_exec_shell_and_argv(self) -> None:
        r = self.sandbox.exec("echo hi; exit 3")
        self.assertEqual((r.reason, r.exit_code, r.stdout), ("exited", 3, "hi\n"))
        r = self.sandbox.process.run(["printf", "%s|", "a b", "$HOME"])
        self.assertEqual(r.stdout, "a b|$HOME|")

    def test_signaled(self) -> None:
        r = self.sandbox.exec("kill -KILL $$")
        self.assertEqual((r.reason, r.signal), ("signaled", "KILL"))

    def test_signal_caught_or_not(self) -> None:
        # A process that catches the TERM it is sent and exits with a status
        # of its own is signaled, handled, with that status; one the TERM
        # ends is signaled with 128+15 and not handled.
        for cmd, code, handled in (("trap 'exit 15' TERM; echo ready; sleep 30 & wait", 15, True),
                                   ("echo ready; exec sleep 30", 143, False)):
            h = self.sandbox.process.start(cmd)
            self.addCleanup(h.delete)
            self.assertTrue(h.ready(pattern="ready", timeout=30).ready)
            h.kill("TERM")
            w = h.wait(timeout=30)
            self.assertEqual((w.reason, w.signal, w.exit_code, w.handled), ("signaled", "TERM", code, handled))
            self.assertNotIn("handled", w.extra)
            self.assertEqual((h.get().exit_code, h.get().handled), (code, handled))

    def test_long_argv_record(self) -> None:
        # The record keeps an argv's head, saying how many elements the whole had.
        argv = ["true"] + ["x" * 30] * 3000
        h = self.sandbox.process.start(argv)
        self.addCleanup(h.delete)
        h.wait(timeout=30)
        p = h.get()
        self.assertTrue(p.argv_truncated)
        self.assertEqual(p.argv_count, len(argv))
        self.assertLess(len(p.argv or []), len(argv))
        self.assertNotIn("argvCount", p.extra)

    def test_start_stdin_wait_logs(self) -> None:
        h = self.sandbox.process.start("cat; echo end", stdin="open")
        h.stdin("line one\n")
        h.stdin(b"\xffbytes\n", eof=True)
        w = h.wait(timeout=30)
        self.assertEqual((w.reason, w.exit_code), ("exited", 0))
        page = h.logs()
        self.assertEqual(b"".join(f.bytes for f in page.items), b"line one\n\xffbytes\nend\n")
        self.assertFalse(page.truncated_head)
        p = h.get()
        self.assertEqual((p.kind, p.state, p.stdin), ("exec", "terminal", "open"))
        h.delete()
        with self.assertRaises(NotFoundError):
            h.get()

    def test_stdin_on_closed_stdin_is_refused(self) -> None:
        h = self.sandbox.process.start("sleep 5")
        self.addCleanup(h.delete)
        with self.assertRaises(UnsupportedOperationError):
            h.stdin("x")

    def test_stdin_full_says_what_was_accepted(self) -> None:
        h = self.sandbox.process.start("sleep 30", stdin="open")
        self.addCleanup(h.delete)
        data = b"x" * (1536 * 1024)  # over the 1 MiB a process queues unread
        with self.assertRaises(StdinFullError) as cm:
            h.stdin(data)
        e = cm.exception
        self.assertIsInstance(e, UnsupportedOperationError)
        self.assertEqual((e.code, e.status), ("stdin_full", 409))
        self.assertGreater(e.accepted_bytes, 0)
        self.assertLess(e.accepted_bytes, len(data))

    def test_wait_timeout_and_kill(self) -> None:
        h = self.sandbox.process.start("sleep 30")
        w = h.wait(timeout=0.3)
        self.assertEqual((w.reason, w.raw_reason), ("timed_out", "wait_timeout"))
        h.kill("INT")
        w = h.wait(timeout=30)
        self.assertEqual((w.reason, w.signal), ("signaled", "INT"))

    def test_run_timeout_comes_back_running(self) -> None:
        r = self.sandbox.exec("echo first; sleep 30", timeout=0.5)
        self.assertTrue(r.is_running)
        self.assertIsNone(r.reason)
        self.assertEqual(r.came_back, "wait_timeout")
        self.assertEqual(r.stdout, "first\n")
        self.sandbox.process.connect(r.process_id).kill("KILL")

    def test_run_back_before_any_output_reads_on_from_its_next(self) -> None:
        r = self.sandbox.exec("sleep 0.5; echo A; sleep 1; echo B", timeout=0.2)
        self.assertEqual((r.is_running, r.came_back, r.stdout), (True, "wait_timeout", ""))
        self.assertIsNotNone(r.next)
        time.sleep(1)  # A is written meanwhile
        a = self.sandbox.process.connect(r.process_id).interact(cursor=r.next, timeout=10)
        self.assertEqual((a.reason, a.stdout), ("exited", "A\nB\n"))

    def test_idle_timeout_longer_than_the_wait_window(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        # Never quiet for 2 s: it runs to its end although each request waits 1 s only.
        r = sb.exec("for i in 1 2 3 4; do echo $i; sleep 0.7; done", idle_timeout=2, timeout=30)
        self.assertEqual((r.reason, r.came_back, r.stdout), ("exited", None, "1\n2\n3\n4\n"))
        # Quiet after its first line: back once it was quiet for 2.5 s, across several windows.
        started = time.monotonic()
        r = sb.exec("echo a; sleep 30", idle_timeout=2.5, timeout=30)
        took = time.monotonic() - started
        sb.process.connect(r.process_id).kill("KILL")
        self.assertEqual((r.is_running, r.came_back, r.stdout), (True, "idle_timeout", "a\n"))
        self.assertGreaterEqual(took, 2.4)
        self.assertLess(took, 4.5)

    def test_back_early_on_the_first_answer_comes_back_whole(self) -> None:
        # Back on the first request (quiet, or waiting for input) with more than one answer
        # holds: the middle is paged back in, as when it comes back later or ends.
        whole = "".join(f"{i}\n" for i in range(1, 400001))
        for kw, cmd, why in (({"idle_timeout": 1}, "seq 1 400000; sleep 30", "idle_timeout"),
                             ({"stdin": "open"}, "seq 1 400000; read x", "waiting_for_input")):
            with self.subTest(why=why):
                r = self.sandbox.exec(cmd, timeout=30, **kw)
                self.sandbox.process.connect(r.process_id).kill("KILL")
                self.assertEqual(r.came_back, why)
                self.assertEqual(r.omitted_bytes, 0)
                self.assertEqual(len(r.stdout), len(whole))
                self.assertTrue(r.stdout == whole, "the middle of the output is missing")

    def test_idle_timeout_zero_is_no_limit_past_the_wait_window(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        r = sb.exec("for i in 1 2 3 4; do echo $i; sleep 0.5; done", idle_timeout=0, timeout=30)
        self.assertEqual((r.reason, r.came_back, r.stdout), ("exited", None, "1\n2\n3\n4\n"))

    def test_invalid_utf8_reads_the_same_past_the_wait_window(self) -> None:
        # Within the window the text is the daemon's; past it, the SDK's of the frames.
        cmd = r"sleep 1.5; printf 'a\377\376\342\202b\355\240\200c'"
        within = self.sandbox.exec(cmd, timeout=30)
        sb = shared().sandbox(wait_window=0.5)
        self.addCleanup(sb.close)
        past = sb.exec(cmd, timeout=30)
        self.assertEqual(within.stdout, "a\ufffd\ufffd\ufffdb\ufffd\ufffd\ufffdc")
        self.assertEqual((past.stdout, past.output), (within.stdout, within.output))

    def assert_cut(self, r: RunResult, last: int, limit: int) -> None:
        """r holds the head and tail of `seq 1 last` within limit, by the daemon's cut rule."""
        whole = "".join(f"{i}\n" for i in range(1, last + 1))
        self.assertLessEqual(len(r.output.encode()), limit)
        self.assertLessEqual(len(r.stdout.encode()) + len(r.stderr.encode()), limit)
        self.assertTrue(r.output.startswith("1\n2\n3\n"), r.output[:40])
        self.assertTrue(r.output.endswith(f"{last}\n"), r.output[-40:])
        self.assertGreater(r.omitted_bytes, 0)
        self.assertEqual(len(r.output) + r.omitted_bytes, len(whole))
        self.assertIsNotNone(r.omitted_after)
        self.assertEqual(r.next, r.logs[-1].cursor if r.logs else None)

    def test_output_limit_bounds_a_run_past_the_wait_window(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        # Ends after the first request's window: the result is built after bare interacts.
        r = sb.exec("seq 1 200000; sleep 2", output_limit=1000, timeout=30)
        self.assertEqual((r.reason, r.exit_code, r.came_back), ("exited", 0, None))
        self.assert_cut(r, 200000, 1000)
        self.assertEqual(sb.process.connect(r.process_id).logs(cursor=r.next).items, [])
        # Without a limit the run still comes back whole.
        r = sb.exec("seq 1 20000; sleep 1.5", timeout=30)
        self.assertEqual((r.reason, r.omitted_bytes), ("exited", 0))
        self.assertEqual(r.stdout, "".join(f"{i}\n" for i in range(1, 20001)))

    def test_output_limit_bounds_an_early_return_past_the_wait_window(self) -> None:
        sb = shared().sandbox(wait_window=1)
        self.addCleanup(sb.close)
        for kw, why in (({"idle_timeout": 2, "timeout": 30}, "idle_timeout"), ({"timeout": 2.5}, "wait_timeout")):
            with self.subTest(why=why):
                r = sb.exec("seq 1 200000; sleep 30", output_limit=1000, **kw)
                h = sb.process.connect(r.process_id)
                self.addCleanup(h.kill, "KILL")
                self.assertEqual((r.is_running, r.came_back), (True, why))
                self.assert_cut(r, 200000, 1000)
                # next is where the output stood: reading on from it gives nothing twice.
                a = h.interact(cursor=r.next, signal="KILL", timeout=30)
                self.assertEqual((a.reason, a.output), ("signaled", ""))
        with sb.process.create_session() as s:
            r = s.run("seq 1 200000; sleep 1.5; read x; echo got $x", stdin="open", output_limit=1000, timeout=30)
            self.assertEqual((r.is_running, r.came_back, r.waiting_for_input), (True, "waiting_for_input", True))
            self.assert_cut(r, 200000, 1000)
            a = sb.process.connect(r.process_id).interact("y\n", cursor=r.next, timeout=30)
            self.assertEqual((a.reason, a.stdout), ("exited", "got y\n"))

    def test_idle_timeout_then_interact(self) -> None:
        with self.sandbox.process.create_session() as s:
            r = s.run('printf "name? "; read n; echo "hi $n"', stdin="open", idle_timeout=2, timeout=60)
            self.assertTrue(r.is_running)
            self.assertTrue(r.waiting_for_input)
            self.assertEqual(r.came_back, "waiting_for_input")
            self.assertEqual(r.stdout, "name? ")
            h = self.sandbox.process.connect(r.process_id)
            a = h.interact("ada\n", timeout=30)
            self.assertFalse(a.is_running)
            self.assertEqual((a.reason, a.exit_code), ("exited", 0))
            self.assertEqual(a.stdout, "hi ada\n")

    def test_interact_signal(self) -> None:
        h = self.sandbox.process.start("sleep 30")
        a = h.interact(signal="INT", timeout=30)
        self.assertEqual((a.reason, a.signal), ("signaled", "INT"))

    def test_interact_comes_back_running(self) -> None:
        h = self.sandbox.process.start("echo a; sleep 30", stdin="open")
        self.addCleanup(h.delete)
        a = h.interact(timeout=0.5, idle_timeout=0.3)
        self.assertTrue(a.is_running)
        self.assertIsNotNone(a.next)
        self.assertEqual(a.process.kind if a.process else None, "exec")

    def test_ready(self) -> None:
        h = self.sandbox.process.start("sleep 0.2; echo server up; sleep 30")
        self.addCleanup(h.delete)
        r = h.ready(pattern="server u+p", timeout=30)
        self.assertTrue(r.ready)
        self.assertEqual(r.match, "server up")
        done = self.sandbox.process.start("exit 2")
        r = done.ready(pattern="never", timeout=30)
        self.assertFalse(r.ready)
        self.assertEqual(r.result.exit_code if r.result else None, 2)

    def test_ready_says_truncated(self) -> None:
        from .daemon import Daemon

        # Under a 64K retention the head of the output, READY in it, is gone before the wait.
        d = Daemon(["--log-retention", "64K"])
        self.addCleanup(d.stop)
        sb = d.sandbox()
        self.addCleanup(sb.close)
        dropped = sb.process.start("echo READY; head -c 200000 /dev/zero")
        dropped.wait(timeout=30)
        r = dropped.ready(pattern="READY", timeout=30)
        self.assertFalse(r.ready)
        self.assertTrue(r.truncated)
        kept = sb.process.start("echo nope")
        kept.wait(timeout=30)
        r = kept.ready(pattern="READY", timeout=30)
        self.assertFalse(r.ready)
        self.assertFalse(r.truncated)

    def test_ready_port(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        code = f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(30)"
        h = self.sandbox.process.start(["python3", "-c", code])
        self.addCleanup(h.delete)
        r = h.ready(port=port, timeout=30)
        self.assertTrue(r.ready)
        self.assertEqual(r.port, port)

    def test_plain(self) -> None:
        r = self.sandbox.exec(r"printf 'one\rtwo\n\033[31mred\033[0m\n'", plain=True)
        self.assertEqual(r.stdout, "two\nred\n")

    def test_list_and_get(self) -> None:
        h = self.sandbox.process.start("sleep 30", name="py-list")
        self.addCleanup(h.delete)
        page = self.sandbox.process.list(name="py-list", state="running")
        self.assertEqual([p.id for p in page.items], [h.id])
        self.assertIsInstance(page.items[0], ProcessDto)
        self.assertEqual(page.items[0].name, "py-list")
        self.assertIsNone(page.next)

    def test_env_and_cwd(self) -> None:
        d = tempfile.mkdtemp()
        r = self.sandbox.exec("echo $A; pwd", env={"A": "x"}, cwd=d)
        self.assertEqual(r.stdout, f"x\n{d}\n")
        os.rmdir(d)

    def test_execution_timeout(self) -> None:
        r = self.sandbox.exec("sleep 30", execution_timeout=0.3)
        self.assertEqual(r.reason, "timed_out")


class ErrorTest(unittest.TestCase):
    def test_typed_errors_carry_code_and_message(self) -> None:
        sandbox = shared().sandbox()
        self.addCleanup(sandbox.close)
        with self.assertRaises(InvalidArgumentError) as cm:
            sandbox.process.create_session(shell="fish")
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("fish", cm.exception.message)
        with self.assertRaises(NotFoundError):
            sandbox.process.get("nosuchprocess")
        bad = Sandbox(shared().url, "wrong")
        self.addCleanup(bad.close)
        with self.assertRaises(AuthenticationError) as auth:
            bad.exec("true")
        self.assertEqual(auth.exception.status, 401)
        self.assertIsInstance(auth.exception, ConchError)

    def test_network_error(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with self.assertRaises(NetworkError) as cm:
            Sandbox(f"http://127.0.0.1:{port}", "t").exec("true")
        self.assertIn("conch serve", str(cm.exception))

    def test_from_env_without_a_daemon_says_what_to_start(self) -> None:
        d = tempfile.mkdtemp()
        with self.assertRaises(ConfigurationError) as cm:
            discover({"XDG_STATE_HOME": d})
        self.assertNotIsInstance(cm.exception, NetworkError)
        self.assertIn("conch serve", str(cm.exception))
        os.rmdir(d)

    def test_from_env_explicit_arguments_win(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        with mock.patch.dict(os.environ, {"XDG_STATE_HOME": d, "CONCH_TOKEN": "", "CONCH_URL": ""}):
            with Sandbox.from_env(url=shared().url, token=shared().token) as sb:
                self.assertEqual(sb.health().get("status"), "ok")
            with mock.patch.dict(os.environ, {"CONCH_URL": shared().url}):
                with Sandbox.from_env(token=shared().token) as sb:
                    self.assertEqual(sb.health().get("status"), "ok")

    def test_token_with_a_trailing_newline(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        with mock.patch.dict(os.environ, {"XDG_STATE_HOME": d, "CONCH_URL": shared().url,
                                          "CONCH_TOKEN": shared().token + "\n"}):
            with Sandbox.from_env() as sb:
                self.assertEqual(sb.health().get("status"), "ok")
        for bad in ("probe-token\n", "probe\r\ntoken", "tök-probe-token"):
            with self.assertRaises(ConfigurationError) as cm:
                Sandbox(shared().url, bad)
            self.assertNotIn("probe", str(cm.exception))
            self.assertNotIn("probe", repr(cm.exception))

    def test_from_env_reads_the_state_directory(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"http://127.0.0.1:9","tokenFile":"%s/tok"}' % d)
        with open(os.path.join(d, "tok"), "w") as f:
            f.write("s3cret\n")
        self.assertEqual(discover({"XDG_STATE_HOME": d}), ("http://127.0.0.1:9", "s3cret"))
        self.assertEqual(discover({"CONCH_URL": "http://x:1", "CONCH_TOKEN": "t"}), ("http://x:1", "t"))

    def test_from_env_never_waits_on_a_fifo(self) -> None:
        # Any command the daemon runs can put a FIFO at the token file's name or daemon.json's;
        # read as a file, it kept discover waiting for a writer for ever.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        fifo = os.path.join(d, "fifo-token")
        os.mkfifo(fifo)
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"http://127.0.0.1:9","tokenFile":"%s"}' % fifo)
        done: "queue.Queue[object]" = queue.Queue()

        def run() -> None:
            try:
                done.put(discover({"XDG_STATE_HOME": d}))
            except ConfigurationError as e:
                done.put(e)
        threading.Thread(target=run, daemon=True).start()
        try:
            got = done.get(timeout=20)
        except queue.Empty:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the read go
            self.fail("discover waited on a FIFO")
        self.assertIsInstance(got, ConfigurationError)
        self.assertIn(f"{fifo} is not a regular file", str(got))
        os.remove(os.path.join(d, "conch", "daemon.json"))
        os.mkfifo(os.path.join(d, "conch", "daemon.json"))
        with open(os.path.join(d, "conch", "token"), "w") as f:
            f.write("s3cret\n")
        threading.Thread(target=lambda: done.put(discover({"XDG_STATE_HOME": d})), daemon=True).start()
        try:
            got = done.get(timeout=20)
        except queue.Empty:
            os.close(os.open(os.path.join(d, "conch", "daemon.json"), os.O_WRONLY | os.O_NONBLOCK))
            self.fail("discover waited on a FIFO")
        self.assertEqual(got, ("http://127.0.0.1:7070", "s3cret"))

    def test_from_env_refuses_a_daemon_that_wrote_no_token_file(self) -> None:
        # A daemon started with CONCH_TOKEN records no token file; the state directory's
        # token is an older daemon's. It was sent, and every call raised AuthenticationError.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"%s","tokenFile":"","pid":%d}' % (shared().url, shared().proc.pid))
        # The daemon runs by the instance record it keeps of itself.
        shutil.copytree(os.path.join(shared().dir, "state", "conch", "instances"), os.path.join(d, "conch", "instances"))
        with open(os.path.join(d, "conch", "token"), "w") as f:
            f.write("an-older-daemons-token\n")
        with self.assertRaises(ConfigurationError) as cm:
            discover({"XDG_STATE_HOME": d})
        self.assertIn("CONCH_TOKEN", str(cm.exception))
        self.assertNotIn("older", str(cm.exception))
        env = {"XDG_STATE_HOME": d, "CONCH_TOKEN": shared().token}
        self.assertEqual(discover(env), (shared().url, shared().token))

    def test_from_env_names_a_running_daemon_whose_token_file_is_gone(self) -> None:
        # The daemon runs and its token file was removed: it said no daemon was found and to
        # start one with `conch serve`, which refuses to start beside it. The CLI says the
        # daemon runs and what to do.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"%s","tokenFile":"%s/gone","pid":%d}' % (shared().url, d, shared().proc.pid))
        shutil.copytree(os.path.join(shared().dir, "state", "conch", "instances"), os.path.join(d, "conch", "instances"))
        with self.assertRaises(ConfigurationError) as cm:
            discover({"XDG_STATE_HOME": d})
        msg = str(cm.exception)
        self.assertIn("(pid %d) runs, but its token file %s/gone cannot be read" % (shared().proc.pid, d), msg)
        self.assertIn("set CONCH_TOKEN to its token", msg)
        self.assertNotIn("no daemon found", msg)
        # One that no longer runs: none is found, and one is started.
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"%s","tokenFile":"%s/gone","pid":%d}' % (shared().url, d, dead.pid))
        with self.assertRaises(ConfigurationError) as cm:
            discover({"XDG_STATE_HOME": d})
        self.assertIn("no daemon found", str(cm.exception))

    def test_from_env_names_a_dead_daemon_that_wrote_no_token_file(self) -> None:
        # A daemon started with CONCH_TOKEN and killed before it took its record back: setting
        # CONCH_TOKEN, as the refusal above says, would reach nothing. Go and TypeScript say so.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"http://127.0.0.1:9","pid":%d}' % dead.pid)
        with self.assertRaises(ConfigurationError) as cm:
            discover({"XDG_STATE_HOME": d})
        self.assertIn("no longer running", str(cm.exception))
        self.assertIn("conch serve", str(cm.exception))
        self.assertNotIn("set CONCH_TOKEN here too", str(cm.exception))

    def test_from_env_names_a_dead_daemon_whose_pid_another_process_holds(self) -> None:
        # Killed before it took its records back, the daemon left daemon.json and its instance
        # record naming its pid and that pid's start; the kernel gave the pid to another process
        # since (here a sleep). That process's pid alone says nothing of the daemon: as the Go
        # client (internal/daemonrec), the daemon runs only while its pid is held by the process
        # its instance record names, of this boot and pid namespace, and not a zombie.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "conch"))
        other = subprocess.Popen(["sleep", "60"])
        self.addCleanup(other.wait)
        self.addCleanup(other.kill)
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"http://127.0.0.1:9","tokenFile":"","pid":%d}' % other.pid)
        started = start_time(other.pid)

        def says() -> str:
            with self.assertRaises(ConfigurationError) as cm:
                discover({"XDG_STATE_HOME": d})
            return str(cm.exception)

        self.assertIn("no longer running", says(), "no instance record names the pid")
        record_instance(d, other.pid, started - 1)
        self.assertIn("no longer running", says(), "the record names an earlier start of the pid")
        record_instance(d, other.pid, started, boot_id="another boot")
        self.assertIn("no longer running", says(), "the record is of another boot")
        record_instance(d, other.pid, started, pid_namespace="pid:[1]")
        self.assertIn("no longer running", says(), "the record is of another pid namespace")
        record_instance(d, other.pid, started)
        self.assertIn("set CONCH_TOKEN here too", says(), "the record names the process that holds the pid")
        # Killed and not yet reaped: a zombie holds the pid, and runs nothing.
        other.kill()
        deadline = time.monotonic() + 30  # a hang guard
        while stat_state(other.pid) != "Z":
            self.assertLess(time.monotonic(), deadline, "no zombie 30 s later")
            time.sleep(0.01)
        self.assertIn("no longer running", says(), "a zombie")

    def test_from_env_skips_what_is_not_an_instance_record(self) -> None:
        # A FIFO named as an instance record is skipped, not waited on for ever, and so is a
        # directory, and a file larger than a record can be (64 KiB), even one that begins as
        # the record of the daemon that runs. Before, the FIFO hung from_env, as it hung the Go
        # client, and any file was read whole.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        instances = os.path.join(d, "conch", "instances")
        os.makedirs(instances)
        with open(os.path.join(d, "conch", "daemon.json"), "w") as f:
            f.write('{"url":"http://127.0.0.1:9","pid":%d}' % os.getpid())
        fifo = os.path.join(instances, "a-fifo.json")
        os.mkfifo(fifo)
        os.mkdir(os.path.join(instances, "b-dir.json"))

        def says() -> str:
            said: "list[str]" = []

            def call() -> None:
                try:
                    discover({"XDG_STATE_HOME": d})
                except ConfigurationError as e:
                    said.append(str(e))
            caller = threading.Thread(target=call, daemon=True)
            caller.start()
            caller.join(20)  # a hang guard
            if caller.is_alive():
                # Let the stuck read go: O_RDWR never blocks on a FIFO, and the read sees the
                # end once it is closed.
                while caller.is_alive():
                    os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
                    caller.join(0.1)
                self.fail("from_env waited 20 s on a FIFO named as an instance record")
            self.assertEqual(len(said), 1)
            return said[0]

        self.assertIn("no longer running", says(), "only a FIFO and a directory")
        record_instance(d, os.getpid(), start_time(os.getpid()))
        os.rename(os.path.join(instances, "test-instance.json"), os.path.join(instances, "c-large.json"))
        with open(os.path.join(instances, "c-large.json"), "a") as f:
            f.write(" " * (64 << 10))
        self.assertIn("no longer running", says(), "a record larger than the bound was read")
        record_instance(d, os.getpid(), start_time(os.getpid()))
        self.assertIn("set CONCH_TOKEN here too", says(), "the records after what was skipped are read")

    def test_repr_never_shows_the_token(self) -> None:
        s = Sandbox("http://127.0.0.1:7070", "very-secret-token")
        for text in (repr(s), str(s), repr(s.transport), repr(s.process), repr(vars(s)), repr(vars(s.transport))):
            self.assertNotIn("very-secret-token", text)

    def test_error_from_bodies(self) -> None:
        e = error_from(409, b'{"error":{"code":"stdin_full","message":"full"}}')
        self.assertIsInstance(e, UnsupportedOperationError)
        self.assertEqual((e.code, e.message), ("stdin_full", "full"))
        e = error_from(502, b"bad gateway")
        self.assertEqual((type(e), e.code, e.status), (UnexpectedResponseError, "unexpected_response", 502))
        self.assertIn("bad gateway", e.message)
        e = error_from(404, b'{"error": {"code": "not_found"}}')
        self.assertEqual((type(e), e.message), (NotFoundError, "HTTP 404"), "an error without its message")
        e = error_from(404, b"")
        self.assertIsInstance(e, NotFoundError)


def stat_fields(pid: int) -> "list[str]":
    """The fields of /proc/PID/stat from the third (the state) on: the command name before may hold anything."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2:].split()


def stat_state(pid: int) -> str:
    return stat_fields(pid)[0]


def start_time(pid: int) -> int:
    """When pid started, in clock ticks after boot (field 22 of /proc/PID/stat)."""
    return int(stat_fields(pid)[19])


def record_instance(xdg: str, pid: int, start: int, *, boot_id: str = "", pid_namespace: str = "") -> None:
    """Writes the instance record `conch serve` keeps of itself (instances/ID.json) naming pid, started at start."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        this_boot = f.read().strip()
    record = {"id": "test-instance", "pid": pid, "startTime": start, "bootId": boot_id or this_boot,
              "pidNamespace": pid_namespace or os.readlink("/proc/self/ns/pid"), "streamDir": "/nonexistent"}
    os.makedirs(os.path.join(xdg, "conch", "instances"), exist_ok=True)
    with open(os.path.join(xdg, "conch", "instances", "test-instance.json"), "w") as f:
        json.dump(record, f)


class UnexpectedAnswerTest(unittest.TestCase):
    """Answers that are not the API's raise UnexpectedResponseError, never a TypeError or a poll to the deadline."""

    def fake(self, status: int, body: bytes, ctype: str = "application/json") -> Sandbox:
        server = FakeServer(status, body, ctype)
        self.addCleanup(server.close)
        sb = Sandbox(server.url, "t")
        self.addCleanup(sb.close)
        return sb

    def test_a_body_that_is_not_json(self) -> None:
        sb = self.fake(200, b"<html>hello</html>", "text/html")
        with self.assertRaises(UnexpectedResponseError) as cm:
            sb.health()
        self.assertEqual(cm.exception.status, 200)
        with self.assertRaises(UnexpectedResponseError):
            sb.exec("true")

    def test_a_json_body_that_is_not_an_object(self) -> None:
        sb = self.fake(200, b"[]")
        for call in (sb.health, lambda: sb.process.get("x"), lambda: sb.process.list(),
                     lambda: sb.process.connect("x").logs(), lambda: sb.exec("true"),
                     lambda: sb.process.start("true"), lambda: sb.process.create_session()):
            with self.assertRaises(UnexpectedResponseError):
                call()
        started = time.monotonic()
        with self.assertRaises(UnexpectedResponseError):
            sb.process.connect("x").wait(timeout=5)
        self.assertLess(time.monotonic() - started, 2, "wait polled an answer it cannot read")

    def test_an_object_without_what_its_route_answers(self) -> None:
        # A handle with no id, or a result with no reason, was taken: later calls went to
        # /v1/processes//...
        sb = self.fake(200, b"{}")
        for name, call in (("get", lambda: sb.process.get("x")), ("exec", lambda: sb.exec("true")),
                           ("start", lambda: sb.process.start("true")),
                           ("create_session", lambda: sb.process.create_session()),
                           ("wait", lambda: sb.process.connect("x").wait(timeout=5))):
            with self.subTest(name), self.assertRaises(UnexpectedResponseError):
                call()
        sb = self.fake(200, b'{"ready": false, "result": {}}')
        with self.assertRaises(UnexpectedResponseError):
            sb.process.connect("x").ready(port=80, timeout=5)

    def test_an_answer_of_another_shape_carries_its_status(self) -> None:
        # A server that answers every route 200 with what no route of the API answers: each
        # call raises with that status, 0 for none; a list or a logs page needs its items.
        for body in (b"", b"[1,2]", b'{"detail":"x"}', b'{"items":"x","id":"p1","reason":"exited"}'):
            sb = self.fake(200, body)
            h = sb.process.connect("p1")
            calls = [("list", sb.process.list), ("pty list", sb.pty.list), ("logs", h.logs)]
            if b"items" not in body:
                calls += [("exec", lambda: sb.exec("true")), ("get", lambda: sb.process.get("x")),
                          ("start", lambda: sb.process.start("true")), ("wait", lambda: h.wait(timeout=5)),
                          ("interact", h.interact), ("ready", lambda: h.ready(port=80, timeout=5))]
            for name, call in calls:
                with self.subTest(name, body=body):
                    with self.assertRaises(UnexpectedResponseError) as cm:
                        call()
                    self.assertEqual((cm.exception.code, cm.exception.status), ("unexpected_response", 200))
        # A 202 of another shape: the status is 202.
        sb = self.fake(202, b'{"detail":"x"}')
        with self.assertRaises(UnexpectedResponseError) as cm:
            sb.process.connect("p1").interact()
        self.assertEqual(cm.exception.status, 202)

    def test_a_redirect_is_not_followed(self) -> None:
        sb = self.fake(307, b"")
        with self.assertRaises(UnexpectedResponseError) as cm:
            sb.exec("true")
        self.assertEqual(cm.exception.status, 307)

    def test_an_error_page_of_a_proxy(self) -> None:
        sb = self.fake(502, b"<html><body>502 Bad Gateway</body></html>", "text/html")
        with self.assertRaises(UnexpectedResponseError) as cm:
            sb.health()
        self.assertEqual((cm.exception.status, cm.exception.code), (502, "unexpected_response"))


class UnknownValuesTest(unittest.TestCase):
    def test_unknown_enums_are_kept_raw(self) -> None:
        p = ProcessDto.from_wire({"id": "x", "kind": "vm", "state": "paused", "reason": "evicted", "stdin": "pipe",
                                  "keepLogs": "forever", "system": False, "newField": 1}, 200)
        self.assertEqual((p.kind, p.raw_kind, p.state, p.raw_state), ("unknown", "vm", "unknown", "paused"))
        self.assertEqual((p.reason, p.raw_reason, p.stdin, p.raw_stdin), ("unknown", "evicted", "unknown", "pipe"))
        self.assertEqual((p.keep_logs, p.raw_keep_logs), ("unknown", "forever"))
        self.assertEqual(p.extra, {"newField": 1})
        w = WaitResult.from_wire({"reason": "frozen", "exitCode": 1}, 200)
        self.assertEqual((w.reason, w.raw_reason, w.exit_code), ("unknown", "frozen", 1))
        self.assertEqual(w.extra, {})
        w = WaitResult.from_wire({"reason": "exited", "exitCode": 0, "usage": {"cpuMs": 1}, "restarts": 2}, 200)
        self.assertEqual(w.extra, {"restarts": 2}, "a field the SDK does not know is kept")


if __name__ == "__main__":
    unittest.main()
