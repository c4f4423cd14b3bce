"""The SDK's types: the API's objects as dataclasses, its enums as ``Literal`` unions.

A value the SDK does not know (a newer daemon's kind, state or reason) becomes
``"unknown"`` with the daemon's string kept in the matching ``raw_*`` field, and
fields the SDK does not know are kept in ``extra``: a newer daemon never breaks
an older SDK.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Union

from .errors import UnexpectedResponseError

try:  # Python 3.8+: typing.Literal
    from typing import Literal
except ImportError:  # pragma: no cover
    from typing_extensions import Literal  # type: ignore

__all__ = [
    "ProcessKind",
    "ProcessState",
    "ProcessReason",
    "ProcessSignal",
    "KeepLogs",
    "StdinMode",
    "TerminalSize",
    "Usage",
    "LogFrame",
    "LogsPage",
    "ListResult",
    "ProcessDto",
    "WaitResult",
    "RunResult",
    "StreamLogEvent",
    "ReadyResult",
]

ProcessKind = Literal["exec", "pty", "code", "session", "unknown"]
ProcessState = Literal["starting", "running", "terminal", "unknown"]
ProcessReason = Literal["exited", "signaled", "timed_out", "lost", "failed", "unknown"]
ProcessSignal = Literal["TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"]
KeepLogs = Literal["until_cleanup", "on_exit_ttl", "none", "unknown"]
StdinMode = Literal["closed", "open", "unknown"]

CameBack = Literal["idle_timeout", "waiting_for_input", "wait_timeout"]
StreamEventType = Literal["log", "warning", "state", "eof"]

_kinds = frozenset(["exec", "pty", "code", "session"])
_states = frozenset(["starting", "running", "terminal"])
_reasons = frozenset(["exited", "signaled", "timed_out", "lost", "failed"])
_keeps = frozenset(["until_cleanup", "on_exit_ttl", "none"])
_stdins = frozenset(["closed", "open"])


def _known(values: FrozenSet[str], v: Any) -> Any:
    return v if isinstance(v, str) and v in values else "unknown"


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v != "" else None


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class TerminalSize:
    """A terminal's size in character cells."""

    cols: int
    rows: int


@dataclass
class Usage:
    """What a command cost: CPU in ms, peak memory in bytes (absent without cgroups)."""

    cpu_ms: Optional[float] = None
    memory_peak_bytes: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, w: Any) -> Optional["Usage"]:
        if not isinstance(w, dict):
            return None
        rest = {k: v for k, v in w.items() if k not in ("cpuMs", "memoryPeakBytes")}
        cpu = w.get("cpuMs")
        return cls(
            cpu_ms=float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) else None,
            memory_peak_bytes=_int(w.get("memoryPeakBytes")),
            extra=rest,
        )


@dataclass
class LogFrame:
    """One piece of a process's output, exactly as the daemon keeps it."""

    cursor: str
    channel: str
    data: str
    encoding: str = "text"
    timestamp: Optional[int] = None

    @property
    def bytes(self) -> bytes:
        """The frame's bytes, base64 decoded where the frame is base64."""
        if self.encoding == "base64":
            return base64.b64decode(self.data)
        return self.data.encode("utf-8")

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "LogFrame":
        return cls(
            cursor=str(w.get("cursor", "")),
            channel=str(w.get("channel", "")),
            data=str(w.get("data", "")),
            encoding=str(w.get("encoding") or "text"),
            timestamp=_int(w.get("timestamp")),
        )


def frames_from_wire(v: Any) -> List[LogFrame]:
    return [LogFrame.from_wire(f) for f in v if isinstance(f, dict)] if isinstance(v, list) else []


@dataclass
class LogsPage:
    """One page of retained frames; ``next`` is where the following page starts."""

    items: List[LogFrame]
    next: Optional[str] = None
    truncated_head: bool = False
    first_available_cursor: Optional[str] = None

    @classmethod
    def from_wire(cls, w: Mapping[str, Any], status: int) -> "LogsPage":
        """The page of w, an answer of HTTP ``status``; without its items it is not the API's."""
        return cls(
            items=frames_from_wire(_array(w, "items", "logs page", status)),
            next=_str(w.get("next")),
            truncated_head=w.get("truncatedHead") is True,
            first_available_cursor=_str(w.get("firstAvailableCursor")),
        )


@dataclass
class ListResult:
    """One page of a listing; ``next`` is where the following page starts, ``None`` on the last."""

    items: List["ProcessDto"]
    next: Optional[str] = None

    @classmethod
    def from_wire(cls, w: Mapping[str, Any], status: int) -> "ListResult":
        """The page of processes of w, an answer of HTTP ``status``; without its items it is not the API's."""
        items = [ProcessDto.from_wire(p, status) for p in _array(w, "items", "process list", status)]
        nxt = w.get("next")
        return cls(items=items, next=nxt if isinstance(nxt, str) and nxt else None)


