"""Where a record's time goes: optional marks at the boundaries of a run's phases (``quotebench bench --phases``).

Why a context variable
    The phases of one record are spread over the event loop, worker threads (the sandbox's build, the
    verdict) and the run's tracer thread. A recorder set in a :class:`contextvars.ContextVar` reaches the
    loop and the worker threads (anyio copies the context into them); the tracer thread, a plain thread,
    is handed the recorder its creator saw. When nothing is being profiled, a mark is one context-variable
    read and a ``None`` test: no clock is read, nothing is kept, nothing is printed.

What a mark means
    ``mark(name)`` ends the phase called ``name``: its duration is the time since the previous mark of the
    same recorder (or since :func:`recording` began). Marks from the tracer thread carry their own clock
    reading, taken where the event happened, and are put in order of time when the recorder is read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Phases:
    """The marks of one record, as (name, ``time.perf_counter_ns()``) pairs."""

    def __init__(self) -> None:
        self.start = time.perf_counter_ns()
        self.marks: list[tuple[str, int]] = []

    def mark(self, name: str, at_ns: int | None = None) -> None:
        self.marks.append((name, time.perf_counter_ns() if at_ns is None else at_ns))

    def durations_ms(self) -> dict[str, float]:
        """Each phase's duration in ms, in the order of time (a name marked twice adds up)."""
        out: dict[str, float] = {}
        last = self.start
        for name, at in sorted(self.marks, key=lambda m: m[1]):
            out[name] = out.get(name, 0.0) + (at - last) / 1e6
            last = at
        return out


_current: ContextVar[Phases | None] = ContextVar("qb_phases", default=None)


def current() -> Phases | None:
    """The recorder of the record being made, or None (the usual case: nothing is profiled)."""
    return _current.get()


def mark(name: str) -> None:
    """End the phase ``name`` of the record being profiled, if one is."""
    rec = _current.get()
    if rec is not None:
        rec.mark(name)


@contextmanager
def recording() -> Iterator[Phases]:
    """Profile what runs in this block (and in the threads it starts through anyio)."""
    rec = Phases()
    token = _current.set(rec)
    try:
        yield rec
    finally:
        _current.reset(token)
