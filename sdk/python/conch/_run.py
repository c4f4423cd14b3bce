"""Runs and their answers.

A run is one request when the process ends within the daemon's wait window.
When the daemon answers 202 only because its window ran out, the SDK waits on
with bare interacts (which, unlike wait, also come back when the process
starts waiting for input) and then pages the logs, or, when the caller gave
``outputLimit`` or ``plain`` (logs pages are raw frames), asks the daemon for
its output cut to the limit (see ``cut``). When an answer left output out
(``omittedBytes``) and the caller did not bound it, the SDK joins the answer
with ``logs`` pages by the API's rule (see ``joined``): the answer's frames up
to and including ``omittedAfter``, then every frame of the pages after
``omittedAfter`` up to and including ``next`` — when the logs still hold them.
Under ``keepLogs`` none nothing is kept to page: the result is what the
answers held, with what they left out (``omittedBytes``), and with
``outputLimit`` held to the limit as one answer is (see ``bound``).
"""

from __future__ import annotations

import base64
import math
import time
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ._transport import HttpTransport, pause, seg
from .errors import UnexpectedResponseError
from .types import CameBack, LogFrame, LogsPage, ProcessDto, RunResult, WaitResult, frames_from_wire

Wire = Dict[str, Any]

# Pages a timed-out run reads at most: it does not chase a live writer.
TIMED_OUT_PAGES = 4


def deadline_of(timeout: Optional[float]) -> float:
    """The monotonic deadline of a caller's timeout in seconds; None or 0 is unbounded, a negative one refused."""
    if timeout is not None and (timeout < 0 or math.isnan(timeout)):
        raise ValueError(f"conch: a timeout of {timeout} s: it must be a number of seconds, not negative")
    return time.monotonic() + timeout if timeout is not None and timeout > 0 else math.inf


def left(deadline: float) -> float:
    return deadline - time.monotonic()


def window_ms(t: HttpTransport, deadline: float) -> int:
    """The daemon-side wait of one request in ms: the window, or less when the caller's budget is shorter."""
    return max(1, int(math.ceil(min(t.wait_window, left(deadline)) * 1000)))


def socket_timeout(ms: int) -> float:
    """How long the socket waits for an answer the daemon holds for ms."""
    return ms / 1000 + 30


def ms(seconds: Optional[float]) -> Optional[int]:
    """Seconds as the API's milliseconds: 0 stays 0, any other time is at least 1 ms (rounding a
    short one to 0 would mean no limit); infinity is no limit (0); a negative one or NaN is refused,
    as the daemon refuses a negative one."""
    if seconds is None:
        return None
    if seconds < 0 or math.isnan(seconds):
        raise ValueError(f"conch: a time of {seconds} s: it must be a number of seconds, not negative")
    if seconds == 0 or math.isinf(seconds):
        return 0
    return max(1, int(round(seconds * 1000)))


