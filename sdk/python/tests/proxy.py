"""A loopback TCP proxy that cuts every connection after a number of bytes from the server."""

from __future__ import annotations

import socket
import threading
from typing import List


class CuttingProxy:
    def __init__(self, port: int, cut_after: int) -> None:
        self.target = port
        self.cut_after = cut_after
        self.cuts = 0
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self.port = self._srv.getsockname()[1]
        self._socks: List[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self._srv.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._socks += [c, u]
            threading.Thread(target=self._pipe, args=(c, u, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, self.cut_after), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, limit) -> None:
        sent = 0
        try:
            while True:
                b = src.recv(4096)
                if not b:
                    break
                if limit is not None and sent + len(b) >= limit:
                    dst.sendall(b[: max(0, limit - sent)])
                    with self._lock:
                        self.cuts += 1
                    break
                dst.sendall(b)
                sent += len(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._stop = True
        self._srv.close()
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass
