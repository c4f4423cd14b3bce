"""A fake daemon that answers every request with one fixed answer, for answers a real daemon never gives."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Tuple


class FakeServer:
    """Answers every request with ``status``, ``body`` and ``content_type``; ``answer`` may be changed."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.answer: Tuple[int, bytes, str] = (status, body, content_type)
        self.headers: Dict[str, str] = {}  # sent with every answer
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _reply(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                status, body, ctype = fake.answer
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in fake.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._srv.server_address[1]}"

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


class ScriptedServer(FakeServer):
    """Answers the n-th request (from 1) with ``script(n)``: a (status, body, content type); ``calls``
    counts the requests."""

    def __init__(self, script: Callable[[int], Tuple[int, bytes, str]]) -> None:
        self.calls = 0
        self._script = script
        self._lock = threading.Lock()
        super().__init__(200, b"")

    @property  # type: ignore[override]
    def answer(self) -> Tuple[int, bytes, str]:
        with self._lock:
            self.calls += 1
            n = self.calls
        return self._script(n)

    @answer.setter
    def answer(self, v: Tuple[int, bytes, str]) -> None:
        pass
