"""The server's settings, checked once before anything is served.

Every problem a user can cause with an option (an unknown transport or task, a
tool name no client accepts) is found here and raised as a ``ValueError`` whose
message is one line, so ``quotebench serve`` can print it and exit 2 instead of
failing on the first tool call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tasks.load import UnknownTaskError, get_task
from tasks.schema import Task
from transports.base import Transport
from transports.results.record import new_id
from transports.registry import UnknownTransportError, get, validate_name
from transports.sandbox import Limits

DEFAULT_TASK = "file-write/control"
DEFAULT_IDLE_S = 1800.0
DEFAULT_RECLAIM_S = 60.0
"""A session idle this long may be ended to make room for a new one when the host budget (or the session
table) is full: idle sessions must not hold the server (three idle clients locked every other one out
until ``DEFAULT_IDLE_S``). Long enough for a model's turn between two calls."""
MAX_SESSIONS = 512
"""Open sessions at once; each holds a sandbox directory, and a client could mint ``_meta`` ids at will."""
HOST_GRACE_S = 10.0
"""What a call's host work may take beyond the command's own time limit (bwrap start and teardown,
reading back what was received) before it is abandoned; also the bound of one verdict."""
CREATE_BOUND_S = 60.0
"""The most building a sandbox (the fixture, possibly a git repository) may take."""
CLOSE_BOUND_S = 60.0
"""The most deleting a sandbox may take; a hostile tree must not keep a session end waiting longer."""
MAX_STUCK = 64
"""Abandoned host operations still blocked (each a thread) beyond which no new sandbox is made."""
CONTROL_PREFIX = "qb_"
# What MCP allows in a tool name (letters, digits, _ - .); providers are stricter about '.', so it is
# allowed but not recommended.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass
class ServerConfig:
    """Options of one server; see :func:`qb_server.app.build_server` for their meaning."""

    transport: str = "raw"
    task: str = DEFAULT_TASK
    tool_name: str = "bash"
    control: bool = False
    guard: bool = False
    """Lint each call before delivery and send what arrives as R (:mod:`qb_server.guard`)."""
    lint_tool: bool = False
    """Offer the ``lint`` tool beside the shell tool (off by default: an agent under test sees one tool)."""
    record: str | Path | None = None
    idle_timeout_s: float = DEFAULT_IDLE_S
    limits: Limits = field(default_factory=Limits)
    run_id: str = field(default_factory=new_id)
    host_grace_s: float = HOST_GRACE_S
    reclaim_idle_s: float = DEFAULT_RECLAIM_S
    """A session idle at least this long is ended (``session-end: reclaimed``), least recently used first,
    when a new sandbox does not fit; see :meth:`qb_server.sessions.SessionManager.reclaim`."""
    host_budget: int | None = None
    """Bytes all sandboxes together may ask of the host (:mod:`qb_server.budget`). None: no budget, for an
    in-process server whose caller bounds its sessions (a campaign's workers); :func:`qb_server.app.serve`,
    which clients reach, gives half of the RAM."""


def resolve_transport(name: str) -> Transport:
    """Build the transport once; an unknown name is a one-line ``ValueError``."""
    try:
        validate_name(name)
        return get(name)
    except UnknownTransportError as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # e.g. a lazily imported transport whose module is missing
        raise ValueError(f"transport '{name}' cannot be built: {type(e).__name__}: {e}") from None


def resolve_task(task_id: str) -> Task:
    """Look the task up; ``UnknownTaskError`` is a ``KeyError``, turned into a one-line ``ValueError``."""
    try:
        return get_task(task_id)
    except UnknownTaskError as e:
        raise ValueError(str(e)) from None


def check_tool_name(name: str) -> str:
    if not _TOOL_NAME.match(name):
        raise ValueError(f"tool name '{name}' is not a valid MCP tool name (1-64 of A-Z a-z 0-9 _ - .)")
    if name.startswith(CONTROL_PREFIX):
        raise ValueError(f"tool name '{name}' uses the prefix '{CONTROL_PREFIX}' reserved for the control tools")
    return name


def check_record(path: str | Path | None) -> Path | None:
    """The ``--record`` file: a regular file to append to, made if missing.

    The project's rule for every output file: its parent directory must exist (nothing is created on
    the way to it, so a typo cannot scatter directories, even at ``/``). A missing directory, a
    directory, a FIFO or device (opening one could block or swallow the records) or an unwritable
    place is a one-line ``ValueError`` naming the option and the path."""
    if path is None:
        return None
    p = Path(path)
    if not p.parent.is_dir():
        raise ValueError(f"--record {p}: the directory {p.parent} does not exist (create it first)")
    if p.is_dir():
        raise ValueError(f"--record {p}: is a directory (give a JSONL file to append records to)")
    if p.exists() and not p.is_file():
        raise ValueError(f"--record {p}: is not a regular file (give a JSONL file to append records to)")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        os.close(fd)
    except OSError as e:
        raise ValueError(f"--record {p}: cannot write: {e.strerror or e}") from None
    return p


def check_timeout(seconds: float) -> float:
    if not 0 < seconds <= 24 * 3600:
        raise ValueError(f"--timeout must be a positive number of seconds (at most a day), not {seconds}")
    return float(seconds)


def check_idle(seconds: float, option: str = "--idle-timeout") -> float:
    if not seconds > 0:
        raise ValueError(f"{option} must be a positive number of seconds, not {seconds}")
    return float(seconds)
