"""Processes, sessions and code contexts of one daemon, by id.

A handle makes no request until one of its methods is called; every option is
a keyword argument with the API's meaning, times in seconds.
"""

from __future__ import annotations

import base64
import collections.abc
import time
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Mapping, Optional, Tuple, Union

from . import _run
from ._run import deadline_of, socket_timeout, wait_until, window_ms, wire_options
from ._sse import stream_logs
from ._transport import MAX_WAIT_WINDOW, HttpTransport, input_bytes, pause, seg
from .errors import NotFoundError, UnexpectedResponseError
from .types import (
    Command, ListResult, LogsPage, ProcessDto, ReadyResult, RunResult, StreamLogEvent, WaitResult,
)

if TYPE_CHECKING:  # pragma: no cover
    from .attach import PtyConnection

__all__ = ["ProcessHandle", "Session", "CodeContext", "ProcessService", "PtyService"]


def _text(what: str, text: str) -> str:
    """text, a session command's or a cell's, checked: a str, never None turned into an empty one."""
    if not isinstance(text, str):
        raise TypeError(f"conch: {what} is a string, not {type(text).__name__}")
    return text


def _command(command: Command) -> Dict[str, Any]:
    if isinstance(command, str):
        return {"cmd": command}
    bad = TypeError("conch: a command is a shell string or a non-empty sequence of strings (argv), "
                    f"not {type(command).__name__}")
    if isinstance(command, (bytes, bytearray, collections.abc.Mapping)) or not isinstance(command, collections.abc.Iterable):
        raise bad
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise bad
    return {"argv": argv}


