"""Exit handlers that run only in the process that registered them, and locks a forked child gets new.

A process forked from the harness (a test's ``os.fork``, a user's own) inherits the harness's ``atexit``
table, and a normal exit runs it: the child would then remove the cgroups, binds, directories and
connections its parent is still using (a sandbox built ahead would lose its cgroups and launcher). Every
handler that releases something of this process is registered here, bound to the registering pid.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from typing import Any


def at_exit(handler: Callable[..., Any], *args: Any) -> None:
    """``atexit.register(handler, *args)``, but a forked child that exits runs nothing of it."""
    owner = os.getpid()

    def run() -> None:
        if os.getpid() == owner:
            handler(*args)

    atexit.register(run)


def new_locks_in_child(namespace: dict[str, Any], *names: str) -> None:
    """A forked child gets new locks for the module-level ``names`` of ``namespace`` (the module's ``globals()``):
    a thread of the parent may hold one at the fork, and that thread is not in the child to release it."""
    os.register_at_fork(after_in_child=lambda: namespace.update({name: threading.Lock() for name in names}))
