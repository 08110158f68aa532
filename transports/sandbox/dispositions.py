"""The signal dispositions a run starts with: the defaults, whatever this process was started with.

Why
    An ignored signal stays ignored across ``fork`` and ``exec``, and a shell cannot undo it (POSIX: a signal
    ignored on entry to a non-interactive shell cannot be trapped or reset). A harness started with
    ``SIGINT`` ignored (a script's background job, ``nohup``, a test runner's worker process) would hand that
    on to every command it runs: ``kill -INT`` of a command's own job would do nothing, and the record would
    depend on how the harness was started. A signal *caught* by a handler, by contrast, is reset to its
    default at ``exec``. So each signal this process ignores is caught instead, by a handler that does
    nothing: this process still ignores it, and the programs a run executes start with the default.
    (``SIGPIPE`` and ``SIGXFSZ``, which Python ignores itself, are restored by :mod:`subprocess`.)

When
    Once, from the main thread (only it may set a handler), at the import of the sandbox's spawn
    (:mod:`transports.sandbox.exectrace`); a process that imports it elsewhere first keeps what it has.
"""

from __future__ import annotations

import signal
import threading

SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM")
"""Not the job-control signals: a background harness that catches ``SIGTTOU`` instead of ignoring it would have
its own terminal writes interrupted."""


def _nothing(signum: int, frame: object) -> None:
    """Caught, not acted on: what ``SIG_IGN`` does here, without being inherited by what a run executes."""


def catch_ignored() -> list[str]:
    """Replace ``SIG_IGN`` by a handler that does nothing, for each of ``SIGNALS``; the names changed."""
    if threading.current_thread() is not threading.main_thread():
        return []
    changed = []
    for name in SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _nothing)
            changed.append(name)
    return changed
