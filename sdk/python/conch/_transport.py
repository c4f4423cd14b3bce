"""HttpTransport: the daemon's base URL and token, and keep-alive connections to it.

Every request goes through :meth:`HttpTransport.request`, which turns an answer
that is not 2xx into a :class:`~conch.errors.ConchError` and a failed
connection into a :class:`~conch.errors.NetworkError`. Connections are pooled
and reused (``http.client`` with keep-alive), one request at a time each, so
the transport is safe to share between threads.
"""

from __future__ import annotations

import contextvars
import http.client
import io
import json
import math
import select
import socket
import threading
import time
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import ConfigurationError, NetworkError, UnexpectedResponseError, error_from

Query = Mapping[str, Union[str, int, float, bool, None]]

# Errors of a kept-alive connection the daemon closed (while it sat idle, or as
# the request came). Such a request is sent once more on a new connection only
# when it cannot have reached the daemon, or when sending it twice does no harm.
_stale = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)

#: The longest wait one request asks of the daemon (seconds), as the TypeScript SDK's.
MAX_WAIT_WINDOW = 280.0

#: The most frames a logs page asks for, as the TypeScript SDK's (the largest whole number a
#: JavaScript number holds exactly): the daemon takes a limit up to 2^63 - 1 and refused a
#: larger one once the command had run; a page ends at 1 MiB of output long before.
MAX_LOGS_PAGE_SIZE = 2**53 - 1

# Methods that change nothing on the daemon: sent again after any stale error.
_idempotent = frozenset(["GET", "HEAD"])

#: The largest answer body the SDK reads (bytes): far past any the API gives (a run's answer holds
#: its output at most a few times over, 1 MiB of it unless ``output_limit`` asks for more, up to the
#: daemon's retention, 8 MiB by default). A larger one is not the API's: UnexpectedResponseError.
MAX_ANSWER_BYTES = 256 << 20


class _Timed(io.RawIOBase):
    """A connection's socket as its answer is read: each read waits at most until the
    connection's ``deadline`` (monotonic seconds); with none, as long as the socket's timeout says.

    The socket's own timeout bounds one read only: a daemon that sends a byte now and
    then (a body, endless interim ``100`` answers, header lines) would hold a call for good.
    """

    def __init__(self, sock: socket.socket, conn: "_Deadlines") -> None:
        super().__init__()
        self._raw = sock.makefile("rb", buffering=0)
        self._sock = sock
        self._conn = conn
        # The socket's own timeout, put back once the deadline is lifted (a stream's events,
        # after the head of its answer came within one).
        self._timeout = sock.gettimeout()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> Optional[int]:
        d = self._conn.deadline
        if d is not None:
            left = d - time.monotonic()
            if left <= 0:
                raise socket.timeout("timed out")
            self._sock.settimeout(left)
        elif self._sock.gettimeout() != self._timeout:
            self._sock.settimeout(self._timeout)
        return self._raw.readinto(b)  # type: ignore[no-any-return]

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _Deadlines:
    """What a connection's answers are read under (see _Timed)."""

    deadline: Optional[float] = None

    def response_class(self, sock: socket.socket, *args: Any, **kw: Any) -> http.client.HTTPResponse:
        res = http.client.HTTPResponse(sock, *args, **kw)
        res.fp.close()
        res.fp = io.BufferedReader(_Timed(sock, self), 1 << 16)  # type: ignore[assignment]
        return res


class _HTTPConnection(_Deadlines, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Deadlines, http.client.HTTPSConnection):
    pass


def read_body(res: http.client.HTTPResponse, what: str) -> bytes:
    """The whole body of res, at most MAX_ANSWER_BYTES; a larger one raises UnexpectedResponseError."""
    if res.length is not None and res.length <= MAX_ANSWER_BYTES:
        return res.read()
    parts: List[bytes] = []
    n = 0
    while n <= MAX_ANSWER_BYTES and (res.length is None or res.length <= MAX_ANSWER_BYTES):
        b = res.read(1 << 16)
        if not b:
            return b"".join(parts)
        parts.append(b)
        n += len(b)
    raise UnexpectedResponseError(
        f"conch: {what} answered HTTP {res.status} with a body over {MAX_ANSWER_BYTES} bytes, "
        "larger than any answer of the API", res.status)