class ProcessHandle:
    """One process of the daemon: an exec, a PTY, a session command or a code cell."""

    def __init__(self, transport: HttpTransport, sandbox_id: str, process_id: str, kind: Optional[str] = None) -> None:
        self._t = transport
        self.sandbox_id = sandbox_id
        self.id = process_id
        self.kind = kind
        self._path = f"/v1/processes/{seg(process_id)}"

    def __repr__(self) -> str:
        return f"ProcessHandle(id={self.id!r}, kind={self.kind!r})"

    def get(self) -> ProcessDto:
        """The process as the daemon describes it now."""
        status, body = self._t.object("GET", self._path)
        return ProcessDto.from_wire(body, status)

    def wait(self, timeout: Optional[float] = None) -> WaitResult:
        """Waits for the process to end; when ``timeout`` (s) runs out first: ``timed_out``/``wait_timeout``, the process goes on."""
        r = wait_until(self._t, self.id, deadline_of(timeout))
        return r if r is not None else WaitResult(reason="timed_out", raw_reason="wait_timeout")

    def kill(self, signal: str = "TERM", *, escalate_after: Optional[float] = None, escalate_to: Optional[str] = None) -> None:
        """Sends a signal (TERM by default) to the process and its descendants, escalating after ``escalate_after`` s if asked."""
        body: Dict[str, Any] = {"signal": signal}
        after = _run.ms(escalate_after)
        if after is not None:
            body["escalateAfter"] = after
        if escalate_to is not None:
            body["escalateTo"] = escalate_to
        # The kill of a session or code context answers once it has ended: what outlives the
        # signal gets the escalation after escalate_after (STOP_GRACE when none), then KILL
        # STOP_GRACE later. That wait is given beyond the read timeout, which it could pass.
        hold = (after / 1000 if after else STOP_GRACE) + STOP_GRACE
        self._t.json("POST", f"{self._path}/kill", json_body=body, timeout=self._t.read_timeout + hold)

    def logs(self, cursor: Optional[str] = None, limit: Optional[int] = None, encoding: Optional[str] = None) -> LogsPage:
        """One page of retained frames after ``cursor``."""
        status, body = self._t.object("GET", f"{self._path}/logs", query={"cursor": cursor, "limit": limit, "encoding": encoding})
        return LogsPage.from_wire(body, status)

    def stream_logs(self, cursor: Optional[str] = None, limit: Optional[int] = None,
                    encoding: Optional[str] = None) -> Generator[StreamLogEvent, None, None]:
        """The process's ``log``, ``warning``, ``state`` and ``eof`` events as they come.

        A dropped connection resumes after the last frame yielded; the
        iterator ends after ``eof`` (or ``limit`` frames). Close it to drop
        the connection: leaving a loop over it drops it only when nothing else
        holds the iterator (``for ev in h.stream_logs(): break``); one kept in
        a variable keeps its connection until ``close()`` or until it is
        collected.
        """
        return stream_logs(self._t, self.id, cursor, limit, encoding)

    def stdin(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        """Writes to the stdin of a process started with ``stdin="open"`` (and closes it after, with ``eof``)."""
        raw = input_bytes(data)
        self._t.request("POST", f"{self._path}/stdin", body=raw, query={"eof": True if eof else None},
                        headers={"Content-Type": "application/octet-stream"})

    def stdin_eof(self) -> None:
        """Closes the process's stdin."""
        self.stdin(b"", eof=True)

    def resize(self, cols: int, rows: int) -> None:
        """Resizes a PTY process's terminal."""
        self._t.json("POST", f"{self._path}/resize", json_body={"cols": cols, "rows": rows})

    def interact(
        self,
        input: Union[str, bytes, None] = None,
        *,
        eof: bool = False,
        signal: Optional[str] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        plain: Optional[bool] = None,
    ) -> RunResult:
        """Writes input (or sends a signal), waits as a run does, and answers with the output after ``cursor``.

        The RunResult of the process once it ended, else the output so far
        with ``is_running`` true and ``next`` to read on from. One request: with
        no ``timeout`` (or 0, or one over MAX_WAIT_WINDOW, 280 s) the daemon is
        asked to wait at most 280 s, as the TypeScript SDK asks, so that a
        frozen daemon makes the call raise NetworkError rather than hang.
        """
        body: Dict[str, Any] = wire_options({
            "eof": eof or None, "signal": signal, "cursor": cursor, "idle_timeout": idle_timeout,
            "output_limit": output_limit, "plain": plain,
        })
        if isinstance(input, str):
            input_bytes(input)  # a lone surrogate is refused here, not sent for the daemon to refuse
            body["input"] = input
        elif input is not None:
            body["inputBase64"] = base64.b64encode(input_bytes(input)).decode("ascii")
        # One request, bounded by the wait it asks for: no timeout (or 0, which the daemon
        # takes as none) would wait as long as the process runs, and a frozen daemon would
        # hold the call for ever. A longer wait, or none, is asked for MAX_WAIT_WINDOW; a
        # process still running then comes back running, with next to ask again from.
        wait = _run.ms(timeout) or 0
        cap = max(1, round(MAX_WAIT_WINDOW * 1000))
        body["timeout"] = min(wait, cap) if wait > 0 else cap
        status, w = self._t.object("POST", f"{self._path}/interact", json_body=body,
                                   timeout=socket_timeout(body["timeout"]))
        w = _run._record(w, "interact", status)
        r = _run.from_answer(w, status) if status == 200 else _run.from_answer(w, status, came_back=_run.came_back_of(w))
        if output_limit is None and not plain:
            # What the answer left out, paged back in as a run's is (logs pages are raw: a
            # plain answer stays the daemon's head and tail).
            r = _run.joined(self._t, r)
        return r

    def ready(self, *, port: Union[int, str, None] = None, pattern: Optional[str] = None,
              timeout: Optional[float] = None) -> ReadyResult:
        """Waits until the process listens on ``port`` (or ``"any"``) or its output matches ``pattern`` (RE2)."""
        deadline = deadline_of(timeout)
        while True:
            w = window_ms(self._t, deadline)
            began = time.monotonic()
            status, body = self._t.object("GET", f"{self._path}/ready", query={"port": port, "pattern": pattern, "timeout": w},
                                        timeout=socket_timeout(w))
            if status == 200 and isinstance(body, dict):
                if body.get("ready") is True:
                    p = body.get("port")
                    return ReadyResult(ready=True, port=p if isinstance(p, int) else None,
                                       match=body.get("match"), cursor=body.get("cursor"))
                res = body.get("result")
                return ReadyResult(ready=False, result=WaitResult.from_wire(res if isinstance(res, dict) else {}, status),
                                   truncated=body.get("truncated") is True)
            # A 202 that came before its window passed (not the daemon's) is asked again only once it
            # passed, not at once, for ever.
            soon = min(began + w / 1000, deadline) - time.monotonic()
            if soon > 0:
                pause(soon)
            if _run.left(deadline) <= 0:
                return ReadyResult(ready=False, result=WaitResult(reason="timed_out", raw_reason="wait_timeout"))

    def attach(self) -> "PtyConnection":
        """Attaches to a PTY process: its output (retained, then live) and its input. Needs ``websockets``."""
        from .attach import PtyConnection

        return PtyConnection.open(self._t, self.id)

    def delete(self) -> None:
        """Deletes the process and its logs, stopping it first if it runs."""
        self._t.json("DELETE", self._path, timeout=self._t.read_timeout + STOP_WAIT)

    def to_json(self) -> Dict[str, Any]:
        j: Dict[str, Any] = {"sandboxId": self.sandbox_id, "processId": self.id}
        if self.kind:
            j["kind"] = self.kind
        return j


class Session:
    """One persistent shell. Commands run one at a time, in order; ``cd``, exports and functions carry over.

    A context manager: leaving the ``with`` block deletes the session (quietly
    when it is already gone). Interrupt a command with
    ``handle.kill("INT")``: the session survives.
    """

    def __init__(self, transport: HttpTransport, sandbox_id: str, session_id: str) -> None:
        self._t = transport
        self.sandbox_id = sandbox_id
        self.id = session_id
        self._path = f"/v1/sessions/{seg(session_id)}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except NotFoundError:
            pass

    def get(self) -> ProcessDto:
        """The shell's process, with its current working directory."""
        status, body = self._t.object("GET", self._path)
        return ProcessDto.from_wire(body, status)

    def delete(self) -> None:
        """Ends the shell and deletes it and every record of its commands."""
        self._t.json("DELETE", self._path, timeout=self._t.read_timeout + STOP_WAIT)

    def run(self, command: str, *, timeout: Optional[float] = None, **options: Any) -> RunResult:
        """Runs a command in this shell, waits (at most ``timeout`` s) and collects its output.

        Options: ``stdin``, ``execution_timeout``, ``name``, ``keep_logs``,
        ``idle_timeout``, ``output_limit``, ``plain``.
        """
        body = {**wire_options(options), "cmd": _text("a session command", command)}
        return _run.run(self._t, f"{self._path}/commands/run", body, timeout)

    def start(self, command: str, **options: Any) -> ProcessHandle:
        """Queues a command and returns its handle without waiting."""
        return self._submit({**wire_options(options), "cmd": _text("a session command", command)})

    def run_code(self, code: str, *, timeout: Optional[float] = None, **options: Any) -> RunResult:
        """Runs a cell in this code context, waits and collects its output."""
        body = {**wire_options(options), "code": _text("a cell's code", code)}
        return _run.run(self._t, f"{self._path}/commands/run", body, timeout)

    def start_code(self, code: str, **options: Any) -> ProcessHandle:
        """Queues a cell in this code context and returns its handle."""
        return self._submit({**wire_options(options), "code": _text("a cell's code", code)})

    def _submit(self, body: Dict[str, Any]) -> ProcessHandle:
        status, answer = self._t.object("POST", f"{self._path}/commands", json_body=body)
        dto = ProcessDto.from_wire(answer, status)
        return ProcessHandle(self._t, self.sandbox_id, dto.id, None if dto.kind == "unknown" else dto.kind)

    def to_json(self) -> Dict[str, str]:
        return {"sandboxId": self.sandbox_id, "sessionId": self.id}


class CodeContext(Session):
    """A persistent interpreter (Python or JavaScript): ``run(code)`` runs a cell; variables and imports carry over."""

    def run(self, code: str, *, timeout: Optional[float] = None, **options: Any) -> RunResult:  # type: ignore[override]
        """Runs a cell, waits (at most ``timeout`` s) and collects its output; an exception is exit code 1."""
        return self.run_code(code, timeout=timeout, **options)

    def start(self, code: str, **options: Any) -> ProcessHandle:  # type: ignore[override]
        """Queues a cell and returns its handle."""
        return self.start_code(code, **options)


class ProcessService:
    """Starting, running, listing and rebinding processes and sessions."""

    def __init__(self, transport: HttpTransport, sandbox_id: str) -> None:
        self._t = transport
        self.sandbox_id = sandbox_id

    def __repr__(self) -> str:
        return f"ProcessService(sandbox_id={self.sandbox_id!r})"

    def run(self, command: Command, *, timeout: Optional[float] = None, **options: Any) -> RunResult:
        """Runs a command (a shell string, or an argv sequence: no shell), waits and collects its output.

        Normally one round trip. When ``timeout`` (s) runs out first the
        result comes back running (``is_running``, ``came_back ==
        "wait_timeout"``) with the first pages of output, and the process goes on.
        Options: ``cwd``, ``env``, ``shell``, ``login``, ``user``, ``name``,
        ``stdin``, ``execution_timeout``, ``keep_logs``, ``idle_timeout``,
        ``output_limit``, ``plain``, ``limits``.
        """
        return _run.run(self._t, "/v1/processes/run", {**wire_options(options), **_command(command)}, timeout)

    def start(self, command: Command, **options: Any) -> ProcessHandle:
        """Starts a detached process and returns its handle at once."""
        return _start(self._t, self.sandbox_id, {**wire_options(options), **_command(command)})

    def get(self, process_id: str) -> ProcessDto:
        status, body = self._t.object("GET", f"/v1/processes/{seg(process_id)}")
        return ProcessDto.from_wire(body, status)

    def list(self, *, state: Optional[str] = None, kind: Optional[str] = None, session_id: Optional[str] = None,
             name: Optional[str] = None, pid: Optional[int] = None, cursor: Optional[str] = None,
             limit: Optional[int] = None) -> ListResult:
        """One page of processes; ``next`` starts the following page."""
        status, body = self._t.object("GET", "/v1/processes", query={
            "state": state, "kind": kind, "sessionId": session_id, "name": name, "pid": pid,
            "cursor": cursor, "limit": limit})
        return ListResult.from_wire(body, status)

    def connect(self, process_id: str, kind: Optional[str] = None) -> ProcessHandle:
        """A handle of a process by id, without a request."""
        return ProcessHandle(self._t, self.sandbox_id, process_id, kind)

    def connect_session(self, session_id: str) -> Session:
        """A session by id, without a request."""
        return Session(self._t, self.sandbox_id, session_id)

    def create_session(self, *, shell: Optional[str] = None, cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None, **options: Any) -> Session:
        """Creates one persistent shell (bash by default); set its cwd and env here, not on its commands.

        With ``name=...`` and ``unique_name=True`` the name is the session's own while it runs: a
        running session of that name refuses the creation with :class:`AlreadyExistsError`,
        whose ``session_id`` is that session."""
        body = wire_options({"shell": shell, "cwd": cwd, "env": dict(env) if env is not None else None, **options})
        # The daemon answers once the shell is ready, or refuses it after
        # its readiness limit (30 s by default): a read_timeout as long
        # raced it, and lost the daemon's reason.
        status, answer = self._t.object("POST", "/v1/sessions", json_body=body, timeout=self._t.read_timeout + SESSION_READY)
        return Session(self._t, self.sandbox_id, ProcessDto.from_wire(answer, status).id)

    def create_context(self, *, language: str = "python", cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None, **options: Any) -> CodeContext:
        """Creates a code context: a persistent ``python`` or ``javascript`` interpreter."""
        body = wire_options({"language": language, "cwd": cwd, "env": dict(env) if env is not None else None, **options})
        status, answer = self._t.object("POST", "/v1/sessions", json_body=body, timeout=self._t.read_timeout + SESSION_READY)
        return CodeContext(self._t, self.sandbox_id, ProcessDto.from_wire(answer, status).id)


# SESSION_READY is how long the daemon lets a session's shell or interpreter
# take to be ready by default (30 s), in seconds.
SESSION_READY = 30.0

# STOP_GRACE is how long the daemon gives what it signalled to end before it
# sends KILL (5 s), and STOP_WAIT the longest a DELETE waits for what it
# stops (TERM, KILL STOP_GRACE later, a session command's refusal STOP_GRACE
# after that), in seconds.
STOP_GRACE = 5.0
STOP_WAIT = 3 * STOP_GRACE


def _start(t: HttpTransport, sandbox_id: str, body: Dict[str, Any]) -> ProcessHandle:
    status, answer = t.object("POST", "/v1/processes", json_body=body)
    dto = ProcessDto.from_wire(answer, status)
    return ProcessHandle(t, sandbox_id, dto.id, None if dto.kind == "unknown" else dto.kind)


class PtyService:
    """PTY processes: start, attach, list, delete."""

    def __init__(self, transport: HttpTransport, sandbox_id: str) -> None:
        self._t = transport
        self.sandbox_id = sandbox_id

    def __repr__(self) -> str:
        return f"PtyService(sandbox_id={self.sandbox_id!r})"

    def start(self, command: Optional[str] = None, *, cols: int = 80, rows: int = 24, **options: Any) -> ProcessHandle:
        """Starts a PTY process running command, or the shell when there is none."""
        body = {**wire_options(options), "kind": "pty", "terminal": {"cols": cols, "rows": rows}}
        if command is not None:
            body["cmd"] = command
        return _start(self._t, self.sandbox_id, body)

    def attach(self, command: Optional[str] = None, **options: Any) -> "Tuple[ProcessHandle, PtyConnection]":
        """Starts a PTY process and attaches to it; when attaching fails, the process is deleted."""
        handle = self.start(command, **options)
        try:
            return handle, handle.attach()
        except BaseException:
            # The caller never gets the handle: the process would run on, orphaned.
            try:
                handle.delete()
            except Exception:
                pass
            raise

    def connect(self, process_id: str) -> ProcessHandle:
        return ProcessHandle(self._t, self.sandbox_id, process_id, "pty")

    def list(self) -> List[ProcessDto]:
        out: List[ProcessDto] = []
        cursor: Optional[str] = None
        seen = set()
        while True:
            status, body = self._t.object("GET", "/v1/processes", query={"kind": "pty", "cursor": cursor})
            page = ListResult.from_wire(body, status)
            out.extend(page.items)
            cursor = page.next
            if not cursor:
                return out
            if cursor in seen:
                # A page named again would be listed for ever.
                raise UnexpectedResponseError(
                    f"conch: the list of PTY processes: pages that do not move on (next {cursor[:100]!r} again), "
                    f"not the API's answer (HTTP {status})", status)
            seen.add(cursor)

    def delete(self, process_id: str) -> None:
        self.connect(process_id).delete()