def run(t: HttpTransport, path: str, body: Wire, timeout: Optional[float]) -> RunResult:
    """POSTs a run to path with body within the caller's timeout (seconds) and returns its RunResult.

    With ``idleTimeout`` longer than one request's wait, the daemon cannot see
    the whole quiet spell: the SDK counts it across requests from the
    process's ``lastOutputAt`` and comes back ``idle_timeout`` only once the
    command wrote nothing for that long.
    """
    deadline = deadline_of(timeout)
    # 0 is no idle limit, as the daemon reads it, in every window.
    idle = body.get("idleTimeout") or None
    bounded = "outputLimit" in body
    # Under keepLogs none the daemon keeps no output for later reading: no
    # page can bring back what an answer left out, and output written between
    # two requests is gone. The result is what the answers held, truncated
    # when they said output was dropped, with omitted_bytes what they cut out.
    unkept = body.get("keepLogs") == "none"
    # Logs pages are raw frames: a plain answer is the daemon's, whole when
    # it fits in the answer, else its head and tail.
    plain = body.get("plain") is True
    sent = time.monotonic()
    w = window_ms(t, deadline)
    status, answer = t.object("POST", path, json_body={**body, "timeout": w}, timeout=socket_timeout(w))
    answer = _record(answer, "run", status)
    if status == 200:
        return finished(t, status, answer, bounded or unkept or plain)

    def first(why: CameBack) -> RunResult:
        # Back with the first answer: what it left out is paged back in, as for one that ended.
        r = early(answer, status, why)
        return r if bounded or unkept or plain else joined(t, r)

    if answer.get("waitingForInput") is True:
        return first("waiting_for_input")
    quiet_from = sent
    if idle is not None:
        if _came_back_quiet(answer, sent, w):
            return first("idle_timeout")
        quiet_from = _last_output(answer, sent)
        if _idle_left(idle, quiet_from) <= 0:
            return first("idle_timeout")
        if left(deadline) <= 0:
            return first("wait_timeout")
    pid = str(answer.get("id") or answer.get("processId"))
    cursor = answer.get("next") if isinstance(answer.get("next"), str) else None
    # The output's bytes up to the last answer's next, as the answers told them: the first from
    # the start, each interact after the one before.
    told = _answer_bytes(answer)
    held: List[LogFrame] = []
    # Under keepLogs none with plain, the text is each answer's, rendered by
    # the daemon (the held frames stay byte-exact, as logs are).
    texts: List[Tuple[str, str, str]] = []
    lost = False
    # What the answers left out: their omittedBytes summed, and where output is first missing,
    # as the index into held of the frames before it and the answer's omittedAfter.
    omitted = 0
    holes: List[Tuple[int, str]] = []

    def hold(a: Wire) -> None:
        nonlocal lost, omitted
        frames = frames_from_wire(a.get("logs"))
        gone = _count(a.get("omittedBytes"))
        after = a.get("omittedAfter")
        if gone > 0 and isinstance(after, str):
            i = next((j for j, f in enumerate(frames) if f.cursor == after), -1)
            holes.append((len(held) + i + 1, after))
        omitted += gone
        held.extend(frames)
        # Dropped before it (between two requests); what it cut out of it is in omitted.
        lost = lost or a.get("truncated") is True
        if plain:
            texts.append(tuple(a.get(k) if isinstance(a.get(k), str) else "" for k in ("output", "stdout", "stderr")))

    if unkept:
        hold(answer)

    def back(result: Optional[WaitResult], pages: float, came_back: Optional[CameBack]) -> RunResult:
        if unkept:
            # Nothing is kept to cut from cursor 0: the answers are all there is.
            r = result_of(pid, held, lost, result, came_back, cursor)
            r.omitted_bytes = omitted
            r.omitted_after = min(holes)[1] if holes else None
            if plain:
                r.output, r.stdout, r.stderr = ("".join(x[i] for x in texts) for i in range(3))
            if bounded:
                bound(r, body["outputLimit"], holes, plain)
            return r
        if bounded or plain:
            return cut(t, pid, body, came_back)
        return collect(t, pid, result, pages, came_back, cursor, told)

    while left(deadline) > 0:
        w = window_ms(t, deadline)
        if idle is not None:
            # Back when the quiet spell would reach idleTimeout, to look whether it did.
            w = max(1, min(w, int(math.ceil(_idle_left(idle, quiet_from) * 1000))))
        # Output is read from the logs once the wait is over, but where
        # none are kept, from each answer.
        req: Wire = {"timeout": w} if unkept else {"timeout": w, "outputLimit": 1}
        if unkept and plain:
            req["plain"] = True
        if unkept and bounded:
            req["outputLimit"] = body["outputLimit"]
        if cursor:
            req["cursor"] = cursor
        sent = time.monotonic()
        s, a = t.object("POST", f"/v1/processes/{seg(pid)}/interact", json_body=req, timeout=socket_timeout(w))
        a = _record(a, "interact", s)
        if unkept:
            hold(a)
        told += _answer_bytes(a)
        if s == 200:
            return back(WaitResult.from_wire(a, s), math.inf, None)
        before = cursor
        if isinstance(a.get("next"), str) and a["next"]:
            cursor = a["next"]
        if a.get("waitingForInput") is True:
            return back(None, math.inf, "waiting_for_input")
        if idle is not None:
            if cursor != before:
                quiet_from = _last_output(a, sent)
            if _idle_left(idle, quiet_from) <= 0:
                return back(None, math.inf, "idle_timeout")
        # Back for none of those, it came once the window ran out: one that came sooner (not the
        # daemon's) is asked again only once the window has passed, not at once, as fast as it
        # answers, for ever.
        soon = min(sent + w / 1000, deadline) - time.monotonic()
        if soon > 0:
            pause(soon)
    return back(None, TIMED_OUT_PAGES, "wait_timeout")


