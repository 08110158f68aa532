"""Forks and the executables this process writes, kept apart.

Why
    A process forked by one thread holds a copy of every descriptor the process had open at that instant
    until it execs (or closes them). If another thread was writing an executable then (a fixture's
    ``cexec``), the file stays open for writing in the child for that while, and a command that execs it
    gets ``ETXTBSY`` ("Text file busy"): a record that fails for the harness's own race, judged as the
    command's failure. Measured here: a script written and executed at once while three threads spawned
    ``true`` failed 789 times in 13,303. So the spawns a run makes (its launcher, the fixtures' and the
    validators' git, the ssh master, dequote's bash) hold the shared side of one lock, and writing an
    executable holds the exclusive side: no fork made under the lock happens while an executable is open for
    writing, so none carries it. Setup probes that run once per process (isolation, the uid drop, installs)
    do not take it.

Lifecycle and errors
    Both sides are context managers that raise nothing of their own; one interrupted while it waits (an
    exception from a signal handler) gives its place back before the exception goes on. A writer waits for
    the spawns under way (each lasts until its child has exec'd) and new spawns wait for a waiting writer, so
    writes are never starved. A forked child gets a fresh lock: a thread of its parent may have held it at
    the fork. :func:`new_locks_in_child` does the same for other modules' locks.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class _Lock:
    """Many spawns at once, or one write."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.spawns = 0
        self.writing = False
        self.writers_waiting = 0


_lock = _Lock()


@contextmanager
def spawning() -> Iterator[None]:
    """Hold while starting a process (``subprocess.Popen`` returns once its child has exec'd)."""
    lock = _lock
    with lock.cond:
        while lock.writing or lock.writers_waiting:
            lock.cond.wait()
        lock.spawns += 1
    try:
        yield
    finally:
        with lock.cond:
            lock.spawns -= 1
            if lock.spawns == 0:
                lock.cond.notify_all()


@contextmanager
def writing_executable() -> Iterator[None]:
    """Hold while a file that will be executed is open for writing in this process."""
    lock = _lock
    with lock.cond:
        lock.writers_waiting += 1
        try:  # interrupted while waiting (SIGTERM's SystemExit, ^C): spawns must not wait for it forever
            while lock.writing or lock.spawns:
                lock.cond.wait()
        finally:
            lock.writers_waiting -= 1
            lock.cond.notify_all()
        lock.writing = True
    try:
        yield
    finally:
        with lock.cond:
            lock.writing = False
            lock.cond.notify_all()


def popen(argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **options)`` under :func:`spawning`: it returns once the child has exec'd."""
    with spawning():
        return subprocess.Popen(argv, **options)


def write_executable(path: Path, data: bytes | str, mode: int = 0o755) -> None:
    """Write ``data`` to ``path`` under :func:`writing_executable`, then give it ``mode``."""
    with writing_executable():
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_bytes(data)
    os.chmod(path, mode)


def run(argv: list[str], *, input: bytes | None = None, check: bool = False, timeout: float | None = None,
        **options: Any) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run(argv, capture_output=True)``, holding :func:`spawning` only while the child starts, not
    while it runs: a writer waits for a fork, never for a command's whole run. Without ``input`` the child's
    stdin is ``/dev/null``, never this process's."""
    proc = popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def new_locks_in_child(namespace: dict[str, Any], *names: str) -> None:
    """A forked child gets new locks for the module-level ``names`` of ``namespace`` (the module's ``globals()``):
    a thread of the parent may hold one at the fork, and that thread is not in the child to release it."""
    os.register_at_fork(after_in_child=lambda: namespace.update({name: threading.Lock() for name in names}))


def _forked() -> None:
    global _lock
    _lock = _Lock()


os.register_at_fork(after_in_child=_forked)
