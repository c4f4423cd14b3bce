"""conch for asyncio: the same surface as coroutines.

Every call runs the blocking client in a thread of its own (not the event
loop's shared executor, which long waits and quiet log streams would
exhaust), so the event loop keeps running while a command runs; attach is
native asyncio. ``AsyncSandbox.from_env()``, ``await sandbox.exec("ls")``,
``async with await sandbox.process.create_session() as s: await s.run(...)``.

Cancelling a call (``asyncio.wait_for``, ``asyncio.timeout``, ``task.cancel()``)
raises CancelledError (TimeoutError for a timeout) at once: the connection the
call waits on is shut down, so its thread ends promptly and nothing of it is
reused. The command on the daemon goes on, as when a blocking call is
interrupted; kill it to stop it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from ._transport import CallScope, call_scope
from .attach import AsyncPtyConnection
from .errors import NotFoundError
from .process import CodeContext, ProcessHandle, ProcessService, PtyService, Session
from .sandbox import DEFAULT_URL, Sandbox
from .types import Command, ListResult, LogsPage, ProcessDto, ReadyResult, RunResult, StreamLogEvent, WaitResult

__all__ = [
    "AsyncSandbox", "AsyncProcessService", "AsyncPtyService", "AsyncProcessHandle", "AsyncSession",
    "AsyncCodeContext", "AsyncPtyConnection",
]

T = TypeVar("T")


async def _thread(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """fn(*args, **kw) in a thread of its own; cancelling the caller cuts its connections."""
    return await _in_thread(CallScope(), None, fn, *args, **kw)


async def _in_thread(scope: CallScope, ended: "Optional[asyncio.Future[None]]", fn: Callable[..., T],
                     *args: Any, **kw: Any) -> T:
    """fn(*args, **kw) in a new thread under scope; ended (if given) is set once the thread is done with fn."""
    loop = asyncio.get_running_loop()
    done: "asyncio.Future[T]" = loop.create_future()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if ended is not None and not ended.done():
            ended.set_result(None)
        if done.done():  # cancelled: nobody wants the outcome
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        call_scope.set(scope)  # a thread starts in a context of its own
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = fn(*args, **kw)
        except BaseException as e:  # handed to the awaiting task
            error = e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=work, name="conch-aio", daemon=True).start()
    try:
        return await done
    except asyncio.CancelledError:
        scope.cancel()
        raise


class AsyncProcessHandle:
    """:class:`~conch.process.ProcessHandle` as coroutines."""

    def __init__(self, handle: ProcessHandle) -> None:
        self._h = handle
        self.id = handle.id
        self.sandbox_id = handle.sandbox_id
        self.kind = handle.kind

    def __repr__(self) -> str:
        return f"AsyncProcessHandle(id={self.id!r}, kind={self.kind!r})"

    async def get(self) -> ProcessDto:
        return await _thread(self._h.get)

    async def wait(self, timeout: Optional[float] = None) -> WaitResult:
        return await _thread(self._h.wait, timeout)

    async def kill(self, signal: str = "TERM", **kw: Any) -> None:
        await _thread(self._h.kill, signal, **kw)

    async def logs(self, cursor: Optional[str] = None, limit: Optional[int] = None,
                   encoding: Optional[str] = None) -> LogsPage:
        return await _thread(self._h.logs, cursor, limit, encoding)

    async def stream_logs(self, cursor: Optional[str] = None, limit: Optional[int] = None,
                          encoding: Optional[str] = None) -> AsyncIterator[StreamLogEvent]:
        """The events of :meth:`ProcessHandle.stream_logs`, each read in a thread of its own.

        Cancelling it, or ``aclose()``, drops the stream's connection; leaving
        the loop does only when nothing else holds the iterator, as for
        :meth:`ProcessHandle.stream_logs`.
        """
        it = self._h.stream_logs(cursor, limit, encoding)
        end = object()
        scope = CallScope()  # the stream's connection outlives each read: one scope for them all
        loop = asyncio.get_running_loop()
        reading: "Optional[asyncio.Future[None]]" = None
        try:
            while True:
                reading = loop.create_future()
                ev = await _in_thread(scope, reading, next, it, end)
                if ev is end:
                    return
                yield ev  # type: ignore[misc]
        finally:
            scope.cancel()
            # A read cut short ends at once; the generator may be closed only once it has.
            if reading is not None and not reading.done():
                await reading
            it.close()

    async def stdin(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        await _thread(self._h.stdin, data, eof=eof)

    async def stdin_eof(self) -> None:
        await _thread(self._h.stdin_eof)

    async def resize(self, cols: int, rows: int) -> None:
        await _thread(self._h.resize, cols, rows)

    async def interact(self, input: Union[str, bytes, None] = None, **kw: Any) -> RunResult:
        return await _thread(self._h.interact, input, **kw)

    async def ready(self, **kw: Any) -> ReadyResult:
        return await _thread(self._h.ready, **kw)

    async def attach(self) -> AsyncPtyConnection:
        return await AsyncPtyConnection.open(self._h._t, self.id)

    async def delete(self) -> None:
        await _thread(self._h.delete)

    def to_json(self) -> Dict[str, Any]:
        return self._h.to_json()


class AsyncSession:
    """:class:`~conch.process.Session` as coroutines; ``async with`` deletes it on exit."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self.id = session.id
        self.sandbox_id = session.sandbox_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.delete()
        except NotFoundError:
            pass

    async def get(self) -> ProcessDto:
        return await _thread(self._s.get)

    async def delete(self) -> None:
        await _thread(self._s.delete)

    async def run(self, command: str, **kw: Any) -> RunResult:
        return await _thread(self._s.run, command, **kw)

    async def start(self, command: str, **kw: Any) -> AsyncProcessHandle:
        return AsyncProcessHandle(await _thread(self._s.start, command, **kw))

    async def run_code(self, code: str, **kw: Any) -> RunResult:
        return await _thread(self._s.run_code, code, **kw)

    async def start_code(self, code: str, **kw: Any) -> AsyncProcessHandle:
        return AsyncProcessHandle(await _thread(self._s.start_code, code, **kw))

    def to_json(self) -> Dict[str, Any]:
        return self._s.to_json()