def _open(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection can carry a request: nothing to read on it yet.

    A socket readable while no request is out was closed by the daemon (FIN
    or RST) or holds bytes nobody asked for: either way it is not reused.
    """
    if conn.sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            # poll, not select: select refuses a descriptor past FD_SETSIZE (1024), which a
            # runtime with many files open gives every new connection, and then no
            # connection was ever reused.
            p = select.poll()
            p.register(conn.sock, select.POLLIN)
            return not p.poll(0)
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class CallCancelled(Exception):
    """Raised in a call's thread once the call was cancelled (see :class:`CallScope`); nobody awaits its result."""


class CallScope:
    """The connections one call uses, so that another thread can cut the call short.

    conch.aio runs each blocking call in a thread under a scope of its own;
    cancelling the awaiting task calls :meth:`cancel`, which shuts down the
    call's sockets: a read in progress fails at once, the connection is not
    pooled again, and any later request of the call raises CallCancelled.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: List[http.client.HTTPConnection] = []
        self.cancelled = False
        self._cut = threading.Event()  # set once cancelled: a pause of the call ends at once

    def enter(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self.cancelled:
                self._conns.append(conn)
                return
        conn.close()
        raise CallCancelled("conch: the call was cancelled")

    def leave(self, conn: http.client.HTTPConnection) -> bool:
        """Forgets conn; False when the call was cancelled meanwhile (conn must then be closed, not pooled)."""
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)
            return not self.cancelled

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            conns, self._conns = self._conns, []
        self._cut.set()
        for c in conns:
            sock = c.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


    def pause(self, seconds: float) -> None:
        """Waits seconds, or until the call is cancelled: then raises CallCancelled."""
        if self._cut.wait(seconds):
            raise CallCancelled("conch: the call was cancelled")


# The scope of the call running in this thread, if any (set by conch.aio).
call_scope: "contextvars.ContextVar[Optional[CallScope]]" = contextvars.ContextVar("conch_call_scope", default=None)


def pause(seconds: float) -> None:
    """Waits seconds; in a call of conch.aio, only until the call is cancelled (CallCancelled)."""
    scope = call_scope.get()
    if scope is not None:
        scope.pause(seconds)
    else:
        time.sleep(seconds)


class _Secret:
    """A string that never shows itself in a repr (of the transport, its vars, a traceback's locals)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "<hidden>"

    def get(self) -> str:
        return self._value


class Response:
    """A finished answer: its status, headers and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body as JSON (None when empty); a body that is not JSON raises UnexpectedResponseError."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError) as e:  # RecursionError: nested past the interpreter's limit
            text = self.body[:200].decode("utf-8", "replace")
            raise UnexpectedResponseError(f"conch: an answer that is not JSON (HTTP {self.status}): {text}",
                                          self.status) from e


class HttpTransport:
    """How the SDK reaches one daemon.

    ``wait_window`` (seconds, default 30) is the longest one request waits on
    the daemon: a longer wait is several requests, so no connection idles for
    minutes. ``read_timeout`` (seconds, default 30) bounds how long a request
    the daemon answers at once (health, get, list, logs, kill, ...) waits for
    its answer: a frozen daemon is a NetworkError, not a hang.
    ``logs_page_size`` is the frames per page when a run pages logs (whole frames, at
    most MAX_LOGS_PAGE_SIZE).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        wait_window: float = 30.0,
        logs_page_size: float = 1000,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
    ) -> None:
        if not isinstance(url, str):
            raise ConfigurationError(f"conch: the daemon's URL must be a string, not {type(url).__name__}")
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"conch: the daemon's URL must be http(s)://HOST[:PORT], not {url!r}")
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path
        if not isinstance(token, str):
            raise ConfigurationError(
                f"conch: the token must be a string, not {type(token).__name__}; pass token=... or set CONCH_TOKEN")
        if any(not " " <= c <= "~" for c in token):
            # Never repeat the token: it is a secret, and a header could not carry it anyway.
            raise ConfigurationError(
                "conch: the token holds a character an HTTP header cannot carry (a control character, "
                "a line break or a non-ASCII one); check CONCH_TOKEN or the token file")
        self._token = _Secret(token)
        # At most MAX_WAIT_WINDOW (math.inf included): the window is sent as whole milliseconds.
        self.wait_window = min(wait_window, MAX_WAIT_WINDOW) if wait_window > 0 else 30.0
        # Whole frames, at least one and at most MAX_LOGS_PAGE_SIZE (math.inf included): the
        # daemon takes an integer limit.
        self.logs_page_size = max(1, int(min(logs_page_size, MAX_LOGS_PAGE_SIZE))) if logs_page_size > 0 else 1000
        self.connect_timeout = connect_timeout
        # math.inf is no limit, as for every other time.
        self.read_timeout = read_timeout if read_timeout > 0 else 30.0
        # One list for the transport's life (close() empties it in place): a transport
        # dropped without close() is collected, and its finalizer closes what the list holds,
        # never the transport, which it must not keep alive.
        self._idle: List[http.client.HTTPConnection] = []
        self._finalizer = weakref.finalize(self, _close_idle, self._idle)
        self._lock = threading.Lock()
        # close() starts a new generation: a connection taken before it, by a
        # call still in flight then, is closed when that call is done with it,
        # never pooled, so that nothing close() left open stays open.
        self._gen = 0

    @property
    def token(self) -> str:
        """The bearer token (never shown by ``repr``)."""
        return self._token.get()

    def __repr__(self) -> str:
        return f"HttpTransport(url={self.url!r})"

    def __copy__(self) -> "HttpTransport":
        # One pool of connections to one daemon, shared as a socket is: a copied (or
        # deep-copied) handle, session or sandbox reaches the daemon through this one.
        return self

    def __deepcopy__(self, memo: Dict[int, Any]) -> "HttpTransport":
        return self

    def __reduce__(self) -> Any:
        # Pickled, it would carry the token and no connection; said plainly rather than
        # "cannot pickle '_thread.lock' object".
        raise TypeError("conch: a connection to the daemon cannot be pickled: keep a handle's or session's "
                        "to_json() and connect to it again (process.connect, process.connect_session)")

    def headers(self) -> Dict[str, str]:
        """The headers every request sends."""
        return {"Authorization": f"Bearer {self._token.get()}"}

    def path(self, path: str, query: Optional[Query] = None) -> str:
        q = {k: _qv(v) for k, v in (query or {}).items() if v is not None and v != ""}
        return self._base + path + ("?" + urlencode(q) if q else "")

    def connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        """A new connection of its own (a stream's), not from the pool; the caller ends it with :meth:`done`."""
        conn = self._connect(timeout)
        scope = call_scope.get()
        if scope is not None:
            scope.enter(conn)
        return conn

    def done(self, conn: http.client.HTTPConnection) -> None:
        """Closes a connection of :meth:`connection`, which the call's scope forgets: a stream
        that resumed on a new connection many times held every one it had closed."""
        scope = call_scope.get()
        if scope is not None:
            scope.leave(conn)
        conn.close()

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        cls = _HTTPSConnection if self._scheme == "https" else _HTTPConnection
        conn: http.client.HTTPConnection = cls(self._host, self._port, timeout=self.connect_timeout)
        try:
            conn.connect()
        except OSError as e:
            raise NetworkError(self._unreachable(e)) from e
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _unreachable(self, e: Exception) -> str:
        return f"conch: cannot reach the daemon at {self.url} ({e}); is `conch serve` running?"

    def _take(self) -> Tuple[http.client.HTTPConnection, bool, int]:
        while True:
            with self._lock:
                gen = self._gen
                if not self._idle:
                    break
                conn = self._idle.pop()
            if _open(conn):
                return conn, True, gen
            conn.close()
        return self._connect(None), False, gen

    def _give(self, conn: http.client.HTTPConnection, gen: int) -> None:
        with self._lock:
            if gen == self._gen and len(self._idle) < 16:
                self._idle.append(conn)
                return
        conn.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Query] = None,
        json_body: Any = None,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """Sends a request and returns its answer; one that is not 2xx raises its ConchError.

        ``timeout`` bounds how long the socket waits for the answer: None is
        ``read_timeout``, for routes the daemon answers at once; a wait passes
        its own window's bound, or ``math.inf`` for as long as it takes. A kept-alive
        connection found closed is replaced before the request goes out; one
        that breaks after the request was written is a NetworkError, except for
        GET and HEAD, which are sent once more on a new connection.
        """
        h = self.headers()
        data: Optional[bytes] = body
        if json_body is not None:
            data = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        target = self.path(path, query)
        wait: Optional[float] = self.read_timeout if timeout is None else timeout
        if math.isinf(wait):
            wait = None  # a socket takes no infinite timeout: None is none
        scope = call_scope.get()
        for attempt in (0, 1):
            conn, reused, gen = self._take()
            if scope is not None:
                scope.enter(conn)
            sent = False
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(wait)
                conn.request(method, target, body=data, headers=h)
                sent = True
                # The whole answer, not each read of it, comes within wait.
                _deadline(conn, wait)
                res = conn.getresponse()
                payload = read_body(res, f"{method} {path}")
            except _stale as e:
                early = None if sent else _early_answer(conn)
                conn.close()
                if early is None:
                    # Once the whole request was written, the daemon may have acted on it:
                    # only a request that changes nothing is sent again (a run must not run twice).
                    if reused and attempt == 0 and (not sent or method in _idempotent):
                        continue
                    if sent:
                        # The request went out: the daemon was reached, and closed before its answer.
                        done = "" if method in _idempotent else "; it may have been carried out"
                        raise NetworkError(
                            f"conch: the connection to {self.url} closed before the daemon answered {method} "
                            f"{path} ({e}){done}") from e
                    raise NetworkError(self._unreachable(e)) from e
                res, payload = early
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if sent:
                    # The request went: the daemon was reached and did not answer in time
                    # (frozen, or busy); one that changes something may have been carried out.
                    done = "" if method in _idempotent else "; it may have been carried out"
                    raise NetworkError(
                        f"conch: the daemon at {self.url} did not answer {method} {path} ({e}){done}") from e
                raise NetworkError(self._unreachable(e)) from e
            except BaseException:
                # Ctrl-C (KeyboardInterrupt) or a SystemExit mid-call: the answer is half read
                # or not yet come. Closed now, not when the traceback that holds it goes.
                conn.close()
                raise
            finally:
                if scope is not None and not scope.leave(conn):
                    conn.close()  # cancelled: never pooled again
            if res.will_close or conn.sock is None:
                conn.close()
            else:
                self._give(conn, gen)
            if res.status >= 300:
                raise error_from(res.status, payload, res.getheader("Retry-After"))
            return Response(res.status, {k.lower(): v for k, v in res.getheaders()}, payload)
        raise AssertionError("unreachable")  # pragma: no cover

    def json(self, method: str, path: str, **kw: Any) -> Tuple[int, Any]:
        """Sends a request; its status and its JSON body (None when empty: 204, a kill's 202)."""
        res = self.request(method, path, **kw)
        return res.status, res.json()

    def object(self, method: str, path: str, **kw: Any) -> Tuple[int, Dict[str, Any]]:
        """Sends a request whose answer is a JSON object: its status and that object.

        Any other body (an array, a string, nothing) is not the API's answer:
        UnexpectedResponseError.
        """
        res = self.request(method, path, **kw)
        body = res.json()
        if not isinstance(body, dict):
            raise UnexpectedResponseError(
                f"conch: {method} {path} answered HTTP {res.status} with {type(body).__name__}, not a JSON object",
                res.status)
        return res.status, body

    def close(self) -> None:
        """Closes the idle connections, and each connection a call in flight holds once that call
        is done with it; the transport opens new ones if used again."""
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
            self._gen += 1
        for c in idle:
            c.close()


