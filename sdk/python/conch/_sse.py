"""stream_logs: a server-sent event reader of the SDK's own over http.client.

The stream needs the Authorization header, which a plain EventSource cannot
send. A dropped connection is resumed with ``Last-Event-ID`` after the last
frame yielded, so no frame comes twice or goes missing.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import time
from typing import Any, Generator, Iterator, List, Optional

from ._run import wait_until
from ._transport import HttpTransport, _deadline, _qv, read_body, seg
from .errors import ConchError, InvalidArgumentError, NetworkError, UnexpectedResponseError, error_from
from .types import LogFrame, StreamLogEvent, WaitResult

# Resumes in a row that may bring no event (cut again, not sent, or refused with a status that
# may pass) before the stream gives up; each waits 50 ms, doubled from one to the next, or a
# longer Retry-After. The Go client and the TypeScript SDK take the same rule.
MAX_RETRIES = 5
#: Statuses of a refusal that may pass, tried again on a resume only: the daemon at its
#: --max-streams (another client took the place the cut stream gave back), with no
#: Retry-After; a proxy's 502 and 504; a 503 (a draining daemon's, or a proxy's). A first
#: request so refused raises at once, as any other call's refusal does.
PASSING = frozenset([429, 502, 503, 504])
#: The longest a Retry-After makes the stream wait before it tries again (seconds).
MAX_PAUSE = 30.0
# The daemon sends a heartbeat every 15 s: a socket quiet for longer is dead.
READ_TIMEOUT = 45.0
#: The largest event the stream reads (bytes, its lines together): far past any the daemon sends
#: (a frame holds at most 64 KiB of output). A larger one is not the API's: UnexpectedResponseError.
MAX_EVENT_BYTES = 16 << 20


def _events(res: http.client.HTTPResponse) -> Iterator["tuple[str, str, str]"]:
    """The (event, data, id) of an event-stream body, in order; ends when the body ends."""
    data: List[str] = []
    event, ident, has = "message", "", False
    size = 0
    while True:
        raw = res.readline(MAX_EVENT_BYTES + 1 - size)
        if not raw:
            return
        size += len(raw)
        if size > MAX_EVENT_BYTES:
            raise UnexpectedResponseError(
                f"conch: the log stream sent an event over {MAX_EVENT_BYTES} bytes, larger than any of the API",
                res.status)
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if line.endswith("\r"):
            line = line[:-1]
        if line == "":
            if has:
                yield event, "\n".join(data), ident
            event, data, ident, has = "message", [], "", False
            size = 0
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "id":
            ident = value
        elif name == "data":
            data.append(value)
            has = True


def stream_logs(
    t: HttpTransport, pid: str, cursor: Optional[str] = None, limit: Optional[int] = None,
    encoding: Optional[str] = None,
) -> Generator[StreamLogEvent, None, None]:
    if limit is not None and not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0):
        # Refused as a page's ?limit= is (logs), and before any request: a negative one
        # ended the stream after one frame, a fraction after the next whole number.
        raise InvalidArgumentError(f"limit {json.dumps(_qv(limit) if isinstance(limit, (str, int, float)) else repr(limit))}: "
                                   "want a non-negative integer")
    last = cursor
    count = 0
    failures = 0
    stated = False
    opened = False  # a connection of this stream was answered with its events: what comes next is a resume
    while True:
        conn = None
        err: Optional[BaseException] = None
        try:
            conn = t.connection(READ_TIMEOUT)
            headers = t.headers()
            headers["Accept"] = "text/event-stream"
            if last:
                headers["Last-Event-ID"] = last
            conn.request("GET", t.path(f"/v1/processes/{seg(pid)}/logs/stream", {"cursor": last, "encoding": encoding}),
                         headers=headers)
            # The head of the answer, and the body of one that refuses, come whole within
            # READ_TIMEOUT: a daemon that sent a byte of it now and then held the stream for
            # good. The events then come each within it (the daemon's heartbeats keep it open).
            _deadline(conn, READ_TIMEOUT)
            res = conn.getresponse()
            if res.status == 204:
                # Resumed past the end of an ended process: nothing more will come. Its
                # state, if the dropped connection took it along, is the process's own.
                if not stated:
                    yield StreamLogEvent(type="state", cursor=last, result=_ended(t, pid))
                yield StreamLogEvent(type="eof", cursor=last)
                return
            if res.status >= 300:
                raise error_from(res.status, read_body(res, "the log stream"), res.getheader("Retry-After"))
            _deadline(conn, None)
            opened = True
            for name, data, ident in _events(res):
                failures = 0
                ev = _event(name, data, ident, last, res.status)
                if ev is None:
                    continue
                if ev.type == "log" and ev.frame is not None:
                    last = ev.frame.cursor
                    count += 1
                stated = stated or ev.type == "state"
                yield ev
                if ev.type == "eof" or (ev.type == "log" and limit and count >= limit):
                    return
        except ConchError as e:
            # A first request that fails (refused, not sent, no answer) raises at once, as any
            # other call's does. On a resume, one that cannot be sent (the daemon restarting)
            # and a 429 (the daemon at its stream limit), a proxy's 502 or 504, or a 503 (with
            # Retry-After) may pass: they are tried again as a dropped connection is, as the Go
            # client and the TypeScript SDK do; any other answer (the process is gone) will not
            # change.
            if not opened or not (isinstance(e, NetworkError) or e.status in PASSING):
                raise
            err = e
        except (OSError, http.client.HTTPException) as e:
            if not opened:
                raise NetworkError(f"conch: the log stream of {pid}: no answer from {t.url} ({e})") from e
            err = e
        finally:
            if conn is not None:
                t.done(conn)
        if stated:
            # The daemon sends state once every frame has been sent: nothing
            # but eof was left, and a stream resumed without a cursor (the
            # process wrote nothing) would send state a second time.
            yield StreamLogEvent(type="eof", cursor=last)
            return
        failures += 1
        if isinstance(err, socket.timeout) or failures > MAX_RETRIES:
            # A daemon that sent nothing, not even its heartbeat, for
            # READ_TIMEOUT is frozen or gone: the stream ends now rather than
            # waiting as long again on each new connection (a refused or
            # dropped connection, as a restart makes, is tried again).
            if isinstance(err, ConchError):
                raise err
            raise NetworkError(f"conch: the log stream of {pid} ended before its eof ({err or 'connection closed'})")
        pause = 0.0
        if isinstance(err, ConchError) and err.retry_after is not None:
            pause = min(float(err.retry_after), MAX_PAUSE)
        time.sleep(max(0.05 * 2 ** (failures - 1), pause))


def _ended(t: HttpTransport, pid: str) -> WaitResult:
    """The WaitResult of an ended process, as its wait gives it.

    Not from its record: a session command's record has the directory it
    started in where its result has the one it ended in, and the record's
    other fields are not a result's.
    """
    r = wait_until(t, pid, math.inf)
    assert r is not None  # no deadline
    return r


def _event(name: str, data: str, ident: str, last: Optional[str], status: int) -> Optional[StreamLogEvent]:
    """The StreamLogEvent of a raw event of a stream answered with HTTP status; None for one the SDK does not know."""
    try:
        d: Any = json.loads(data) if data else {}
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
        return None
    if not isinstance(d, dict):
        return None
    if name == "log":
        f = LogFrame.from_wire(d)
        return StreamLogEvent(type="log", cursor=ident or f.cursor, frame=f)
    if name == "warning":
        fac = d.get("firstAvailableCursor")
        return StreamLogEvent(type="warning", cursor=last, message=str(d.get("message", "")),
                              first_available_cursor=fac if isinstance(fac, str) else None)
    if name == "state":
        return StreamLogEvent(type="state", cursor=last, result=WaitResult.from_wire(d, status))
    if name == "eof":
        return StreamLogEvent(type="eof", cursor=last)
    return None
