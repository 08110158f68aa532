"""A run's wall clock, kept on its own process, not on the event loop that waits for it.

Why
    ``Sandbox.run`` timed a command with ``anyio.move_on_after`` on the event loop
    that also reads its output. When something else held that loop (a slow parse, a
    big fixture, a validator), the deadline fired late or, worse, fired first when
    the loop came back: a command that had exited in 0.5 s was recorded
    ``timed_out`` because its neighbour's host work had frozen the loop for 4 s.
    A run's verdict then depended on what ran beside it.

How
    :func:`start` is called right after the process is spawned. A daemon thread
    waits on the process's pidfd (``pidfd_open``, Linux 5.3+; readable once the
    process has exited, reaped or not) with the run's limit as the poll timeout,
    so neither the loop nor the GIL-free wait can be delayed by other Python work
    for more than a thread switch. If the process is still alive at the deadline
    the clock calls ``on_expiry`` (which kills the process group and the cgroup) and
    the run is timed out; otherwise it records when the process ended.
    :meth:`RunClock.stop` returns whether the run timed out, on the process's own
    time. The pid cannot be reused while the expiry runs: the process is alive
    then (the pidfd was not readable), and after :meth:`stop` the expiry never runs.

    Where ``pidfd_open`` is missing, the thread polls ``/proc/<pid>/stat`` every
    10 ms instead (a zombie counts as ended).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable

POLL_S = 0.01
"""The fallback's polling interval, where no pidfd can be opened."""
BACKSTOP_S = 30.0
"""How long past the limit the caller's own (event-loop) deadline may wait, as a backstop only: the clock
kills at the limit, and a loop stalled by other work must not cut a run's output short."""


class RunClock:
    """The wall clock of one process; see the module docstring."""

    def __init__(self, pid: int, timeout_s: float, on_expiry: Callable[[], None]) -> None:
        self.pid = pid
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self.ended: float | None = None
        self.expired = False
        self._on_expiry = on_expiry
        self._lock = threading.Lock()
        self._stopped = False
        self._done = threading.Event()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None  # no pidfd here, or the process is already gone: the fallback sees that at once
        self._thread = threading.Thread(target=self._watch, name=f"qb-runclock {pid}", daemon=True)
        self._thread.start()

    @property
    def elapsed_s(self) -> float:
        """From the spawn to the process's end (or to now, while it runs)."""
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def _exited(self, wait_s: float) -> bool:
        if self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            return bool(poller.poll(max(0, int(wait_s * 1000))))
        deadline = time.monotonic() + wait_s
        while True:
            if _gone(self.pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))

    def _watch(self) -> None:
        try:
            if not self._exited(self.timeout_s - (time.monotonic() - self.started)):
                with self._lock:
                    if not self._stopped:
                        self.expired = True
                        try:
                            self._on_expiry()
                        except Exception:  # noqa: BLE001 - a kill that fails leaves the loop's backstop
                            pass
                self._exited(3600.0)
            self.ended = time.monotonic()
        finally:
            self._done.set()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None

    def stop(self, wait_s: float = 5.0) -> bool:
        """Call once the process has been waited for: whether it ran past its limit. The expiry never
        runs after this returns."""
        self._done.wait(wait_s)
        with self._lock:
            self._stopped = True
        return self.expired


def start(pid: int, timeout_s: float, on_expiry: Callable[[], None]) -> RunClock:
    """Start timing the process ``pid`` (just spawned) against ``timeout_s``; see :class:`RunClock`."""
    return RunClock(pid, timeout_s, on_expiry)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(4096)
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")
