"""One exception class per API error code, all :class:`ConchError`.

:func:`error_from` is the one place where an answer that is not 2xx becomes
one of them; a connection that fails raises :class:`NetworkError`.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
from typing import Any, Dict, Optional, Type

__all__ = [
    "ConchError",
    "InvalidArgumentError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "UnsupportedOperationError",
    "StdinFullError",
    "PayloadTooLargeError",
    "ResourceExhaustedError",
    "UnavailableError",
    "InternalError",
    "NetworkError",
    "ConfigurationError",
    "UnexpectedResponseError",
    "error_from",
]


class ConchError(Exception):
    """An error the daemon answered: its ``code``, HTTP ``status`` and ``message``."""

    code: str
    status: int
    message: str
    #: Seconds to wait before trying again, when the answer had ``Retry-After`` (a draining
    #: daemon's 503 says 1); else None.
    retry_after: Optional[int] = None

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"


class InvalidArgumentError(ConchError):
    """400: malformed input, a bad option value, a shell that is not POSIX."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_argument") -> None:
        super().__init__(code, status, message)


class AuthenticationError(ConchError):
    """401: a missing or wrong token."""

    def __init__(self, message: str, status: int = 401, code: str = "unauthenticated") -> None:
        super().__init__(code, status, message)


class PermissionDeniedError(ConchError):
    """403: the request's Host or Origin is not allowed."""

    def __init__(self, message: str, status: int = 403, code: str = "permission_denied") -> None:
        super().__init__(code, status, message)


class NotFoundError(ConchError):
    """404: no such process or session."""

    def __init__(self, message: str, status: int = 404, code: str = "not_found") -> None:
        super().__init__(code, status, message)


class UnsupportedOperationError(ConchError):
    """409: the operation does not apply in the process's state (stdin not open, ...)."""

    def __init__(self, message: str, status: int = 409, code: str = "unsupported_operation") -> None:
        super().__init__(code, status, message)


class StdinFullError(UnsupportedOperationError):
    """409 ``stdin_full``: the write did not fit in the process's input queue.

    ``accepted_bytes`` of its first bytes were queued; send the rest again once
    the process has read.
    """

    def __init__(self, message: str, status: int = 409, code: str = "stdin_full", accepted_bytes: int = 0) -> None:
        super().__init__(message, status, code)
        self.accepted_bytes = accepted_bytes


class AlreadyExistsError(ConchError):
    """409 ``already_exists``: a session created with ``unique_name=True`` whose name a running
    session has; ``session_id`` is that session (``process.connect_session(session_id)`` takes it)."""

    def __init__(self, message: str, status: int = 409, code: str = "already_exists", session_id: str = "") -> None:
        super().__init__(code, status, message)
        self.session_id = session_id


class PayloadTooLargeError(ConchError):
    """413: the request is over one of the daemon's limits."""

    def __init__(self, message: str, status: int = 413, code: str = "payload_too_large") -> None:
        super().__init__(code, status, message)


class ResourceExhaustedError(ConchError):
    """429: over a configured limit of sessions or processes."""

    def __init__(self, message: str, status: int = 429, code: str = "resource_exhausted") -> None:
        super().__init__(code, status, message)


class UnavailableError(ConchError):
    """503: the daemon is draining or not ready; try again later."""

    def __init__(self, message: str, status: int = 503, code: str = "unavailable") -> None:
        super().__init__(code, status, message)


class InternalError(ConchError):
    """500: a bug in the daemon."""

    def __init__(self, message: str, status: int = 500, code: str = "internal") -> None:
        super().__init__(code, status, message)


class NetworkError(ConchError):
    """The daemon could not be reached, or the connection broke before it answered."""

    def __init__(self, message: str, status: int = 0, code: str = "network") -> None:
        super().__init__(code, status, message)


class ConfigurationError(ConchError):
    """No daemon to talk to was configured (no token found), or a token a request cannot carry."""

    def __init__(self, message: str, status: int = 0, code: str = "configuration") -> None:
        super().__init__(code, status, message)


class UnexpectedResponseError(ConchError):
    """An answer that is not the API's: a body that is not the JSON its route answers, or an
    error page without the API's error shape, whatever its status (a proxy's 502 or 503, another
    server's 404)."""

    def __init__(self, message: str, status: int = 0, code: str = "unexpected_response") -> None:
        super().__init__(code, status, message)


_by_code: Dict[str, Type[ConchError]] = {
    "invalid_argument": InvalidArgumentError,
    "unauthenticated": AuthenticationError,
    "permission_denied": PermissionDeniedError,
    "not_found": NotFoundError,
    "unsupported_operation": UnsupportedOperationError,
    "stdin_full": StdinFullError,
    "already_exists": AlreadyExistsError,
    "payload_too_large": PayloadTooLargeError,
    "resource_exhausted": ResourceExhaustedError,
    "draining": UnavailableError,
    "unavailable": UnavailableError,
    "internal": InternalError,
}

# An empty error body is named by its status.
_code_by_status: Dict[int, str] = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "unsupported_operation",
    413: "payload_too_large",
    429: "resource_exhausted",
    500: "internal",
    503: "unavailable",
}


def error_from(status: int, body: bytes, retry_after: Optional[str] = None) -> ConchError:
    """The error of an answer whose status is not 2xx, from its body and its ``Retry-After``
    header (None when it has none)."""
    err = _error_from(status, body)
    err.retry_after = _retry_seconds(retry_after)
    return err


def _retry_seconds(v: Optional[str]) -> Optional[int]:
    """The seconds of a Retry-After header: a number of seconds, or an HTTP date."""
    if v is None or not v.strip():
        return None
    if v.strip().isdigit():
        return int(v.strip())
    try:
        at = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.timezone.utc)
    return max(0, math.ceil((at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()))


def _error_from(status: int, body: bytes) -> ConchError:
    text = body.decode("utf-8", "replace")
    code: Optional[str] = None
    err: Any = None
    message = text.strip() or f"HTTP {status}"
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        err = parsed["error"]
        if isinstance(err.get("code"), str):
            code = err["code"]
        # An error without its message says its status, as the TypeScript SDK's does, not
        # the JSON it came in.
        message = err["message"] if isinstance(err.get("message"), str) and err["message"] else f"HTTP {status}"
    if code is None and text.strip():
        # A body, but not the API's error (a proxy's page, another server's
        # 404): not the daemon's answer, whatever its status says.
        return UnexpectedResponseError(f"conch: an answer that is not the API's (HTTP {status}): {text.strip()[:200]}", status)
    if code is None:
        code = _code_by_status.get(status)
    if code is None:
        return UnexpectedResponseError(f"conch: an answer that is not the API's (HTTP {status}): {message[:200]}", status)
    cls = _by_code.get(code)
    if cls is None:
        return ConchError(code, status, message)
    if cls is AlreadyExistsError:
        sid = err.get("sessionId") if isinstance(err, dict) else None
        return AlreadyExistsError(message, status, code, sid if isinstance(sid, str) else "")
    if cls is StdinFullError:
        accepted = err.get("acceptedBytes") if isinstance(err, dict) else None
        return StdinFullError(message, status, code,
                              accepted if isinstance(accepted, int) and not isinstance(accepted, bool) else 0)
    return cls(message, status, code)
