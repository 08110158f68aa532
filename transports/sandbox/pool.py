"""Sandboxes built ahead: the private root, its tmpfs, its cgroups and its first launcher, ready before a
record asks for them (:func:`take`), built on a thread of their own while the previous record runs.

What is shared
    Nothing a run can write. Each sandbox is built fresh, exactly as :meth:`Sandbox.create` builds one, and
    used for one record, then closed as every sandbox is; only the fixture is written when it is taken (the
    root is empty until then, and nothing of a command has run in it). Its launchers
    (:mod:`transports.sandbox.ahead`) are the ones its first runs would start, started early (one per
    :class:`~transports.sandbox.ahead.Launch` its transport names); a run that would start another starts its
    own.

Lifecycle
    A sandbox is built for a key (the transport's name, the limits, the userland, the
    isolation): :func:`take` hands out one built for that key, if there is one, and asks the builder thread
    for the next, so a campaign's records find theirs ready. A transport none of whose runs could take a
    launcher started ahead (a host-written file of its own) gets sandboxes without one from then on (it would
    only cost a start and a kill).

Limits
    At most ``DEPTH`` idle sandboxes per key and ``MAX_IDLE`` in all (the oldest is closed first); each holds
    an empty tmpfs and, under bwrap, three waiting processes (bwrap's monitor and init, the gate). At exit,
    and after a fork in the child, none is used: the idle ones are closed at exit (:mod:`atexit`), and what a
    killed process leaves is swept by the next one, as for every sandbox (:mod:`transports.sandbox.leftovers`).
    ``QB_NO_POOL=1`` turns the pool off: every record builds its sandbox and starts its launcher itself.

Errors
    A sandbox that cannot be built ahead is not built (the record builds its own and gets the error, if it
    recurs); filling a taken sandbox with its fixture raises ``SandboxError``, as :meth:`Sandbox.create` does.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

from tasks.fixture import materialize
from tasks.schema import Task

from . import hostuid
from .ahead import PLAIN, Ahead, Launch
from .box import Sandbox
from .execution import SandboxError
from .isolation import isolation_available
from .limits import Limits
from .phases import mark
from .userland import default_userland

DEPTH = 1
MAX_IDLE = 16
EXIT_WAIT_S = 10.0

_lock = threading.Lock()
_idle: "OrderedDict[Hashable, list[Sandbox]]" = OrderedDict()
_pending: dict[Hashable, int] = {}
_no_ahead: set[str] = set()
Launches = Callable[[Sandbox], Sequence[Launch]]
"""A transport's launchers for a sandbox's first runs (:class:`~transports.sandbox.ahead.Launch`)."""
_jobs: "queue.Queue[tuple[Hashable, str, Limits, Launches | None, int]]" = queue.Queue()
_asked = 0  # builds asked for, in order; the builder finishes them in that order
_built = 0  # the last of them finished (built, or given up)
_thread: threading.Thread | None = None
_closing = False


def enabled() -> bool:
    """Only under bwrap: without it the sandbox built ahead lies on the host's /tmp, owned by the uid a command
    runs as while it is built, and the command could plant files in the next record's root."""
    return os.environ.get("QB_NO_POOL") != "1" and isolation_available() == "bwrap"


def _key(transport: str, limits: Limits) -> Hashable:
    return (transport, limits, default_userland(), isolation_available())


def take(task: Task, limits: Limits | None, transport: str, launches: Launches | None = None) -> Sandbox | None:
    """A sandbox built ahead for ``transport`` and ``limits``, filled with ``task``'s fixture, or None (build one
    now); either way the next one is asked for, its launchers started for ``launches(box)`` (default: one
    plain run). Blocking: call it from a worker thread."""
    if not enabled():
        return None
    lim = limits or Limits()
    key = _key(transport, lim)
    with _lock:
        boxes = _idle.get(key)
        box = boxes.pop(0) if boxes else None
        if box is not None and not boxes:
            del _idle[key]
    _ask(key, transport, lim, launches)
    if box is None:
        return None
    try:
        materialize(task.fixture, box.workdir)
        if (uid := hostuid.sandbox_uid()) is not None:
            hostuid.give(box.root, uid)
    except OSError as e:
        box.close()
        raise SandboxError(f"cannot build the sandbox: {e}") from e
    mark("create: a sandbox built ahead taken, its fixture, chown")
    return box


