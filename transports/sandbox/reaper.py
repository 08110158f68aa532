"""Cleanup off the hot path: detaching a sandbox's tmpfs and removing cgroups take milliseconds of
waiting in the kernel (an RCU grace period per unmount), not work; a record is complete before them.

One daemon thread takes the jobs in order. Bounded: past ``MAX_PENDING`` queued jobs a caller does its
own cleanup inline, so a fast producer cannot pile up mounts. At interpreter exit the queue is drained
(for at most ``DRAIN_S`` seconds); whatever a killed process leaves is swept by the next one
(:func:`transports.sandbox.sweep_leftovers`). Jobs must never raise; an exception is swallowed.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable

MAX_PENDING = 64
DRAIN_S = 20.0

_jobs: "queue.Queue[Callable[[], None] | None]" = queue.Queue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _work() -> None:
    while True:
        job = _jobs.get()
        try:
            if job is not None:
                job()
        except Exception:  # noqa: BLE001 - cleanup never takes the harness down
            pass
        finally:
            _jobs.task_done()


def later(job: Callable[[], None]) -> None:
    """Run ``job`` on the cleanup thread soon (inline when too many are waiting)."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="qb-reaper", daemon=True)
            _thread.start()
        inline = _jobs.qsize() >= MAX_PENDING
    if inline:
        try:
            job()
        except Exception:  # noqa: BLE001
            pass
        return
    _jobs.put(job)


def drain(timeout_s: float = DRAIN_S) -> bool:
    """Wait until every queued job ran (at most ``timeout_s``); True when the queue is empty."""
    if _thread is None:
        return True
    done = threading.Event()

    def wait() -> None:
        _jobs.join()
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done.wait(timeout_s)


def _forked() -> None:
    """In a forked child: the parent's queued cleanups stay the parent's (run here, they would unmount and
    remove its sandboxes), and the queue's lock and count, copied mid-use from a thread that is not here,
    would hang the child's first cleanup or its exit."""
    global _jobs, _thread, _lock
    _jobs, _thread, _lock = queue.Queue(), None, threading.Lock()


os.register_at_fork(after_in_child=_forked)
atexit.register(drain)