def bound(r: RunResult, limit: Any, holes: List[Tuple[int, str]], plain: bool) -> None:
    """Holds r, the answers of a run under keepLogs none each bounded by limit, to limit as one
    answer is: over it, the head (up to half the limit) and the tail (up to the rest) of its frames,
    each cut between UTF-8 characters, what lies between counted in ``omitted_bytes``;
    ``omitted_after`` is the cursor of the head's last whole frame when no answer left output out
    before it. With plain, the answers' texts are held to the limit so (output; stdout with stderr)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return
    sizes = [len(f.bytes) for f in r.logs]
    if sum(sizes) > limit:
        head: List[LogFrame] = []
        room = limit // 2
        k = 0
        while k < len(r.logs) and sizes[k] <= room:
            head.append(r.logs[k])
            room -= sizes[k]
            k += 1
        whole = k
        if room > 0 and k < len(r.logs):
            b = r.logs[k].bytes[:_head_cut(r.logs[k].bytes, room)]
            if b:
                head.append(_frame(r.logs[k], b))
                room -= len(b)
        room = limit - (limit // 2 - room)
        tail: List[LogFrame] = []
        j = len(r.logs) - 1
        while j >= k and room > 0:
            f = r.logs[j]
            if sizes[j] <= room and (j > k or len(head) == whole):
                tail.append(f)
                room -= sizes[j]
                j -= 1
                continue
            b = f.bytes
            b = b[_tail_cut(b, room):]
            if b:
                tail.append(_frame(f, b))
            break
        kept = head + tail[::-1]
        r.omitted_bytes += sum(sizes) - sum(len(f.bytes) for f in kept)
        after = r.logs[whole - 1].cursor if whole > 0 else "0"
        first = [h for h in holes if h[0] <= whole]
        r.omitted_after = min(first)[1] if first else after
        r.extra["headFrames"] = len(head)
        r.logs = kept
        if not plain:
            r.output, r.stdout, r.stderr = assemble(kept)
    if plain:
        r.output = _cut_text(r.output, limit)
        r.stdout = _cut_text(r.stdout, limit - min(len(r.stderr.encode()), limit // 2))
        r.stderr = _cut_text(r.stderr, limit - len(r.stdout.encode()))


def _head_cut(b: bytes, n: int) -> int:
    """The length of b's head of at most n bytes that ends between UTF-8 characters."""
    while 0 < n < len(b) and b[n] & 0xC0 == 0x80:
        n -= 1
    return n


def _tail_cut(b: bytes, n: int) -> int:
    """Where b's tail of at most n bytes starts, between UTF-8 characters."""
    i = max(0, len(b) - n)
    while 0 < i < len(b) and b[i] & 0xC0 == 0x80:
        i += 1
    return i


def _frame(f: LogFrame, b: bytes) -> LogFrame:
    """f, cut to b."""
    if f.encoding == "base64":
        return LogFrame(f.cursor, f.channel, base64.b64encode(b).decode(), f.encoding, f.timestamp)
    return LogFrame(f.cursor, f.channel, b.decode("utf-8", "replace"), f.encoding, f.timestamp)


