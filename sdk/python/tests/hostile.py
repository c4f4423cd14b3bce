"""A daemon that answers as no daemon should: each connection is given to a script of the test's."""

from __future__ import annotations

import socket
import threading
from typing import Callable, List


class HostileServer:
    """Accepts connections on a loopback port and runs ``script(conn)`` for each, in a thread;
    ``close`` stops it and closes every connection, which ends a script's next write."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(16)
        self._conns: List[socket.socket] = []
        self._lock = threading.Lock()
        self.stop = threading.Event()

        def serve() -> None:
            while True:
                try:
                    c, _ = self._srv.accept()
                except OSError:
                    return
                with self._lock:
                    self._conns.append(c)

                def one(c: socket.socket = c) -> None:
                    try:
                        script(c)
                    except OSError:
                        pass
                    finally:
                        c.close()

                threading.Thread(target=one, daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._srv.getsockname()[1]}"

    def close(self) -> None:
        self.stop.set()
        self._srv.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def read_request(c: socket.socket) -> bytes:
    """The request's head (its body, if any, is left unread)."""
    data = b""
    while b"\r\n\r\n" not in data:
        b = c.recv(65536)
        if not b:
            break
        data += b
    return data


def accept_websocket(c: socket.socket) -> None:
    """Reads a WebSocket opening handshake and accepts it."""
    import base64
    import hashlib

    head = read_request(c).decode("latin-1")
    key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
               if line.lower().startswith("sec-websocket-key:"))
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
