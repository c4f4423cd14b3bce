"""Loopback TCP proxies that cut connections: after a number of bytes, before or after an event, or in place of an answer."""

from __future__ import annotations

import socket
import struct
import threading
from typing import List


class _Relay:
    """A loopback TCP proxy to ``port``: each connection it accepts is connected to the target and
    handed, with its number (from 1), to ``relay``, which the proxies below define."""

    def __init__(self, port: int) -> None:
        self.target = port
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self.port = self._srv.getsockname()[1]
        self._conns = 0
        self._socks: List[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        return self._conns

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._srv.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._conns += 1
                self._socks += [c, u]
                n = self._conns
            self.relay(c, u, n)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._srv.close()
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass


def _end(*socks: socket.socket) -> None:
    """Shuts both ways and closes each of socks."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


class CuttingProxy(_Relay):
    """A loopback TCP proxy that cuts each answer after ``cut_after`` bytes, but not before the
    first whole event of an event stream: every connection brings the stream on. A cut by bytes
    alone, on a loaded machine where the daemon read a burst of output as one frame larger than
    ``cut_after``, cut every resume inside that frame's event, and the stream gave up."""

    def __init__(self, port: int, cut_after: int) -> None:
        self.cut_after = cut_after
        self.cuts = 0
        super().__init__(port)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        threading.Thread(target=self._pipe, args=(c, u, None), daemon=True).start()
        threading.Thread(target=self._pipe, args=(u, c, self.cut_after), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, limit) -> None:
        sent = b""  # what was passed on of an answer that is cut
        try:
            while True:
                b = src.recv(4096)
                if not b:
                    break
                if limit is None:
                    dst.sendall(b)
                    continue
                data = sent + b
                cut = _cut_at(data, limit)
                if cut is not None:
                    dst.sendall(data[len(sent):cut])
                    with self._lock:
                        self.cuts += 1
                    break
                dst.sendall(b)
                sent = data
        except OSError:
            pass
        _end(src, dst)


def _cut_at(data: bytes, limit: int):
    """Where an answer that begins with data is cut: after limit bytes, once its first event
    has ended (None: not within data)."""
    head = data.find(b"\r\n\r\n")
    if head < 0:
        return None
    first = data.find(b"\n\n", head + 4)
    if first < 0:
        return None
    cut = max(limit, first + 2)
    return cut if cut <= len(data) else None


class DroppingProxy(_Relay):
    """A loopback TCP proxy that, on its first connection, drops the answer to request number ``drop``.

    The request reaches the daemon whole; the connection to the client is
    closed (``rst``: reset) as the daemon's answer comes, before any byte of it
    is passed on. Later connections are passed through untouched.
    """

    def __init__(self, port: int, drop: int, rst: bool = False) -> None:
        self.drop = drop
        self.rst = rst
        self.requests: List[str] = []
        self.dropped = 0
        self._clients: List[socket.socket] = []
        super().__init__(port)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        with self._lock:
            self._clients.append(c)
        seen = [0]
        threading.Thread(target=self._up, args=(c, u, seen), daemon=True).start()
        threading.Thread(target=self._down, args=(u, c, seen, n == 1), daemon=True).start()

    def _up(self, c: socket.socket, u: socket.socket, seen: List[int]) -> None:
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                if b.split(b" ", 1)[0] in (b"GET", b"POST", b"DELETE", b"HEAD"):
                    seen[0] += 1
                    self.requests.append(b.split(b"\r\n", 1)[0].decode())
                u.sendall(b)
        except OSError:
            pass

    def _down(self, u: socket.socket, c: socket.socket, seen: List[int], first: bool) -> None:
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                if first and seen[0] >= self.drop:
                    self.dropped += 1
                    if self.rst:
                        # Wake the reader of c without a FIN; its close then resets.
                        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        c.shutdown(socket.SHUT_RD)
                    else:
                        c.shutdown(socket.SHUT_RDWR)
                    break
                c.sendall(b)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.close()
            except OSError:
                pass

    def hang_up(self) -> None:
        """Closes every connection to the client (a FIN), as a daemon closes idle kept-alive connections."""
        with self._lock:
            for c in self._clients:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _MarkerCutProxy(_Relay):
    """A loopback TCP proxy that cuts its first connection's answer at ``marker`` (where, its
    subclasses say); later connections pass untouched."""

    def __init__(self, port: int, marker: bytes) -> None:
        self.marker = marker
        self.cuts = 0
        super().__init__(port)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        threading.Thread(target=self._pipe, args=(c, u, False), daemon=True).start()
        threading.Thread(target=self._pipe, args=(u, c, n == 1), daemon=True).start()

    def cut_at(self, held: bytes) -> "int | None":
        """How much of ``held`` goes before the cut, None while the cut is not found yet."""
        raise NotImplementedError

    # keep is how much of what is held is kept back while the cut is looked for; None: all.
    keep: "int | None" = None

    def _pipe(self, src: socket.socket, dst: socket.socket, cut: bool) -> None:
        held = b""
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if not cut:
                    dst.sendall(b)
                    continue
                held += b
                at = self.cut_at(held)
                if at is not None:
                    dst.sendall(held[:at])
                    self.cuts += 1
                    break
                if self.keep is not None:
                    dst.sendall(held[:-self.keep])
                    held = held[-self.keep:]
        except OSError:
            pass
        _end(src, dst)


class CutBeforeProxy(_MarkerCutProxy):
    """A loopback TCP proxy that cuts its first connection just before the chunk holding ``marker``.

    The chunk of a chunked answer that holds the marker (an SSE ``event:
    state``, say) never reaches the client: it gets what came before it
    whole, then the connection ends. Later connections pass untouched.
    """

    def __init__(self, port: int, marker: bytes) -> None:
        self.keep = len(marker) + 16  # enough to see a marker split between reads, with its chunk's size line
        super().__init__(port, marker)

    def cut_at(self, held: bytes) -> "int | None":
        at = held.find(self.marker)
        if at < 0:
            return None
        return held.rfind(b"\r\n", 0, at - 2) + 2  # the start of the marker's chunk


class CutAfterProxy(_MarkerCutProxy):
    """A loopback TCP proxy that cuts its first connection just after the SSE event holding ``marker``.

    The client gets that event whole (up to its blank line), then the
    connection ends, in the middle of the chunk. Later connections pass untouched.
    """

    def cut_at(self, held: bytes) -> "int | None":
        at = held.find(self.marker)
        end = held.find(b"\n\n", at) if at >= 0 else -1
        return end + 2 if end >= 0 else None


class ExhaustedProxy(CutBeforeProxy):
    """A loopback TCP proxy that cuts its first connection just before the chunk holding
    ``marker``, as CutBeforeProxy does, and answers the connections numbered in ``refused``
    itself with ``status``: by default the daemon's refusal past ``--max-streams``, 429
    ``resource_exhausted``, no ``Retry-After``; a 502 or 504 is a proxy's HTML page, a 503 a
    draining daemon's with ``Retry-After: 0``. Other connections pass untouched."""

    BODY = (b'{"error":{"code":"resource_exhausted","message":"1 streams and attachments are open, '
            b'the most at once (--max-streams): close one, or page the logs"}}\n')

    def __init__(self, port: int, marker: bytes, refused: "frozenset[int]", status: int = 429) -> None:
        self.refused, self.status = refused, status
        super().__init__(port, marker)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        if n not in self.refused:
            super().relay(c, u, n)
            return
        if self.status == 429:
            head, body = b"Content-Type: application/json\r\n", self.BODY
        elif self.status == 503:
            head = b"Content-Type: application/json\r\nRetry-After: 0\r\n"
            body = b'{"error":{"code":"draining","message":"the daemon drains"}}\n'
        else:
            head, body = b"Content-Type: text/html\r\n", b"<html><body>Bad Gateway</body></html>"
        try:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 %d Refused\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (self.status, head, len(body), body))
        except OSError:
            pass
        _end(c, u)


