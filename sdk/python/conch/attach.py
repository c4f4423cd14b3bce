"""Attach to a PTY process over its WebSocket (``GET /v1/processes/{id}/attach``).

Needs the ``websockets`` package (``pip install 'conch-sdk[attach]'``; tried
with 10.4 and later). Binary messages are the terminal's bytes both ways; a
text message ``{"type": "resize", ...}`` resizes. A control message saying
the connection fell behind what the daemon retains (``{"type": "gap",
"bytes": N}``) adds N to :attr:`AsyncPtyConnection.missed_bytes`, so a reader
always knows whether it saw every byte.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import queue
import struct
import threading
import time
import weakref
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Union

from ._transport import HttpTransport, input_bytes, seg
from .errors import ConchError, NetworkError, error_from

__all__ = ["AsyncPtyConnection", "PtyConnection"]


def _websockets() -> Any:
    try:
        import websockets
    except ImportError as e:
        raise ImportError(
            "conch: attach needs the websockets package: pip install 'conch-sdk[attach]' "
            "(or pip install websockets; Debian: apt install python3-websockets)") from e
    return websockets


#: The largest message an attachment takes (bytes, its fragments together): far past any the daemon
#: sends (32 KiB of output at most). A larger one, or one whose fragments never end, closes the
#: connection (1009, message too big): the recv raises NetworkError, memory holding at most the
#: library's queue of such messages.
MAX_MESSAGE_BYTES = 1 << 20


async def _connect(url: str, headers: Dict[str, str], timeout: Optional[float]) -> Any:
    """Opens the attachment's WebSocket.

    It sends no keepalive pings of its own (``ping_interval=None``; the
    library's default pinged every 20 s and closed the connection 20 s later
    without a pong): while the program leaves its input unread, the daemon
    reads no more of the client's messages, pings included, so a large
    input sent to a program that reads late ended the attachment with
    ``1011 keepalive ping timeout`` and the rest of the input was lost. The
    daemon pings every 15 s, which the library answers; a daemon gone
    without a close is found by TCP keepalive (:func:`_keepalive`).
    ``timeout`` bounds the opening handshake (the transport's read_timeout).
    """
    ws = _websockets()
    try:  # websockets >= 13: the new asyncio implementation
        from websockets.asyncio.client import connect  # type: ignore
    except ImportError:
        socket = await ws.connect(url, extra_headers=headers, max_size=MAX_MESSAGE_BYTES, compression=None, ping_interval=None,
                                  open_timeout=timeout)
    else:
        socket = await connect(url, additional_headers=headers, max_size=MAX_MESSAGE_BYTES, compression=None, ping_interval=None,
                               open_timeout=timeout)
    _keepalive(socket)
    return socket


def _keepalive(socket: Any) -> None:
    """Turns on TCP keepalive for the WebSocket's connection, where it can.

    Probes after 15 s of silence, every 15 s, 4 unanswered: a daemon whose
    host went away without a close is found within about a minute and a
    half, where a read would otherwise wait for good.
    """
    transport = getattr(socket, "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return
    import socket as socketlib

    try:
        sock.setsockopt(socketlib.SOL_SOCKET, socketlib.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 15), ("TCP_KEEPINTVL", 15), ("TCP_KEEPCNT", 4)):
            opt = getattr(socketlib, name, None)
            if opt is not None:
                sock.setsockopt(socketlib.IPPROTO_TCP, opt, value)
    except OSError:
        pass


try:  # the socket's send queue (see _unsent): Linux's TIOCOUTQ
    import fcntl as _fcntl
    import termios

    _TIOCOUTQ = termios.TIOCOUTQ
except (ImportError, AttributeError):  # not a Unix that has it
    _fcntl = None  # type: ignore[assignment]
    _TIOCOUTQ = 0

#: How long a recv waits with nothing at all from the daemon, neither a message nor a ping,
#: before it ends the connection and raises NetworkError: the daemon pings an attachment every
#: 15 s (not while output waits for the client, which then comes), so nothing for three of its
#: pings is a daemon frozen (SIGSTOP) or gone, or a network that holds the connection. TCP
#: keepalive finds only a host gone: a stopped daemon's host answers its probes.
IDLE_TIMEOUT = 45.0

# What a PtyConnection's queue of reads holds once it is closed.
_CLOSED = object()

# How long close() lets the input it has not sent stand still before it ends
# the connection without the closing handshake, and how often it looks.
_CLOSE_STALL = 2.0
_CLOSE_LOOK = 0.1


def _unsent(transport: Any) -> int:
    """Bytes written to the connection that the daemon has not taken: the transport's buffer
    and, on Linux, the socket's send queue (TIOCOUTQ: not sent, or not yet acknowledged)."""
    n = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is not None and _fcntl is not None:
        try:
            n += struct.unpack("i", _fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0"))[0]
        except (OSError, ValueError):
            pass
    return n


def _refusal(e: Exception) -> Optional[ConchError]:
    """The API's error of a handshake the daemon refused with an HTTP status, else None.

    websockets >= 13 keeps the answer (``e.response``, with its JSON error
    body); 10.x to 12 keep only ``e.status_code``, named as a bodiless
    answer of that status is.
    """
    response = getattr(e, "response", None)
    status = getattr(response, "status_code", None) or getattr(e, "status_code", None)
    if not isinstance(status, int) or status < 300:
        return None
    body = getattr(response, "body", None)
    return error_from(status, bytes(body) if isinstance(body, (bytes, bytearray)) else b"")


class AsyncPtyConnection:
    """An attached PTY: iterate it for output (retained, then live); ``send`` types into it."""

    def __init__(self, socket: Any) -> None:
        self._ws = socket
        #: Bytes the daemon reported this connection missed (it fell behind what was retained).
        self.missed_bytes = 0
        #: Each gap report as it came: (bytes received before it, bytes missed).
        self.gaps: List["tuple[int, int]"] = []
        self._received = 0
        self._heard = 0  # messages received: while it closes, what moves (see _end_if_stalled)
        self._closing = False  # close() was called: what ends the connection then is no error
        # The input not taken when close() ended the connection without its handshake (see
        # _end_if_stalled), as far as this host knows; None while it has not.
        self._dropped: Optional[int] = None
        # When bytes last came from the daemon, a ping's too (which the library answers and
        # says nothing of): what the library's connection, the asyncio protocol, is given.
        heard = self._heard_at = [time.monotonic()]
        received = getattr(socket, "data_received", None)
        if callable(received):

            def data_received(data: bytes) -> None:
                heard[0] = time.monotonic()
                received(data)

            socket.data_received = data_received

    @classmethod
    async def open(cls, t: HttpTransport, process_id: str) -> "AsyncPtyConnection":
        url = t.url.replace("http", "ws", 1) + f"/v1/processes/{seg(process_id)}/attach"
        try:
            socket = await _connect(url, t.headers(), None if math.isinf(t.read_timeout) else t.read_timeout)
        except ImportError:
            raise
        except (asyncio.TimeoutError, TimeoutError) as e:  # one and the same from Python 3.11
            raise NetworkError(f"conch: attach to {process_id}: the daemon at {t.url} did not answer within "
                               f"{t.read_timeout:g} s") from e
        except Exception as e:  # the library's handshake errors have no common base across versions
            refused = _refusal(e)
            if refused is not None:
                raise refused from e
            raise NetworkError(f"conch: attach to {process_id} failed: {e}") from e
        return cls(socket)

    async def recv(self) -> Optional[bytes]:
        """The next output bytes; None once the process ended and its output was sent."""
        ws = _websockets()
        while True:
            try:
                msg = await self._recv_message()
                self._heard += 1
            except ws.exceptions.ConnectionClosed as e:
                # The library calls a close with 1001 OK too; the daemon sends it when it
                # could read no more of the output (it is stopping, say): not the end.
                code = getattr(getattr(e, "rcvd", None), "code", None)
                if code is None and isinstance(e, ws.exceptions.ConnectionClosedOK):
                    code = getattr(e, "code", None)
                if code == 1000 or self._closing:
                    # 1000 is the daemon's "process ended", sent after the last of the output,
                    # which came before it (the library gives what it queued first): the end,
                    # also when the connection then ended without the client's answer. The
                    # daemon waits 5 s for it, and websockets 10 reads nothing more while it
                    # holds max_queue messages unread: a reader slower than the output saw
                    # the close frame too late to answer it.
                    return None
                code = code or getattr(e, "code", None)
                raise NetworkError(f"conch: attach closed with {code}: {e}") from e
            if isinstance(msg, (bytes, bytearray, memoryview)):
                b = bytes(msg)
                self._received += len(b)
                return b
            self._control(msg)

    async def _recv_message(self) -> Any:
        """The library's next message; raises NetworkError, ending the connection, once nothing
        came from the daemon, not even a ping, for IDLE_TIMEOUT while it waits.

        Only the wait counts: while nobody reads, the library stops reading the connection once
        it holds max_queue messages, and nothing comes. Before it gives up it lets the loop
        read what its socket received meanwhile, read late when this process was held up.
        """
        started = time.monotonic()
        task = asyncio.ensure_future(self._ws.recv())
        looked = False
        try:
            while True:
                left = max(started, self._heard_at[0]) + IDLE_TIMEOUT - time.monotonic()
                if left <= 0 and looked:
                    transport = getattr(self._ws, "transport", None)
                    if transport is not None:
                        transport.abort()
                    raise NetworkError(f"conch: attach: nothing from the daemon, not even a ping, within "
                                       f"{IDLE_TIMEOUT:g} s")
                looked = left <= 0
                done, _ = await asyncio.wait({task}, timeout=max(left, 0))
                if done:
                    return task.result()
        finally:
            if not task.done():
                task.cancel()

    def _control(self, text: str) -> None:
        try:
            m = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
            return
        if isinstance(m, dict) and m.get("type") == "gap":
            n = m.get("bytes", m.get("missed", 0))
            if isinstance(n, int) and n > 0:
                self.missed_bytes += n
                self.gaps.append((self._received, n))

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[bytes]:
        while True:
            b = await self.recv()
            if b is None:
                return
            yield b

    async def send(self, data: Union[str, bytes]) -> None:
        """Types data into the PTY.

        Raises NetworkError once the connection is closed or broken, and when
        close() ended it, without its handshake, while this send was under
        way: the input not taken yet was dropped.
        """
        await self._send(input_bytes(data))

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def _send(self, message: Union[str, bytes]) -> None:
        ws = _websockets()
        after = self._dropped is not None  # a send after the end, rather than one it came upon
        try:
            await self._ws.send(message)
        except ws.exceptions.ConnectionClosed as e:
            if self._dropped is not None and not after:
                raise self._dropped_error() from e
            if self._closing:
                raise NetworkError("conch: the PTY connection was closed") from e
            raise NetworkError(f"conch: the PTY connection broke: {e}") from e
        # One that close() ended under it returns as if all went (websockets 10: its wait for
        # the buffer to empty ends with the connection).
        if self._dropped is not None and not after:
            raise self._dropped_error()

    def _dropped_error(self) -> NetworkError:
        if self._dropped:
            return NetworkError(f"conch: the PTY connection closed with {self._dropped} bytes of input not sent")
        return NetworkError("conch: the PTY connection closed before the daemon took the input sent")

    async def close(self) -> None:
        """Detaches; the process goes on. Output not read by then is dropped.

        Input the daemon has not taken yet is sent first, however slowly it
        goes. A close during which nothing moves for 2 s, neither input out
        nor messages in, ends the connection without its closing handshake
        (close code 1006), dropping the input not taken: a program that
        reads none of its input leaves the daemon reading nothing more of
        the connection, the close frame included, also when all the input
        has left this host and waits in the daemon's socket. A send under
        way then raises NetworkError; close() itself raises nothing. After
        it, recv returns None.
        """
        # The daemon's close frame comes after the output still on its way,
        # which the library stops reading once it holds max_queue messages
        # unread: the close would wait out its timeouts (30 s with
        # websockets 10) and end without a close frame. What comes
        # meanwhile is read and dropped. And the client's close frame goes
        # after its input still unsent, which a daemon whose program reads
        # none never reads (in this socket's queue or already in the
        # daemon's): the library would wait for the daemon's answer as long
        # (see _end_if_stalled).
        self._closing = True
        drain = asyncio.ensure_future(self._discard())
        stall = asyncio.ensure_future(self._end_if_stalled())
        try:
            await self._ws.close()
        except Exception:  # noqa: BLE001 - the connection ends all the same
            # websockets 10 raised ConnectionClosedError when _end_if_stalled ended the connection
            # while a send was under way (its close frame waited behind that send's input).
            transport = getattr(self._ws, "transport", None)
            if transport is not None:
                transport.abort()
        finally:
            drain.cancel()
            stall.cancel()

    async def _end_if_stalled(self) -> None:
        """Ends the connection once nothing moved for _CLOSE_STALL seconds: neither its unsent
        input nor the messages that come before the daemon's close frame.

        Nothing unsent is no sign of an answer to come: the input may have
        all left for the daemon's socket, where the daemon reads no more of
        it, nor the close frame behind it, while its program reads none.
        """
        transport = getattr(self._ws, "transport", None)
        if transport is None:
            return
        loop = asyncio.get_running_loop()
        last, heard, since = _unsent(transport), self._heard, loop.time()
        while True:
            await asyncio.sleep(_CLOSE_LOOK)
            now = _unsent(transport)
            if now < last or self._heard != heard:
                since = loop.time()
            elif loop.time() - since >= _CLOSE_STALL:
                self._dropped = now
                transport.abort()
                return
            last, heard = now, self._heard

    async def _discard(self) -> None:
        """Reads and drops messages until the connection is closed."""
        try:
            while True:
                await self._ws.recv()
                self._heard += 1
        except Exception:  # closed; or a recv of the caller's is under way, which reads them
            pass


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """A PtyConnection's thread: runs its loop until the connection ends (see _Link.end), then closes it."""
    try:
        loop.run_forever()
    finally:
        loop.close()


class _Link:
    """What a PtyConnection's thread works with: its event loop, the connection and the reads.

    Nothing here refers to the PtyConnection, so the loop keeps none alive:
    one dropped without close() is collected, and its finalizer ends the
    link. The link ends (the connection detached, the loop stopped, the
    thread gone) once, at whichever comes first: close(), a recv that met
    the end of the output or a broken connection, or that collection.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread, conn: AsyncPtyConnection) -> None:
        self.loop = loop
        self.thread = thread
        self.conn = conn
        # What the loop read and no recv has taken yet: (bytes or None, error or None), or _CLOSED.
        self.read: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self.reading: "Optional[asyncio.Task[Optional[bytes]]]" = None  # the loop's read under way; the loop's own
        # Held while closed is set, and while a request is handed to the loop, so that none
        # reaches it after its end began: the end cancels what it finds, and a request
        # handed to a stopped loop would never be answered.
        self.lock = threading.Lock()
        self.closed = False

    def ask(self, coro: Any) -> Any:
        """Runs coro on the loop and returns what it returns; NetworkError once the link is ending."""
        with self.lock:
            if self.closed:
                coro.close()
                raise NetworkError("conch: the PTY connection was closed")
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:  # the link ended while it ran
            raise NetworkError("conch: the PTY connection was closed") from None

    def want(self) -> None:
        """On the loop: reads the next message into the queue, unless a read is under way or one waits there."""
        if self.reading is not None or not self.read.empty() or self.closed:
            return
        self.reading = self.loop.create_task(self.conn.recv())
        self.reading.add_done_callback(self.have)

    def have(self, task: "asyncio.Task[Optional[bytes]]") -> None:
        self.reading = None
        if task.cancelled():
            return
        err = task.exception()
        self.read.put((None, err) if err is not None else (task.result(), None))

    def end(self, wait: bool) -> None:
        """Detaches and stops the thread; the first call does it. With wait, returns once the
        thread has ended (never from the loop's own thread); a recv waiting then returns None."""
        with self.lock:
            first, self.closed = not self.closed, True
        if first:
            ended = asyncio.run_coroutine_threadsafe(self._end(), self.loop)
            # Stopped once the end's future has its result: stopped from within _end, the loop
            # would never pass it on, and end() would wait for good. Thread-safe, since a
            # future done already runs the callback here.
            ended.add_done_callback(lambda _: self.loop.call_soon_threadsafe(self.loop.stop))
        if not wait:  # a finalizer's: nobody waits on a recv of a connection collected
            self.read.put(_CLOSED)
            return
        try:
            if first:
                ended.result()
        finally:
            self.thread.join()
            self.read.put(_CLOSED)

    async def _end(self) -> None:
        """On the loop: stops a read under way (the output it would take is dropped with the rest),
        detaches, and ends what else runs on the loop; end() then stops it, and its thread closes it."""
        try:
            if self.reading is not None:
                self.reading.cancel()
                await asyncio.gather(self.reading, return_exceptions=True)
            await self.conn.close()
        finally:
            # A send the end came upon is cancelled (its caller gets NetworkError), rather
            # than left pending on a stopped loop, its caller waiting for good.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)


class PtyConnection:
    """The blocking form of :class:`AsyncPtyConnection`, driven by an event loop of its own in a thread.

    Its reads are the loop's: ``recv`` asks the loop for the next message
    and waits for it on a queue, so a recv the caller stops waiting for
    (Ctrl-C, wherever it lands) leaves the message it asked for to the next
    recv, and a recv waiting while another thread closes the connection
    returns None.

    The thread and the WebSocket are freed by ``close()``, by the ``recv``
    that meets the end of the output (None) or raises for a broken
    connection, and, for a connection dropped without either, when it is
    garbage-collected (it detaches then, as close() does).
    """

    def __init__(self, link: _Link) -> None:
        self._link = link
        self._loop = link.loop
        self._conn = link.conn
        # Holds the link, never self: the connection can be collected, and then ends the link
        # without waiting (the collection may happen on the loop's own thread). Not at exit:
        # the thread is a daemon, which the interpreter stops, and the socket goes with the process.
        self._finalizer = weakref.finalize(self, link.end, False)
        self._finalizer.atexit = False

    @classmethod
    def open(cls, t: HttpTransport, process_id: str) -> "PtyConnection":
        _websockets()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=_serve, args=(loop,), name="conch-attach", daemon=True)
        thread.start()
        try:
            conn = asyncio.run_coroutine_threadsafe(AsyncPtyConnection.open(t, process_id), loop).result()
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            raise
        return cls(_Link(loop, thread, conn))

    @property
    def missed_bytes(self) -> int:
        return self._conn.missed_bytes

    @property
    def gaps(self) -> List["tuple[int, int]"]:
        return list(self._conn.gaps)

    def recv(self) -> Optional[bytes]:
        """The next output bytes; None once the process ended and its output was sent, or after close.

        The end of the output, or a connection that broke (NetworkError), frees the
        connection's thread as close() does: every recv after it returns None.
        """
        link = self._link
        with link.lock:
            if link.closed:
                return None
            if link.read.empty():
                link.loop.call_soon_threadsafe(link.want)  # asked twice is one read: see _Link.want
        got = link.read.get()  # interrupted (KeyboardInterrupt): what it asked for waits for the next recv
        if got is _CLOSED:
            link.read.put(got)  # for any other recv waiting
            return None
        data, err = got
        if data is None:  # the end, or the error that ended the connection: nothing more will come
            link.end(wait=True)
        if err is not None:
            raise err
        return data

    def __iter__(self) -> Iterator[bytes]:
        while True:
            b = self.recv()
            if b is None:
                return
            yield b

    def send(self, data: Union[str, bytes]) -> None:
        self._link.ask(self._conn.send(data))

    def write(self, data: Union[str, bytes]) -> None:
        self.send(data)

    def resize(self, cols: int, rows: int) -> None:
        self._link.ask(self._conn.resize(cols, rows))

    def close(self) -> None:
        """Detaches (the process goes on) and stops the connection's thread; a recv waiting returns None."""
        self._link.end(wait=True)

    def __enter__(self) -> "PtyConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