_process_fields = {
    "id": "id",
    "name": "name",
    "pid": "pid",
    "system": "system",
    "sessionId": "session_id",
    "argv": "argv",
    "shellCommand": "shell_command",
    "code": "code",
    "language": "language",
    "shell": "shell",
    "resolvedShell": "resolved_shell",
    "login": "login",
    "cwd": "cwd",
    "user": "user",
    "executionTimeout": "execution_timeout",
    "exitCode": "exit_code",
    "signal": "signal",
    "error": "error",
    "createdAt": "created_at",
    "startedAt": "started_at",
    "exitedAt": "exited_at",
    "truncatedHead": "truncated_head",
    "firstAvailableCursor": "first_available_cursor",
    "lastCursor": "last_cursor",
    "ports": "ports",
    "waitingForInput": "waiting_for_input",
    "lastOutputAt": "last_output_at",
    "oomKilled": "oom_killed",
    "handled": "handled",
    "argvCount": "argv_count",
    "argvTruncated": "argv_truncated",
}
_enum_fields = ("kind", "state", "reason", "stdin", "keepLogs", "terminal", "usage", "limits")


@dataclass
class ProcessDto:
    """A process as the daemon describes it: an exec, a PTY, a code cell, a session or its command."""

    id: str
    kind: ProcessKind = "unknown"
    raw_kind: str = ""
    state: ProcessState = "unknown"
    raw_state: str = ""
    system: bool = False
    name: Optional[str] = None
    pid: Optional[int] = None
    session_id: Optional[str] = None
    argv: Optional[List[str]] = None
    shell_command: Optional[str] = None
    code: Optional[str] = None
    language: Optional[str] = None
    shell: Optional[str] = None
    resolved_shell: Optional[str] = None
    login: Optional[bool] = None
    cwd: Optional[str] = None
    user: Optional[str] = None
    stdin: Optional[StdinMode] = None
    raw_stdin: Optional[str] = None
    execution_timeout: Optional[int] = None
    terminal: Optional[TerminalSize] = None
    keep_logs: Optional[KeepLogs] = None
    raw_keep_logs: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    reason: Optional[ProcessReason] = None
    raw_reason: Optional[str] = None
    error: Optional[str] = None
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    exited_at: Optional[str] = None
    truncated_head: bool = False
    first_available_cursor: Optional[str] = None
    last_cursor: Optional[str] = None
    ports: Optional[List[int]] = None
    waiting_for_input: bool = False
    last_output_at: Optional[str] = None
    #: For ``signaled``: the process caught the signal the daemon sent and exited
    #: with a status of its own, ``exit_code``, rather than being ended by it.
    handled: bool = False
    #: The number of elements of the whole argv, of which ``argv`` holds the first within 64 KiB.
    argv_count: Optional[int] = None
    #: ``argv`` holds fewer elements than the process was started with (``argv_count``).
    argv_truncated: bool = False
    oom_killed: Optional[bool] = None
    usage: Optional[Usage] = None
    #: The limits that bound a session's, code context's, exec or PTY process's cgroup: those it
    #: was created with, the daemon's defaults for the fields it left unset (None: none applies).
    limits: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, w: Mapping[str, Any], status: int) -> "ProcessDto":
        """The process of w, an answer of HTTP ``status`` (an object with its id, else not the API's)."""
        if not isinstance(w, Mapping):
            raise _not_the_apis("process", status, str(w)[:200])
        kw: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for k, v in w.items():
            if k in _process_fields:
                kw[_process_fields[k]] = v
            elif k not in _enum_fields:
                extra[k] = v
        kw["id"] = _required(w, "id", "process", status)
        kw["system"] = w.get("system") is True
        kw["truncated_head"] = w.get("truncatedHead") is True
        kw["waiting_for_input"] = w.get("waitingForInput") is True
        kw["handled"] = w.get("handled") is True
        kw["argv_truncated"] = w.get("argvTruncated") is True
        kw["kind"] = _known(_kinds, w.get("kind"))
        kw["raw_kind"] = str(w.get("kind", ""))
        kw["state"] = _known(_states, w.get("state"))
        kw["raw_state"] = str(w.get("state", ""))
        if w.get("stdin") is not None:
            kw["stdin"] = _known(_stdins, w.get("stdin"))
            kw["raw_stdin"] = str(w.get("stdin"))
        if w.get("keepLogs") is not None:
            kw["keep_logs"] = _known(_keeps, w.get("keepLogs"))
            kw["raw_keep_logs"] = str(w.get("keepLogs"))
        if _str(w.get("reason")):
            kw["reason"] = _known(_reasons, w.get("reason"))
            kw["raw_reason"] = str(w.get("reason"))
        t = w.get("terminal")
        if isinstance(t, dict):
            kw["terminal"] = TerminalSize(cols=_int(t.get("cols")) or 0, rows=_int(t.get("rows")) or 0)
        kw["usage"] = Usage.from_wire(w.get("usage"))
        if isinstance(w.get("limits"), dict):
            kw["limits"] = dict(w["limits"])
        return cls(extra=extra, **kw)


