"""Exit handlers that run only in the process that registered them.

A process forked from the harness (a test's ``os.fork``, a user's own) inherits the harness's ``atexit``
table, and a normal exit runs it: the child would then remove the cgroups, binds, directories and
connections its parent is still using (a sandbox built ahead would lose its cgroups and launcher). Every
handler that releases something of this process is registered here, bound to the registering pid.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from typing import Any


def at_exit(handler: Callable[..., Any], *args: Any) -> None:
    """``atexit.register(handler, *args)``, but a forked child that exits runs nothing of it."""
    owner = os.getpid()

    def run() -> None:
        if os.getpid() == owner:
            handler(*args)

    atexit.register(run)

