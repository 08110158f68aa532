"""What a run's exec trace holds: the programs it executed and the forks between them, as the kernel held them
(:mod:`transports.sandbox.exectrace` fills it; transports read ``received`` from it). Data only, so the tracer,
its shell copy and every reader share one definition without importing each other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

Identity = tuple[int, int]


@dataclass(frozen=True)
class Exec:
    """One successful execve, as the kernel held it at the exec stop.

    ``seq`` orders every fork and exec event of the run; ``parent`` is the pid that
    forked ``pid`` (None for the launcher) and ``forked_at`` that fork's ``seq``.
    ``exe`` is the executed file's (st_dev, st_ino): for a script, its interpreter.
    ``env`` is None unless the program is watched (or the read failed: then
    ``env_complete`` is False)."""

    seq: int
    pid: int
    parent: int | None
    forked_at: int | None
    exe: Identity | None
    argv: tuple[bytes, ...]
    argv_complete: bool
    env: tuple[bytes, ...] | None = None
    env_complete: bool = True


@dataclass
class Trace:
    """Everything the tracer saw during one run."""

    execs: list[Exec] = field(default_factory=list)
    forks: dict[int, tuple[int, int]] = field(default_factory=dict)  # child pid -> (parent pid, seq)
    dropped: int = 0  # execs past MAX_EXECS, counted only
    reader: Exec | None = None  # the program whose terminal input is recorded (``Tracer(input_of=...)``)
    input: bytes = b""          # what it read from its standard input, in order (:mod:`transports.sandbox.shellcopy`)
    input_complete: bool = True
    shell_log: bytes = b""      # what it and its hooks wrote to its log descriptor (its own record), in order
    shell_log_complete: bool = True
    # who wrote each part of shell_log: (offset where a write's bytes start, True when by the shell's hook fork
    # (the first fork after a terminal read), False when by the shell itself), in order
    shell_log_writers: list[tuple[int, bool]] = field(default_factory=list)
    reader_status: int | None = None  # its wait status, if it ended during the run
    reader_exit_seq: int | None = None  # when it ended: the ``seq`` of the last fork or exec event before its exit
    exits: dict[int, int] = field(default_factory=dict)  # pid -> wait status, as the kernel reported it (harness runs' steps)


def identity(path: str) -> Identity | None:
    """The (st_dev, st_ino) a program file is known by; None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
