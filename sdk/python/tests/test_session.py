import hashlib
import os
import tempfile
import unittest
from unittest import mock

from conch import AlreadyExistsError, CodeContext, NotFoundError, Session, UnsupportedOperationError

from .daemon import shared


class SessionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_a_session_slower_than_the_read_timeout_is_created(self) -> None:
        # The daemon answers a new session once its shell is ready (up to its 30 s limit):
        # the read timeout does not cut that wait short (at 30 s it raced the daemon's own).
        with tempfile.TemporaryDirectory() as home:
            with open(os.path.join(home, ".bash_profile"), "w") as f:
                f.write("sleep 2\n")
            quick = shared().sandbox(read_timeout=1)
            self.addCleanup(quick.close)
            with quick.process.create_session(login=True, env={"HOME": home}) as s:
                self.assertEqual(s.run("echo up").stdout, "up\n")

    def test_a_session_kill_longer_than_the_read_timeout_is_answered(self) -> None:
        # The daemon answers a session's kill once the session has ended: after escalate_after
        # when its shell outlives the signal. The read timeout does not cut that wait short.
        quick = shared().sandbox(read_timeout=1)
        self.addCleanup(quick.close)
        with quick.process.create_session(shell="bash") as s:
            s.run("trap '' TERM")
            quick.process.connect(s.id).kill("TERM", escalate_after=2.5)
            self.assertEqual(s.get().state, "terminal")

    def test_a_pty_whose_attach_fails_is_not_left_running(self) -> None:
        from conch.process import ProcessHandle

        def refuse(_: ProcessHandle) -> None:
            raise ConnectionRefusedError("no upgrade")

        marker = "sleep 7.25"
        with mock.patch.object(ProcessHandle, "attach", refuse):
            with self.assertRaises(ConnectionRefusedError):
                self.sandbox.pty.attach(marker)
        left = [p for p in self.sandbox.pty.list() if p.state == "running" and marker in (p.shell_command or "")]
        self.assertEqual(left, [], "the PTY started for a failed attach runs on")

    def test_a_unique_name_is_refused_with_the_session_that_has_it(self) -> None:
        name = "only-%d" % os.getpid()
        with self.sandbox.process.create_session(name=name, unique_name=True) as s:
            with self.assertRaises(AlreadyExistsError) as cm:
                self.sandbox.process.create_session(name=name, unique_name=True)
            self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.session_id), ("already_exists", 409, s.id))

    def test_state_carries_over_and_failures_are_results(self) -> None:
        with self.sandbox.process.create_session(shell="bash", cwd="/tmp") as s:
            self.assertIsInstance(s, Session)
            r = s.run("mkdir -p conch-py && cd conch-py && export MODE=test")
            self.assertEqual((r.reason, r.exit_code), ("exited", 0))
            r = s.run('echo "mode $MODE"; echo oops >&2; (exit 3)')
            self.assertEqual(r.reason, "exited")
            self.assertEqual(r.exit_code, 3)
            self.assertEqual(r.stdout, "mode test\n")
            self.assertEqual(r.stderr, "oops\n")
            self.assertEqual(r.output, "mode test\noops\n")
            self.assertEqual(r.cwd, "/tmp/conch-py")
            self.assertFalse(r.is_running)
            self.assertEqual([f.channel for f in r.logs], ["stdout", "stderr"])
            self.assertEqual(s.get().cwd, "/tmp/conch-py")
        with self.assertRaises(NotFoundError) as cm:
            s.get()
        self.assertEqual(cm.exception.code, "not_found")
        self.assertEqual(cm.exception.status, 404)

    def test_large_output_comes_back_whole(self) -> None:
        # 2,688,895 bytes: more than one answer's default limit, several log pages and chunks.
        want = "".join(f"{i}\n" for i in range(1, 400001))
        with self.sandbox.process.create_session() as s:
            r = s.run("seq 1 400000")
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(len(r.stdout), len(want))
        self.assertEqual(hashlib.sha256(r.stdout.encode()).hexdigest(), hashlib.sha256(want.encode()).hexdigest())
        self.assertEqual(r.output, want)
        self.assertEqual(r.omitted_bytes, 0)
        self.assertEqual(b"".join(f.bytes for f in r.logs).decode(), want)

    def test_exec_large_output_comes_back_whole(self) -> None:
        want = "".join(f"{i}\n" for i in range(1, 400001))
        r = self.sandbox.exec("seq 1 400000")
        self.assertEqual(r.stdout, want)

    def test_output_limit_bounds_the_answer(self) -> None:
        with self.sandbox.process.create_session() as s:
            r = s.run("seq 1 20000", output_limit=200)
        self.assertEqual(r.exit_code, 0)
        self.assertGreater(r.omitted_bytes, 0)
        self.assertIsNotNone(r.omitted_after)
        whole = len("".join(f"{i}\n" for i in range(1, 20001)))
        self.assertLess(len(r.output), whole)
        self.assertTrue(r.output.startswith("1\n2\n"))
        self.assertTrue(r.output.endswith("20000\n"))

    def test_start_and_wait(self) -> None:
        with self.sandbox.process.create_session() as s:
            h = s.start("sleep 0.2; echo done")
            w = h.wait(timeout=30)
            self.assertEqual((w.reason, w.exit_code), ("exited", 0))
            self.assertEqual(h.logs().items[0].data, "done\n")
            self.assertEqual(h.get().kind, "session")

    def test_command_on_deleted_session(self) -> None:
        s = self.sandbox.process.create_session()
        s.delete()
        with self.assertRaises(NotFoundError):
            s.run("true")

    def test_exit_ends_the_session(self) -> None:
        with self.sandbox.process.create_session(shell="dash") as s:
            r = s.run("exit 4")
            self.assertEqual(r.exit_code, 4)
            with self.assertRaises(UnsupportedOperationError) as cm:
                s.run("true")
            self.assertEqual(cm.exception.status, 409)

    def test_connect_session_rebinds(self) -> None:
        with self.sandbox.process.create_session() as s:
            s.run("export X=7")
            again = self.sandbox.process.connect_session(s.id)
            self.assertEqual(again.run("echo $X").stdout, "7\n")
            self.assertEqual(again.to_json(), {"sandboxId": "local", "sessionId": s.id})


class CodeContextTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sandbox = shared().sandbox()
        self.addCleanup(self.sandbox.close)

    def test_python_state_and_exceptions(self) -> None:
        with self.sandbox.process.create_context(language="python") as ctx:
            self.assertIsInstance(ctx, CodeContext)
            self.assertEqual(ctx.run("import math\nr = 2").exit_code, 0)
            r = ctx.run("print('area'); math.pi * r ** 2")
            self.assertEqual(r.stdout, "area\n12.566370614359172\n")
            r = ctx.run("1/0")
            self.assertEqual(r.exit_code, 1)
            self.assertIn("ZeroDivisionError", r.stderr)
            self.assertEqual(ctx.run("r + 1").stdout, "3\n")
            self.assertEqual(ctx.get().language, "python")

    def test_javascript(self) -> None:
        with self.sandbox.process.create_context(language="javascript") as ctx:
            ctx.run("let y = 5")
            self.assertEqual(ctx.run("y * 2").stdout, "10\n")


if __name__ == "__main__":
    unittest.main()