def idle(transport: str, limits: Limits | None = None) -> int:
    """How many sandboxes built ahead wait for ``transport``'s records (with ``limits``) in this process."""
    with _lock:
        return len(_idle.get(_key(transport, limits or Limits()), ()))


def ran(box: Sandbox, transport: str, held: Sequence[Ahead]) -> None:
    """After a record's runs in ``box``, which held the launchers ``held`` before them: a transport none of whose
    runs could take one (each wanted another launcher) gets none started ahead from then on. A run that
    took one but passed it by for its own reasons (an argument file too long) changes nothing."""
    left = {id(w) for w in box.waiting}
    if held and box.waiting.passed_by and all(id(w) in left for w in held):
        _no_ahead.add(transport)


def _ask(key: Hashable, transport: str, limits: Limits, launches: Launches | None) -> None:
    global _thread, _asked
    with _lock:
        if len(_idle.get(key, ())) + _pending.get(key, 0) >= DEPTH:
            return
        _pending[key] = _pending.get(key, 0) + 1
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_build, args=(_jobs,), name="qb-pool", daemon=True)
            _thread.start()
        _asked += 1
        _jobs.put((key, transport, limits, launches, _asked))


def _build(jobs: "queue.Queue[tuple[Hashable, str, Limits, Launches | None, int]]") -> None:
    global _built
    while True:
        key, transport, limits, launches, number = jobs.get()
        box: Sandbox | None = None
        try:
            if not _closing:
                box = Sandbox.create(None, limits, userland=key[2])  # type: ignore[index]
                if transport not in _no_ahead:
                    box.start_ahead(launches(box) if launches is not None else PLAIN)
        except Exception:  # noqa: BLE001 - a sandbox not built ahead is built by its record
            if box is not None:
                box.close()
            box = None
        old: list[Sandbox] = []
        with _lock:
            _built = number
            _pending[key] = max(0, _pending.get(key, 1) - 1)
            if box is not None and _closing:
                old.append(box)
            elif box is not None:
                _idle.setdefault(key, []).append(box)
                _idle.move_to_end(key)
                while sum(len(v) for v in _idle.values()) > MAX_IDLE:
                    first = next(iter(_idle))
                    old.append(_idle[first].pop(0))
                    if not _idle[first]:
                        del _idle[first]
        for b in old:
            b.close(wait=not _closing)  # at exit the cleanup thread may be gone already


def drain(timeout_s: float = EXIT_WAIT_S) -> None:
    """Close every idle sandbox of this process, after the ones being built (for at most ``timeout_s``), so
    that what is left running is only what records hold; the pool builds again at the next :func:`take`."""
    deadline = time.monotonic() + timeout_s
    with _lock:
        last = _asked  # builds asked for later (a campaign still taking) are not waited for
    while _built < last and time.monotonic() < deadline:
        time.sleep(0.01)
    with _lock:
        boxes = [b for v in _idle.values() for b in v]
        _idle.clear()
    for b in boxes:
        b.close()


def close_idle() -> None:
    """At exit: nothing is built from now on, and what is idle is closed (:func:`drain`)."""
    global _closing
    with _lock:
        _closing = True
    drain()


def _forked() -> None:
    """In a forked child: the parent's sandboxes, jobs and builder are not its own (closing one would kill the
    parent's launcher), and its lock may have been held by the parent's builder at the fork."""
    global _lock, _jobs, _thread, _asked, _built
    _lock, _jobs, _thread, _asked, _built = threading.Lock(), queue.Queue(), None, 0, 0
    _idle.clear()
    _pending.clear()


os.register_at_fork(after_in_child=_forked)
atexit.register(close_idle)