class BadGatewayProxy(_Relay):
    """A loopback TCP proxy that answers its first ``times`` connections itself, with ``status``
    (a proxy's HTML page, and ``Retry-After: 0`` for a 503), and passes later ones through."""

    def __init__(self, port: int, times: int, status: int = 502) -> None:
        self.times, self.status = times, status
        super().__init__(port)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        if n <= self.times:
            body = b"<html><body>Bad Gateway</body></html>"
            extra = b"Retry-After: 0\r\n" if self.status == 503 else b""
            try:
                c.recv(65536)
                c.sendall(b"HTTP/1.1 %d Proxy Error\r\nContent-Type: text/html\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n%s"
                          % (self.status, len(body), extra, body))
            except OSError:
                pass
            _end(c, u)
            return
        threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        _end(src, dst)


class HangUpProxy(CutBeforeProxy):
    """A loopback TCP proxy that cuts its first connection just before the chunk holding
    ``marker``, as CutBeforeProxy does, and closes the connections numbered in ``hung`` once
    their request came, with no answer: a daemon restarting, as a resume meets it. Other
    connections pass untouched."""

    def __init__(self, port: int, marker: bytes, hung: "frozenset[int]") -> None:
        self.hung = hung
        super().__init__(port, marker)

    def relay(self, c: socket.socket, u: socket.socket, n: int) -> None:
        if n not in self.hung:
            super().relay(c, u, n)
            return
        try:
            c.recv(65536)
        except OSError:
            pass
        _end(c, u)