def _cut_text(s: str, limit: int) -> str:
    """s held to limit bytes: its head (up to half) and tail (up to the rest), between characters."""
    b = s.encode()
    if len(b) <= limit:
        return s
    h = _head_cut(b, limit // 2)
    return b[:h].decode("utf-8", "replace") + b[_tail_cut(b, limit - h):].decode("utf-8", "replace")


def _came_back_quiet(answer: Wire, sent: float, w: int) -> bool:
    """Whether a 202 came because the process was quiet for its idleTimeout.

    The daemon says why in ``cameBack``; one that does not is judged by the
    time: back before its wait ran out, it saw the process idle.
    """
    why = answer.get("cameBack")
    if isinstance(why, str):
        return why == "idle_timeout"
    return time.monotonic() - sent < w / 1000


def _idle_left(idle_ms: int, quiet_from: float) -> float:
    """Seconds until a process quiet since quiet_from (monotonic) has been idle for idle_ms."""
    return idle_ms / 1000 - (time.monotonic() - quiet_from)


def _last_output(w: Wire, sent: float) -> float:
    """When (monotonic) the process last wrote, by its ``lastOutputAt``, as seen by a request sent at sent.

    Held between the request's start and now, so that clocks that disagree
    cannot move it further than the one request.
    """
    now = time.monotonic()
    at = w.get("lastOutputAt")
    if not isinstance(at, str) or not at:
        return sent
    try:
        when = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return now
    return min(now, max(sent, now - max(0.0, time.time() - when)))


def _record(v: Any, what: str, status: int) -> Wire:
    """v, an answer of HTTP status, as the JSON object its route answers: anything else is not the API's."""
    if not isinstance(v, dict):
        raise UnexpectedResponseError(
            f"conch: {what}: the daemon answered {type(v).__name__} (HTTP {status}), not a JSON object", status)
    return v


_answer_keys = frozenset([
    "processId", "id", "reason", "exitCode", "signal", "error", "cwd", "output", "stdout", "stderr", "logs",
    "truncated", "omittedBytes", "omittedAfter", "next", "waitingForInput", "handled", "oomKilled", "usage",
])


def from_answer(w: Wire, status: int, came_back: Optional[CameBack] = None) -> RunResult:
    """The RunResult of an answer of HTTP status as it came (200: ended; 202: running, with came_back)."""
    r = RunResult(
        process_id=str(w.get("processId") or w.get("id") or ""),
        output=_s(w.get("output")),
        stdout=_s(w.get("stdout")),
        stderr=_s(w.get("stderr")),
        logs=frames_from_wire(w.get("logs")),
        cwd=w.get("cwd") if isinstance(w.get("cwd"), str) and w.get("cwd") else None,
        truncated=w.get("truncated") is True,
        omitted_bytes=_count(w.get("omittedBytes")),
        omitted_after=w.get("omittedAfter") if isinstance(w.get("omittedAfter"), str) else None,
        next=w.get("next") if isinstance(w.get("next"), str) and w.get("next") else None,
        waiting_for_input=w.get("waitingForInput") is True,
        extra={k: v for k, v in w.items() if k not in _answer_keys},
    )
    if came_back is None:
        _ended(r, WaitResult.from_wire(w, status))
    else:
        r.came_back = came_back
        r.process = ProcessDto.from_wire(w, status)
        r.cwd = None
    return r


def _ended(r: RunResult, wr: WaitResult) -> None:
    r.reason, r.raw_reason = wr.reason, wr.raw_reason
    r.exit_code, r.signal, r.error = wr.exit_code, wr.signal, wr.error
    r.handled, r.oom_killed, r.usage = wr.handled, wr.oom_killed, wr.usage
    if wr.cwd:
        r.cwd = wr.cwd


def came_back_of(w: Wire) -> CameBack:
    """Why a 202 answer came, as the daemon's ``cameBack`` says (its ``timeout`` is the caller's:
    ``wait_timeout``); one that does not say is judged by ``waitingForInput``."""
    why = w.get("cameBack")
    if why == "timeout":
        return "wait_timeout"
    if why in ("idle_timeout", "waiting_for_input"):
        return why
    return "waiting_for_input" if w.get("waitingForInput") is True else "idle_timeout"


def early(w: Wire, status: int, why: CameBack) -> RunResult:
    return from_answer(w, status, came_back=why)


def finished(t: HttpTransport, status: int, w: Wire, bounded: bool) -> RunResult:
    """The RunResult of a 200 answer (w, of status), with what it left out paged back in unless the caller bounded it."""
    r = from_answer(w, status)
    return r if bounded else joined(t, r)


def joined(t: HttpTransport, r: RunResult) -> RunResult:
    """r, an answer that left output out (``omittedBytes``), with it paged back in by the API's
    join rule: the answer's frames up to ``omittedAfter``, then the logs after it up to ``next``.
    When the logs no longer hold all of it (dropped, or never kept: keepLogs none), r stays the
    daemon's head and tail, with ``omitted_bytes`` saying what is missing."""
    if r.omitted_bytes <= 0:
        return r
    head: List[LogFrame] = []
    if r.omitted_after:
        for f in r.logs:
            head.append(f)
            if f.cursor == r.omitted_after:
                break
        else:
            head = []
    rest: List[LogFrame] = []
    end = r.next
    reached = [end is None]
    gap = [False]
    # The bytes of the frames after omitted_after up to next: those the answer left out, and
    # those of its frames after the head (cut, and the tail).
    room = [r.omitted_bytes + sum(len(f.bytes) for f in r.logs[len(head):])]

    def take(page: List[LogFrame], dropped: bool) -> bool:
        if dropped:
            # Frames after the last one taken were dropped (a process that writes on outran the
            # paging): the join cannot be whole, and the frame ``next`` names may be gone with
            # them, so that paging would never end.
            gap[0] = True
            return False
        for f in page:
            # Pages past those bytes without next, each frame counted one byte at least, are not
            # the daemon's: new cursors without end would be paged for ever.
            room[0] -= max(len(f.bytes), 1)
            if room[0] < 0:
                raise UnexpectedResponseError(
                    f"conch: the logs of {r.process_id}: pages past the {r.omitted_bytes} bytes the answer left out "
                    f"and held after its head, its next {(end or '')[:100]!r} not among them: not the API's answer", 200)
            rest.append(f)
            if end is not None and f.cursor == end:
                reached[0] = True
                return False
        return True

    page_logs(t, r.process_id, r.omitted_after or None, math.inf, take)
    if gap[0] or not reached[0]:
        return r
    r.logs = head + rest
    r.output, r.stdout, r.stderr = assemble(r.logs)
    r.omitted_bytes, r.omitted_after = 0, None
    return r


def cut(t: HttpTransport, pid: str, body: Wire, came_back: Optional[CameBack]) -> RunResult:
    """The RunResult of process pid bounded by body's ``outputLimit`` (else the daemon's own limit
    of an answer), as the daemon cuts it, ``plain`` as body asks.

    A bare interact from cursor ``0`` with a 1 ms ``timeout`` answers at once
    with the whole output's head and tail within the limit (``omittedBytes``,
    ``omittedAfter``, ``headFrames``, ``next``): 200 for a process that has
    ended, else 202 with the output so far, the run then coming back for
    came_back. A process that ended since the wait saw it running comes back
    ended.
    """
    req: Wire = {"cursor": "0", "timeout": 1}
    if "outputLimit" in body:
        req["outputLimit"] = body["outputLimit"]
    if body.get("plain") is not None:
        req["plain"] = body["plain"]
    s, a = t.object("POST", f"/v1/processes/{seg(pid)}/interact", json_body=req, timeout=socket_timeout(1))
    a = _record(a, "interact", s)
    if s == 200:
        return from_answer(a, s)
    r = from_answer(a, s, came_back=came_back or "wait_timeout")
    r.waiting_for_input = r.waiting_for_input or came_back == "waiting_for_input"
    return r


def collect(t: HttpTransport, pid: str, result: Optional[WaitResult], pages: float,
            came_back: Optional[CameBack], cursor: Optional[str], told: int) -> RunResult:
    """The RunResult of process pid: its result (None: still running) and its retained logs from the start,
    at most ``told`` bytes of them, the output the daemon's answers held and left out up to the last one's ``next``.

    ``next`` is the last frame paged, else ``cursor``, the daemon's last word
    on where the output stood (``"0"`` before any): reading on from it loses
    nothing written meanwhile.

    Pages go past ``told`` bytes (each frame counted one byte at least, as the
    daemon's each hold one) only where the process wrote on after the last
    answer: one still running stops there, the rest read on from ``next``. A
    process that ended wrote nothing after its last answer, so pages past them
    are not the daemon's: a daemon naming a new cursor on every page would be
    paged for ever.
    """
    logs: List[LogFrame] = []
    truncated = [False]
    first = [True]
    room = [told]

    def take(page: List[LogFrame], head: bool) -> bool:
        if head and not first[0]:
            # Retention dropped frames after those paged (a process that writes on outran the
            # paging): what is kept from here on is the output's tail, its head dropped.
            logs.clear()
        truncated[0] = truncated[0] or head
        first[0] = False
        for f in page:
            room[0] -= max(len(f.bytes), 1)
            if room[0] < 0:
                if result is None:
                    return False
                raise UnexpectedResponseError(
                    f"conch: the logs of {pid}: pages past the {told} bytes its answers said the output of the "
                    f"ended process holds: not the API's answer", 200)
            logs.append(f)
        return True

    page_logs(t, pid, None, pages, take)
    return result_of(pid, logs, truncated[0], result, came_back, cursor)


def result_of(pid: str, logs: List[LogFrame], truncated: bool, result: Optional[WaitResult],
              came_back: Optional[CameBack], cursor: Optional[str]) -> RunResult:
    """The RunResult of process pid from its frames: ended with result, or running, back for came_back."""
    r = RunResult(process_id=pid, logs=logs, truncated=truncated)
    r.output, r.stdout, r.stderr = assemble(logs)
    r.next = logs[-1].cursor if logs else cursor
    if result is not None:
        _ended(r, result)
    else:
        r.came_back = came_back
        r.waiting_for_input = came_back == "waiting_for_input"
    return r


def page_logs(
    t: HttpTransport, pid: str, cursor: Optional[str], pages: float,
    take: Callable[[List[LogFrame], bool], bool],
) -> None:
    """Reads the logs of pid after cursor page by page, at most pages pages, handing each to take until it returns False.

    The logs end at the first empty page (a page holds at most ``limit``
    frames and at most the daemon's page size in bytes, so a short page is
    not the end).
    """
    limit = t.logs_page_size
    n = 0
    seen = set()
    while n < pages:
        n += 1
        status, body = t.object("GET", f"/v1/processes/{seg(pid)}/logs", query={"cursor": cursor, "limit": limit})
        page = LogsPage.from_wire(body, status)
        # A page is bounded by bytes as well as frames: only an empty page says the logs ended.
        if not page.items:
            return
        # Cursors only increase: a page that ends where one ended before would be paged for ever.
        nxt = page.items[-1].cursor
        if nxt in seen or nxt == cursor:
            raise UnexpectedResponseError(
                f"conch: the logs of {pid}: pages that do not move on (cursor {nxt[:100]!r} again), "
                f"not the API's answer (HTTP {status})", status)
        seen.add(nxt)
        if not take(page.items, page.truncated_head):
            return
        cursor = nxt


def wait_until(t: HttpTransport, pid: str, deadline: float) -> Optional[WaitResult]:
    """Waits for pid until deadline, one window at a time; None when the deadline came first."""
    while True:
        w = window_ms(t, deadline)
        began = time.monotonic()
        status, body = t.object("GET", f"/v1/processes/{seg(pid)}/wait", query={"timeout": w}, timeout=socket_timeout(w))
        if status == 200 and isinstance(body, dict):
            return WaitResult.from_wire(body, status)
        # A 202 comes once the window ran out: one that came sooner (not the daemon's) is asked
        # again only once the window has passed, not at once, as fast as it answers, for ever.
        early = min(began + w / 1000, deadline) - time.monotonic()
        if early > 0:
            pause(early)
        if left(deadline) <= 0:
            return None


def assemble(frames: Iterable[LogFrame]) -> "tuple[str, str, str]":
    """The text fields of frames: all of them, stdout (and pty), stderr; invalid UTF-8 replaced.

    In all of them, a character is never made of two channels' bytes: each
    run of one channel's frames is decoded on its own.
    """
    every: List[str] = []
    run: List[bytes] = []
    run_channel = ""
    out: List[bytes] = []
    err: List[bytes] = []
    for f in frames:
        b = f.bytes
        if f.channel != run_channel:
            every.append(_text(run))
            run, run_channel = [], f.channel
        run.append(b)
        if f.channel in ("stdout", "pty"):
            out.append(b)
        elif f.channel == "stderr":
            err.append(b)
    every.append(_text(run))
    return "".join(every), _text(out), _text(err)


def _text(parts: List[bytes]) -> str:
    return b"".join(parts).decode("utf-8", "replace")


def _answer_bytes(w: Wire) -> int:
    """The output bytes an answer of a run or interact told of, after the cursor it started from up
    to its ``next``: those its frames hold (its head's last and its tail's first cut to what it kept
    of them) and those it left out between them."""
    return _count(w.get("omittedBytes")) + sum(len(f.bytes) for f in frames_from_wire(w.get("logs")))


def _count(v: Any) -> int:
    """A count of the answer's (bytes): a whole number, else none (a string, a list, infinity are not the API's)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def wire_options(options: Mapping[str, Any]) -> Wire:
    """The API's body fields of the SDK's keyword options (seconds become ms, names camelCase)."""
    out: Wire = {}
    for k, v in options.items():
        if v is None:
            continue
        if k in _seconds:
            out[_seconds[k]] = ms(v)
        elif k == "terminal":
            out["terminal"] = _terminal(v)
        elif k == "limits":
            out["limits"] = {_camel(a): b for a, b in dict(v).items() if b is not None}
        elif k == "stdin" and v is True:
            out["stdin"] = "open"
        else:
            out[_camel(k)] = v
    return out


_seconds = {"idle_timeout": "idleTimeout", "execution_timeout": "executionTimeout"}


def _terminal(v: Any) -> Wire:
    if isinstance(v, dict):
        return {"cols": int(v["cols"]), "rows": int(v["rows"])}
    if isinstance(v, (tuple, list)):
        return {"cols": int(v[0]), "rows": int(v[1])}
    return {"cols": int(v.cols), "rows": int(v.rows)}


def _camel(k: str) -> str:
    head, *rest = k.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)
