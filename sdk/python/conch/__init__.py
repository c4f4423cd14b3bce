"""conch: persistent shell sessions, processes, code contexts and terminals over a conch daemon.

>>> from conch import Sandbox
>>> sandbox = Sandbox.from_env()          # CONCH_URL/CONCH_TOKEN, else what `conch serve` recorded
>>> with sandbox.process.create_session() as s:
...     s.run("cd /tmp && export MODE=test")
...     r = s.run('echo "mode $MODE"; (exit 3)')
>>> r.exit_code, r.stdout
(3, 'mode test\\n')

Only the standard library is used; ``attach`` needs the optional
``websockets`` package, and :mod:`conch.aio` gives the same surface to asyncio.
"""

from .errors import (
    AlreadyExistsError, AuthenticationError, ConchError, ConfigurationError, InternalError, InvalidArgumentError, NetworkError, NotFoundError,
    PayloadTooLargeError, PermissionDeniedError, ResourceExhaustedError, StdinFullError, UnavailableError,
    UnexpectedResponseError, UnsupportedOperationError,
)
from .process import CodeContext, ProcessHandle, ProcessService, PtyService, Session
from .sandbox import Sandbox
from ._transport import HttpTransport
from .types import (
    ListResult, LogFrame, LogsPage, ProcessDto, ReadyResult, RunResult, StreamLogEvent, TerminalSize, Usage,
    WaitResult,
)

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "HttpTransport", "ProcessService", "PtyService", "ProcessHandle", "Session", "CodeContext",
    "ProcessDto", "WaitResult", "RunResult", "LogFrame", "LogsPage", "ListResult", "StreamLogEvent",
    "ReadyResult", "TerminalSize", "Usage",
    "ConchError", "InvalidArgumentError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "UnsupportedOperationError", "PayloadTooLargeError", "ResourceExhaustedError", "UnavailableError",
    "InternalError", "NetworkError", "ConfigurationError", "StdinFullError", "AlreadyExistsError",
    "UnexpectedResponseError",
]
