"""A real ``conch serve`` for the tests.

Built from the repository once per test run (or taken from ``CONCH_BIN``),
started on a free loopback port with a token and state directory of its own.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import List, Optional

from conch import Sandbox

REPO = Path(__file__).resolve().parents[3]
_built: Optional[str] = None
# Reentrant: shared() holds it while the daemon it starts builds the binary.
_lock = threading.RLock()


def binary() -> str:
    global _built
    if os.environ.get("CONCH_BIN"):
        return os.environ["CONCH_BIN"]
    with _lock:
        if _built is None:
            d = tempfile.mkdtemp(prefix="conch-pysdk-bin-")
            atexit.register(shutil.rmtree, d, True)
            out = os.path.join(d, "conch")
            subprocess.run(["go", "build", "-o", out, "./cmd/conch"], cwd=REPO, check=True)
            _built = out
        return _built


class Daemon:
    """A conch daemon the test owns: ``url``, ``token``, ``sandbox()``, ``stop()``."""

    def __init__(self, flags: Optional[List[str]] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="conch-pysdk-test-")
        self.token = "test-token-" + uuid.uuid4().hex
        token_file = os.path.join(self.dir, "token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, self.token.encode())
        os.close(fd)
        env = dict(os.environ, HOME=self.dir, XDG_STATE_HOME=os.path.join(self.dir, "state"), CONCH_TOKEN="")
        self.proc = subprocess.Popen(
            [binary(), "serve", "--listen", "127.0.0.1:0", "--token-file", token_file, *(flags or [])],
            cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = self._listening()
        # Keep draining stderr so the daemon never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _listening(self) -> str:
        seen = b""
        timer = threading.Timer(60, self.proc.kill)
        timer.start()
        try:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                seen += line
                m = re.search(rb"conch: listening on (\S+)", line)
                if m:
                    return m.group(1).decode()
        finally:
            timer.cancel()
        raise RuntimeError(f"conch serve did not listen: {seen.decode(errors='replace')}")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def sandbox(self, **kw: object) -> Sandbox:
        return Sandbox(self.url, self.token, **kw)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # The drain ends at the end of stderr; then the pipe is closed, not
        # left to the garbage collector (a ResourceWarning at exit).
        self._drainer.join(10)
        if self.proc.stderr is not None and not self._drainer.is_alive():
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_shared: Optional[Daemon] = None


def shared() -> Daemon:
    """One daemon for the whole run, stopped at exit."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = Daemon()
            atexit.register(_shared.stop)
        return _shared
