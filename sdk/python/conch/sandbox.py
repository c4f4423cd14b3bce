"""Sandbox: the entry point, one daemon with its process and pty services."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional

from ._transport import HttpTransport
from .errors import ConfigurationError
from .process import ProcessService, PtyService
from .types import Command, RunResult

__all__ = ["Sandbox", "discover"]

DEFAULT_URL = "http://127.0.0.1:7070"


class Sandbox:
    """One conch daemon: ``process`` for sessions, processes and code contexts, ``pty`` for terminals.

    ``Sandbox(url=..., token=...)``, or :meth:`from_env` to find the daemon of
    this user. The token is never shown by ``repr``.
    """

    def __init__(self, url: str = DEFAULT_URL, token: str = "", *, sandbox_id: str = "local",
                 wait_window: float = 30.0, logs_page_size: float = 1000, read_timeout: float = 30.0) -> None:
        self.sandbox_id = sandbox_id
        self.transport = HttpTransport(url, token, wait_window=wait_window, logs_page_size=logs_page_size,
                                       read_timeout=read_timeout)
        self.process = ProcessService(self.transport, sandbox_id)
        self.pty = PtyService(self.transport, sandbox_id)

    def __repr__(self) -> str:
        return f"Sandbox(url={self.transport.url!r}, sandbox_id={self.sandbox_id!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the kept-alive connections, and the one of each call still in flight once it is done."""
        self.transport.close()

    def exec(self, command: Command, *, timeout: Optional[float] = None, **options: Any) -> RunResult:
        """Same as ``process.run``."""
        return self.process.run(command, timeout=timeout, **options)

    def health(self) -> Mapping[str, Any]:
        """The daemon's ``/healthz`` answer."""
        _, body = self.transport.object("GET", "/healthz")
        return body

    @classmethod
    def from_env(cls, **options: Any) -> "Sandbox":
        """The daemon of this user.

        ``url`` and ``token`` given here win; else ``CONCH_URL`` and
        ``CONCH_TOKEN`` when set, else what ``conch serve`` recorded in its
        state directory (``$XDG_STATE_HOME/conch`` or ``~/.local/state/conch``):
        ``daemon.json`` and the token file it names. No token anywhere raises
        :class:`~conch.errors.ConfigurationError`.
        """
        url, token = discover(os.environ, url=options.pop("url", None) or "", token=options.pop("token", None) or "")
        return cls(url=url, token=token, **options)


def _running(pid: int) -> bool:
    """Whether process pid runs (or this user may not signal it), as the Go client tells."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def discover(env: Mapping[str, str], *, url: str = "", token: str = "") -> "tuple[str, str]":
    """The URL and token of this user's daemon: url and token when given, else from ``env`` or the state directory.

    Tokens from the environment or a file lose surrounding blanks (a
    trailing newline), as the daemon's own reading of them does. A daemon
    recorded without a token file took its token from ``CONCH_TOKEN``: with
    no token given, that raises ConfigurationError, as the Go client and the
    TypeScript SDK do, saying the daemon is no longer running when its
    recorded pid is gone.
    """
    url = url or (env.get("CONCH_URL") or "").strip()
    token = token or (env.get("CONCH_TOKEN") or "").strip()
    if url and token:
        return url, token
    xdg = env.get("XDG_STATE_HOME") or ""
    state = Path(xdg) / "conch" if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state" / "conch"
    token_file = state / "token"
    recorded = state / "daemon.json"
    found_url = DEFAULT_URL
    no_file = False
    pid = 0
    try:
        ep = json.loads(recorded.read_text())
        if isinstance(ep, dict):
            if isinstance(ep.get("url"), str) and ep["url"]:
                found_url = ep["url"]
                # A daemon that took its token from CONCH_TOKEN records no token file: the
                # state directory's is then an older daemon's, whose token it would refuse.
                no_file = True
            if isinstance(ep.get("tokenFile"), str) and ep["tokenFile"]:
                token_file = Path(ep["tokenFile"])
                no_file = False
            if isinstance(ep.get("pid"), int) and not isinstance(ep["pid"], bool) and ep["pid"] > 0:
                pid = ep["pid"]
    except (OSError, ValueError):
        pass
    if not token and no_file:
        if pid and not _running(pid):
            # Killed before it could take its record back: CONCH_TOKEN would reach nothing.
            raise ConfigurationError(
                f"conch: the daemon recorded in {state} ({found_url}, pid {pid}) is no longer running: "
                "start one with `conch serve`, or set CONCH_URL and CONCH_TOKEN")
        raise ConfigurationError(
            f"conch: the daemon at {found_url} (recorded in {state}) took its token from CONCH_TOKEN "
            "and wrote no token file: set CONCH_TOKEN here too")
    if not token:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            raise ConfigurationError(
                f"conch: no daemon found: {token_file} cannot be read ({e.strerror}). "
                "Start one with `conch serve`, or set CONCH_URL and CONCH_TOKEN.") from e
        if not token:
            raise ConfigurationError(f"conch: the token file {token_file} is empty; set CONCH_TOKEN or restart `conch serve`")
    return url or found_url, token
