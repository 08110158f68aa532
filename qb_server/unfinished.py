"""Sessions a killed server never ended, noted when the next server starts on the same record file.

Why
    A session's end record (its final verdict) is written when the session
    ends. A server killed with SIGKILL (or by the OOM killer, or a power cut)
    writes none, and a reader of the file cannot tell such a session from one
    that is still running. Recording the end is impossible then, but the next
    start with the same ``--record`` file can say what happened: for every
    session with calls after its last end record it appends one end record,
    ``error = "session-end: unfinished: the server stopped without ending it"``,
    verdict failed (the final state was never judged). That record is itself an
    end, so each such session is noted once.

Live servers
    Several servers may append to one file. Each holds a shared ``flock`` on it
    while it serves; a starting server notes unfinished sessions only when it
    can take the lock exclusively, that is when no other server is serving
    into the file (a live server's open sessions are not unfinished). Sessions
    of a server killed while another one was still serving are noted by the
    next start that finds the file free.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from pathlib import Path
from typing import Any

from transports.results.record import Record
from transports.results.store import JsonlWriter, jsonl_values

UNFINISHED = "session-end: unfinished: the server stopped without ending it"
_ID = re.compile(r"^(mcp-.+-[0-9a-f]{8})-(?:(\d+)|session-end(?:-\d+)?)$")
_IDENTITY = ("run_id", "config", "contract", "transport", "shell", "task_id", "family", "tier", "draw", "versions")


class RecordLock:
    """A ``flock`` on the record file: exclusive while the server starts alone, then shared."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.fd: int | None = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.alone = True
        except OSError:
            self.alone = False
            fcntl.flock(self.fd, fcntl.LOCK_SH)  # shared locks never wait for each other

    def share(self) -> None:
        """From now on other servers may start on the file too (they will not note our sessions)."""
        if self.fd is not None and self.alone:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the lock
            self.fd = None


def open_sessions(path: str | os.PathLike[str]) -> dict[str, tuple[dict[str, Any], int]]:
    """``{session prefix: (its last call, how many ends it already has)}`` for sessions with calls after
    their last end. Lines that are not server records are passed over; the file is read by the rule of
    :mod:`transports.results.store` (a torn last line skipped; a line that is not JSON, too long or nested too
    deep is :class:`~transports.results.store.StoreError`, one line naming the file and line: the server does
    not start on a file it cannot read)."""
    last: dict[str, dict[str, Any]] = {}
    ends: dict[str, int] = {}
    for _, obj in jsonl_values(path):
        rid = obj.get("reply_id") if isinstance(obj, dict) else None
        m = _ID.match(rid) if isinstance(rid, str) else None
        if m is None:
            continue
        prefix = m.group(1)
        if m.group(2) is not None:
            last[prefix] = obj
        else:
            ends[prefix] = ends.get(prefix, 0) + 1
            last.pop(prefix, None)
    return {p: (call, ends.get(p, 0)) for p, call in last.items()}


def unfinished_record(prefix: str, call: dict[str, Any], ends: int) -> Record:
    """The end record of a session that never ended: the session's identity, nothing ran, not judged."""
    k = ends + 1
    fields = {name: call[name] for name in _IDENTITY if name in call}
    return Record.model_validate({
        **fields,
        "reply_id": f"{prefix}-session-end" + ("" if k == 1 else f"-{k}"),
        "reply": "", "command": None, "received": None, "damaged": False, "exit_code": None,
        "stdout": {"text": "", "truncated": False}, "stderr": {"text": "", "truncated": False},
        "timed_out": False, "transport_error": None,
        "verdict": {"passed": False, "checks": [{"check": "session-end", "ok": False,
                                                 "detail": "not judged: the server stopped without ending the session"}]},
        "error": UNFINISHED,
    })


def note_unfinished(path: str | os.PathLike[str], writer: JsonlWriter) -> int:
    """Append an ``unfinished`` end for every session of ``path`` that never ended; how many were noted.

    Best effort: a record that cannot be rebuilt (a foreign line that only looks like ours) is skipped."""
    noted = 0
    for prefix, (call, ends) in open_sessions(path).items():
        try:
            record = unfinished_record(prefix, call, ends)
        except ValueError:
            continue
        writer.write(record)
        noted += 1
    if noted:
        print(f"quotebench serve: {noted} session(s) in {Path(path)} never ended (a server stopped without "
              f"ending them); each now has a '{UNFINISHED}' record", file=sys.stderr)
    return noted
