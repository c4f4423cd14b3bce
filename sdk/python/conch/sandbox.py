"""Sandbox: the entry point, one daemon with its process and pty services."""

from __future__ import annotations

import json
import os
import stat
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


def _start_time(pid: int) -> Optional[int]:
    """When process pid started, in clock ticks after boot (field 22 of /proc/PID/stat); None for a zombie or no process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name, in parentheses, may itself hold spaces and parentheses:
    # fields are counted from the last ')', the state first.
    fields = stat[stat.rfind(b")") + 2:].split()
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


# What is read of a state file at most, as the Go client reads (statefile.MaxSize); each is a
# few hundred bytes.
_MAX_STATE_FILE_SIZE = 64 << 10


def _read_state_file(path: Path) -> bytes:
    """The bytes of the state file at path (daemon.json, the token, an instance record), never waiting and never reading much.

    Anything else found at its name, which any command the daemon runs can
    put there, raises ValueError: a FIFO (which, opened as usual, would wait
    for a writer for ever), a directory, a device, and a file larger than
    ``_MAX_STATE_FILE_SIZE``.
    """
    # O_NONBLOCK: opening a FIFO returns at once, to be refused below.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = b""
        # One byte past the bound tells a file that grew since.
        while len(data) <= _MAX_STATE_FILE_SIZE:
            chunk = os.read(fd, _MAX_STATE_FILE_SIZE + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > _MAX_STATE_FILE_SIZE:
        raise ValueError(f"{path} is larger than a state file can be")
    return data


def _running(state: Path, pid: int) -> bool:
    """Whether the daemon daemon.json names by pid runs, by the rule of the Go client (internal/daemonrec).

    Each running daemon records its instance in ``instances/ID.json`` of the
    state directory: its pid, when that pid started, the boot and the pid
    namespace. A pid alone does not tell: a daemon killed before it took its
    records back leaves its pid to a zombie, or to whatever process the
    kernel gives it next. It runs while an instance record of this pid
    namespace names its pid, and that pid is held, in the same boot, by a
    process (not a zombie) that started when the record says.
    """
    if pid <= 0:
        return False
    try:
        names = os.listdir(state / "instances")
    except OSError:
        return False
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            rec = json.loads(_read_state_file(state / "instances" / name))
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict) or rec.get("pid") != pid or isinstance(rec.get("pid"), bool):
            continue
        if rec.get("pidNamespace", "") == _pid_namespace() and rec.get("bootId", "") == _boot_id() and \
                rec.get("startTime", 0) == _start_time(pid):
            return True
    return False


def discover(env: Mapping[str, str], *, url: str = "", token: str = "") -> "tuple[str, str]":
    """The URL and token of this user's daemon: url and token when given, else from ``env`` or the state directory.

    Tokens from the environment or a file lose surrounding blanks (a
    trailing newline), as the daemon's own reading of them does. A daemon
    recorded without a token file took its token from ``CONCH_TOKEN``: with
    no token given, that raises ConfigurationError, as the Go client and the
    TypeScript SDK do, saying the daemon is no longer running when no live
    instance of it is recorded (see ``_running``: its pid alone does not
    tell).
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
        ep = json.loads(_read_state_file(recorded))
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
        if not _running(state, pid):
            # Killed before it could take its record back: CONCH_TOKEN would reach nothing.
            raise ConfigurationError(
                f"conch: the daemon recorded in {state} ({found_url}, pid {pid}) is no longer running: "
                "start one with `conch serve`, or set CONCH_URL and CONCH_TOKEN")
        raise ConfigurationError(
            f"conch: the daemon at {found_url} (recorded in {state}) took its token from CONCH_TOKEN "
            "and wrote no token file: set CONCH_TOKEN here too")
    if not token:
        try:
            token = _read_state_file(token_file).decode().strip()
        except (OSError, ValueError) as e:
            reason = e.strerror if isinstance(e, OSError) else str(e)
            if _running(state, pid):
                # Starting another, as below, would be refused: this one runs. The conch CLI
                # says the same.
                raise ConfigurationError(
                    f"conch: the daemon recorded in {recorded} (pid {pid}) runs, but its token file "
                    f"{token_file} cannot be read ({reason}): set CONCH_TOKEN to its token, or stop it "
                    "and start it again with `conch serve`, which writes a new one") from e
            raise ConfigurationError(
                f"conch: no daemon found: {token_file} cannot be read ({reason}). "
                "Start one with `conch serve`, or set CONCH_URL and CONCH_TOKEN.") from e
        if not token:
            raise ConfigurationError(f"conch: the token file {token_file} is empty; set CONCH_TOKEN or restart `conch serve`")
    return url or found_url, token
