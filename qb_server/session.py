"""One client's session: its key, its sandbox, the lock that orders its calls, and the thread its host work runs on.

Only :class:`qb_server.sessions.SessionManager` creates and ends sessions; everything here is the state it keeps.
"""

from __future__ import annotations

import time
import uuid

import anyio

from tasks.schema import Task
from transports.results.record import Record
from transports.sandbox import Sandbox

from .keys import SessionKey
from .worker import Worker


class Session:
    """One client's sandbox and what happened in it. Touch it only inside ``SessionManager.use``."""

    def __init__(self, key: SessionKey, task: Task) -> None:
        self.key = key
        self.uid = uuid.uuid4().hex[:8]
        """Sets this session's record ids apart from those of any other session with the same key."""
        self.task = task
        self.sandbox: Sandbox | None = None
        self.lock = anyio.Lock()
        self.calls = 0
        self.ends = 0
        self.last_record: Record | None = None
        self.last_used = time.monotonic()
        self.closed = False
        self.client = "unknown"
        self._worker: Worker | None = None

    def worker(self) -> Worker:
        """The thread this session's host work runs on; a new one after an overrun retired the last."""
        if self._worker is None or self._worker.retired:
            self._worker = Worker(self.key.label)
        return self._worker

    def retire_worker(self) -> None:
        if self._worker is not None:
            self._worker.retire()
            self._worker = None