class AsyncCodeContext(AsyncSession):
    """:class:`~conch.process.CodeContext` as coroutines: ``await ctx.run(code)``."""

    async def run(self, code: str, **kw: Any) -> RunResult:  # type: ignore[override]
        return await self.run_code(code, **kw)

    async def start(self, code: str, **kw: Any) -> AsyncProcessHandle:  # type: ignore[override]
        return await self.start_code(code, **kw)


class AsyncProcessService:
    """:class:`~conch.process.ProcessService` as coroutines."""

    def __init__(self, service: ProcessService) -> None:
        self._p = service

    async def run(self, command: Command, **kw: Any) -> RunResult:
        return await _thread(self._p.run, command, **kw)

    async def start(self, command: Command, **kw: Any) -> AsyncProcessHandle:
        return AsyncProcessHandle(await _thread(self._p.start, command, **kw))

    async def get(self, process_id: str) -> ProcessDto:
        return await _thread(self._p.get, process_id)

    async def list(self, **kw: Any) -> ListResult:
        return await _thread(self._p.list, **kw)

    def connect(self, process_id: str, kind: Optional[str] = None) -> AsyncProcessHandle:
        return AsyncProcessHandle(self._p.connect(process_id, kind))

    def connect_session(self, session_id: str) -> AsyncSession:
        return AsyncSession(self._p.connect_session(session_id))

    async def create_session(self, **kw: Any) -> AsyncSession:
        return AsyncSession(await _thread(self._p.create_session, **kw))

    async def create_context(self, **kw: Any) -> AsyncCodeContext:
        ctx: CodeContext = await _thread(self._p.create_context, **kw)
        return AsyncCodeContext(ctx)


class AsyncPtyService:
    """:class:`~conch.process.PtyService` as coroutines."""

    def __init__(self, service: PtyService) -> None:
        self._p = service

    async def start(self, command: Optional[str] = None, **kw: Any) -> AsyncProcessHandle:
        return AsyncProcessHandle(await _thread(self._p.start, command, **kw))

    async def attach(self, command: Optional[str] = None, **kw: Any) -> Tuple[AsyncProcessHandle, AsyncPtyConnection]:
        """Starts a PTY process and attaches to it; when attaching fails or is cancelled, the process is deleted."""
        handle = await self.start(command, **kw)
        try:
            return handle, await handle.attach()
        except BaseException:
            # The caller never gets the handle: the process would run on, orphaned. Shielded,
            # so that a second cancel leaves the deletion going.
            try:
                await asyncio.shield(handle.delete())
            except Exception:
                pass
            raise

    def connect(self, process_id: str) -> AsyncProcessHandle:
        return AsyncProcessHandle(self._p.connect(process_id))

    async def list(self) -> List[ProcessDto]:
        return await _thread(self._p.list)

    async def delete(self, process_id: str) -> None:
        await _thread(self._p.delete, process_id)


class AsyncSandbox:
    """:class:`~conch.sandbox.Sandbox` for asyncio."""

    def __init__(self, url: str = DEFAULT_URL, token: str = "", **kw: Any) -> None:
        self._sync = Sandbox(url, token, **kw)
        self.sandbox_id = self._sync.sandbox_id
        self.transport = self._sync.transport
        self.process = AsyncProcessService(self._sync.process)
        self.pty = AsyncPtyService(self._sync.pty)

    def __repr__(self) -> str:
        return f"AsyncSandbox(url={self.transport.url!r}, sandbox_id={self.sandbox_id!r})"

    @classmethod
    def from_env(cls, **kw: Any) -> "AsyncSandbox":
        s = cls.__new__(cls)
        s._sync = Sandbox.from_env(**kw)
        s.sandbox_id = s._sync.sandbox_id
        s.transport = s._sync.transport
        s.process = AsyncProcessService(s._sync.process)
        s.pty = AsyncPtyService(s._sync.pty)
        return s

    async def exec(self, command: Command, **kw: Any) -> RunResult:
        return await self.process.run(command, **kw)

    async def health(self) -> Any:
        return await _thread(self._sync.health)

    async def close(self) -> None:
        self._sync.close()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
