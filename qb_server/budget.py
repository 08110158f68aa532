"""The server's host budget: what all its sandboxes together may ask of the host at worst.

Why
    Every limit of :class:`transports.sandbox.Limits` is per sandbox: a root of at
    most ``disk`` bytes (a tmpfs, that is host memory, where the harness runs as
    root) and at most ``memory`` bytes per running command. A campaign holds one
    sandbox per worker, but a server holds one per session, and clients open
    sessions at will (up to ``MAX_SESSIONS``): 512 sessions of 1 GiB would promise
    the host 512 GiB it does not have, and a few hostile clients filling their
    tmpfs roots would take the host's memory, not just their own sandboxes'.

The rule
    ``open sandboxes x disk + running commands x memory <= budget``, the worst case
    counted whether or not a sandbox uses its share (a root that is a directory
    counts too: then it is host disk). A sandbox reserves ``disk`` for its whole life;
    a new one that does not fit is refused (:class:`SessionError`, one line saying
    which option to change), and sandboxes never take the last ``memory`` bytes, so
    one command can always run. A command reserves ``memory`` while it runs (times the
    runs one delivery holds at once: two on ssh, see :func:`runs_per_call`); one that
    does not fit waits for another to finish, at most ``wait_s``.

The default budget is half of the host's physical memory (``MemTotal``);
``--host-budget`` changes it. It must hold at least one sandbox and one run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from .keys import SessionError


def physical_memory() -> int:
    """The host's RAM in bytes (``MemTotal``), or 0 where it cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(1 << 16).splitlines():
                if line.startswith(b"MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


UNLIMITED = 1 << 62
"""The budget of an in-process server whose caller bounds its sessions itself (a campaign's workers)."""


def default_budget() -> int:
    return physical_memory() // 2 or 8 << 30


def runs_per_call(transport: object) -> int:
    """How many sandboxed runs one delivery may hold at once (an ssh delivery: the client's and the server's),
    through any middleware (``json-naive+ssh``): each has its own ``memory`` cap."""
    runs = 1
    while transport is not None:
        runs = max(runs, int(getattr(transport, "sandboxed_runs", 1)))
        transport = getattr(transport, "inner", None)
    return runs


def size_text(n: int) -> str:
    """A size as the options take it back (``1G``, ``512M``, ``1.5G``)."""
    if n >= 1 << 30:
        return f"{n / (1 << 30):.3g}G"
    return f"{n / (1 << 20):.3g}M"


class HostBudget:
    """Reservations against one budget; all methods run on the server's event loop (no threads)."""

    def __init__(self, total: int, *, disk: int, memory: int, wait_s: float, runs: int = 1) -> None:
        self.per_call = memory * runs
        """What one running command reserves: ``memory`` for each run a delivery holds at once."""
        self.memory_text = f"{size_text(memory)} (--memory)" if runs == 1 else \
            f"{size_text(self.per_call)} ({runs} runs x --memory)"
        if total < disk + self.per_call:
            raise ValueError(f"--host-budget {size_text(total)} cannot hold one sandbox ({size_text(disk)} of --disk) "
                             f"and one running command ({self.memory_text}); give a larger budget or smaller caps")
        self.total, self.disk, self.wait_s = total, disk, wait_s
        self.sandboxes = 0
        self.running = 0
        self._changed: anyio.Event | None = None  # made on the event loop by the first waiter

    @property
    def max_sandboxes(self) -> int:
        return (self.total - self.per_call) // self.disk

    def _used(self) -> int:
        return self.sandboxes * self.disk + self.running * self.per_call

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def fits_sandbox(self) -> bool:
        """Counted against sandboxes alone: a command running now is no reason to refuse a session."""
        return self.sandboxes < self.max_sandboxes

    def take_sandbox(self) -> None:
        """Reserve one sandbox's disk, or a one-line ``SessionError`` saying what to change."""
        if not self.fits_sandbox():
            raise SessionError(
                f"the server's host budget is full: {self.sandboxes} open sandboxes of {size_text(self.disk)} "
                f"(--disk) and {self.running} running commands of {self.memory_text} within "
                f"{size_text(self.total)} (--host-budget), none idle long enough to be reclaimed (--reclaim-idle); "
                f"end a session first, try again later, or restart the server with a larger --host-budget or "
                f"smaller caps")
        self.sandboxes += 1

    def give_sandbox(self) -> None:
        self.sandboxes = max(0, self.sandboxes - 1)
        self._signal()

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Hold one command's memory while it runs; wait (bounded) while the budget is full."""
        with anyio.move_on_after(self.wait_s) as scope:
            while self._used() + self.per_call > self.total:
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
        if scope.cancelled_caught:
            raise SessionError(f"the server's host budget ({size_text(self.total)}, --host-budget) stayed full of "
                               f"running commands for {self.wait_s:.0f} s; try again")
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._signal()
