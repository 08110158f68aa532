"""The server's settings, checked once before anything is served.

Every problem a user can cause with an option (an unknown transport or task, a
tool name no client accepts) is found here and raised as a ``ValueError`` whose
message is one line, so ``quotebench serve`` can print it and exit 2 instead of
failing on the first tool call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tasks.load import UnknownTaskError, get_task
from tasks.schema import Task
from transports.base import Transport
from transports.record import new_id
from transports.registry import UnknownTransportError, get, validate_name
from transports.sandbox import Limits

DEFAULT_TASK = "file-write/control"
DEFAULT_IDLE_S = 1800.0
MAX_SESSIONS = 512
"""Open sessions at once; each holds a sandbox directory, and a client could mint ``_meta`` ids at will."""
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
    record: str | Path | None = None
    idle_timeout_s: float = DEFAULT_IDLE_S
    limits: Limits = field(default_factory=Limits)
    run_id: str = field(default_factory=new_id)


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
    """The ``--record`` file: appendable (made, with its directory, if missing); a directory or an
    unwritable place is a one-line ``ValueError``."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--record {p}: is a directory (give a JSONL file to append records to)")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "ab"):
            pass
    except OSError as e:
        raise ValueError(f"--record {p}: cannot write: {e.strerror or e}") from None
    return p


def check_idle(seconds: float) -> float:
    if not seconds > 0:
        raise ValueError(f"idle timeout must be a positive number of seconds, not {seconds}")
    return float(seconds)