@dataclass
class WaitResult:
    """How a process ended: ``reason`` with ``exit_code`` or ``signal``.

    A ``signaled`` exec or PTY process has ``exit_code`` too: 128 plus the
    signal's number, or, with ``handled``, the status of its own it exited
    with after catching the signal the daemon sent (a trap's ``exit 15``).

    A wait whose caller's ``timeout`` ran out first is ``reason="timed_out"``
    with ``raw_reason="wait_timeout"``: the process goes on. ``extra`` keeps
    the other fields of the answer it was read from (a field a newer daemon
    adds to a wait's answer, say), as the TypeScript SDK keeps them beside.
    """

    reason: ProcessReason
    raw_reason: str = ""
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    error: Optional[str] = None
    cwd: Optional[str] = None
    handled: bool = False
    oom_killed: Optional[bool] = None
    usage: Optional[Usage] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, w: Mapping[str, Any], status: int) -> "WaitResult":
        """How the process of w, an answer of HTTP ``status``, ended (without its reason, w is not the API's)."""
        raw = _required(w, "reason", "an ended process", status)
        return cls(
            extra={k: v for k, v in w.items() if k not in _wait_keys},
            reason=_known(_reasons, raw),
            raw_reason=raw,
            exit_code=_int(w.get("exitCode")),
            signal=_str(w.get("signal")),
            error=_str(w.get("error")),
            cwd=_str(w.get("cwd")),
            handled=w.get("handled") is True,
            oom_killed=w.get("oomKilled") if isinstance(w.get("oomKilled"), bool) else None,
            usage=Usage.from_wire(w.get("usage")),
        )


# The functions here that refuse an answer are given its HTTP status: an
# UnexpectedResponseError carries the status of the answer that was not the API's.


def _required(w: Mapping[str, Any], key: str, what: str, status: int) -> str:
    """w's field key, a string that must be there: without it, w is not the API's answer."""
    v = w.get(key)
    if not isinstance(v, str) or not v:
        raise _not_the_apis(what, status, f"without its {key}: {str(dict(w))[:200]}")
    return v


def _array(w: Mapping[str, Any], key: str, what: str, status: int) -> List[Any]:
    """w's field key, an array that must be there (a list's or a page's items)."""
    v = w.get(key)
    if not isinstance(v, list):
        raise _not_the_apis(what, status, f"without its {key}: {str(dict(w))[:200]}")
    return v


def _not_the_apis(what: str, status: int, why: str) -> UnexpectedResponseError:
    return UnexpectedResponseError(f"conch: {what}: an answer that is not the API's (HTTP {status}): {why}", status)


_wait_keys = frozenset(["reason", "exitCode", "signal", "handled", "error", "cwd", "oomKilled", "usage"])


@dataclass
class RunResult:
    """What a run (or an ``interact``) answers.

    Once the process ended, ``reason`` says how (a failing command is a result,
    never an exception). A run that came back before its process ended (an
    ``idle_timeout``, the process waiting for input, or the caller's
    ``timeout``) has ``reason=None``, ``is_running`` true, and ``next``, the
    cursor to read on from with :meth:`ProcessHandle.interact`.
    """

    process_id: str
    reason: Optional[ProcessReason] = None
    raw_reason: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    error: Optional[str] = None
    output: str = ""
    stdout: str = ""
    stderr: str = ""
    logs: List[LogFrame] = field(default_factory=list)
    cwd: Optional[str] = None
    truncated: bool = False
    omitted_bytes: int = 0
    omitted_after: Optional[str] = None
    next: Optional[str] = None
    waiting_for_input: bool = False
    #: As on :class:`WaitResult`: a ``signaled`` process that exited with ``exit_code`` of its own.
    handled: bool = False
    oom_killed: Optional[bool] = None
    usage: Optional[Usage] = None
    #: Why a run came back early: ``"idle_timeout"``, ``"waiting_for_input"``
    #: or ``"wait_timeout"`` (the caller's timeout); ``None`` once it ended.
    came_back: Optional[CameBack] = None
    process: Optional[ProcessDto] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def is_running(self) -> bool:
        """True when the run came back before the process ended: it goes on."""
        return self.reason is None


@dataclass
class StreamLogEvent:
    """One event of :meth:`ProcessHandle.stream_logs`: a frame, a warning, the end state, or eof."""

    type: StreamEventType
    cursor: Optional[str] = None
    frame: Optional[LogFrame] = None
    result: Optional[WaitResult] = None
    message: Optional[str] = None
    first_available_cursor: Optional[str] = None


@dataclass
class ReadyResult:
    """``ready`` true with the ``port`` or ``match`` found; false with the ``result`` of a process that ended first,
    and ``truncated`` true when retention or the log budget dropped output the pattern was to be matched against
    before the wait read it (the pattern may have been there)."""

    ready: bool
    port: Optional[int] = None
    match: Optional[str] = None
    cursor: Optional[str] = None
    result: Optional[WaitResult] = None
    truncated: bool = False


Command = Union[str, Sequence[str]]
