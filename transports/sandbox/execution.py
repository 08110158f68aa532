"""What a sandbox hands back from a run (``Execution``) and how it fails (``SandboxError``); apart from
:mod:`transports.sandbox.box` so that the sandbox's own module stays about building and running."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import exectrace
from .isolation import Isolation
from .limits import LimitHit
from .process import Stream


class SandboxError(RuntimeError):
    """The sandbox could not be built or its launcher could not start."""


class ArgumentTooLong(SandboxError):
    """The kernel refused the program text as one argument (E2BIG, over 128 KiB): nothing ran.

    Transports turn it into a transport error; only ``tempscript`` can carry such a program.
    """


Bind = Path | tuple[Path, str]


@dataclass
class Execution:
    """What one process run produced. The verdict is never derived from it."""

    exit_code: int | None
    stdout: Stream
    stderr: Stream
    timed_out: bool
    exec_ms: float
    isolation: Isolation
    limit_hit: LimitHit | None = None
    limits_applied: dict[str, str] | None = None
    trace: exectrace.Trace | None = None
    """The kernel's record of every program the run executed (the launcher's own left out)."""


def exit_code_of(code: int) -> int:
    """Shell convention: a death by signal n is 128+n."""
    return 128 - code if code < 0 else code