def _close_idle(idle: List[http.client.HTTPConnection]) -> None:
    """Closes the pooled connections of a transport collected without close() (see HttpTransport)."""
    while idle:
        try:
            conn = idle.pop()
        except IndexError:
            return
        conn.close()


def _early_answer(conn: http.client.HTTPConnection) -> "Optional[Tuple[http.client.HTTPResponse, bytes]]":
    """The answer the daemon wrote before it stopped reading a request that could not be sent
    whole (a 413 to a body past its limit, which it then closes the connection on), if one came.

    The daemon closed the connection: the read ends at once, with the answer or without one.
    """
    try:
        if conn.sock is not None:
            conn.sock.settimeout(5)
        _deadline(conn, 5)
        res = conn.getresponse()
        return res, read_body(res, "the daemon")
    except (OSError, http.client.HTTPException, UnexpectedResponseError):
        return None


def _deadline(conn: http.client.HTTPConnection, wait: Optional[float]) -> None:
    """Bounds the reading of conn's next answer, all of it, to wait seconds from now (None: no bound)."""
    if isinstance(conn, _Deadlines):
        conn.deadline = None if wait is None else time.monotonic() + wait


def _qv(v: Union[str, int, float, bool]) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def seg(s: str) -> str:
    """A path segment, escaped."""
    return quote(s, safe="")


def input_bytes(data: Union[str, bytes, bytearray, memoryview]) -> bytes:
    """Input as the bytes it sends (stdin, interact, a PTY's keys): text as UTF-8, bytes as they
    are. Anything else is refused (``bytes(5)`` would send five NUL bytes), and so is text with a
    lone surrogate (half of a pair), which UTF-8 cannot carry: TypeError, naming where it is."""
    if isinstance(data, str):
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TypeError(
                f"conch: input holds a lone surrogate (U+{ord(data[e.start]):04X} at index {e.start}), which "
                "UTF-8 cannot carry; send bytes for input that is not text") from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"conch: input must be str or bytes, not {type(data).__name__}")
