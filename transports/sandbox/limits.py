"""What a sandbox may use: ``Limits`` and the process-wide defaults that ``--memory``/``--disk`` (and
``QB_MEMORY``/``QB_DISK``) change. What each limit means and how it is enforced: :mod:`transports.sandbox.box`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """``"512M"``, ``"1G"``, ``"1048576"`` -> bytes (binary units; a trailing ``B``/``iB`` is allowed).
    ValueError with one line naming ``what`` otherwise."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _SIZE_UNITS else ""
    number = t[: len(t) - len(unit)]
    try:
        value = float(number) * _SIZE_UNITS[unit]
    except ValueError:
        raise ValueError(f"{what}: '{text}' is not a size (examples: 512M, 1G, 1048576)") from None
    if value < 1 << 20:
        raise ValueError(f"{what}: '{text}' is below the minimum of 1M")
    return int(value)


_defaults = {"memory": 1 << 30, "disk": 1 << 30}


def set_default_limits(*, memory: int | None = None, disk: int | None = None) -> None:
    """Change the memory and disk caps every later ``Limits()`` gets (the CLI's ``--memory``/``--disk``,
    and the ``QB_MEMORY``/``QB_DISK`` environment variables read at import)."""
    if memory is not None:
        _defaults["memory"] = memory
    if disk is not None:
        _defaults["disk"] = disk


for _var, _key in (("QB_MEMORY", "memory"), ("QB_DISK", "disk")):
    if os.environ.get(_var):
        try:
            _defaults[_key] = parse_size(os.environ[_var], _var)
        except ValueError as _e:
            print(f"quotebench: {_e}; using the default", file=sys.stderr)


@dataclass(frozen=True)
class Limits:
    """Per-sandbox limits; see the module docstring. ``memory`` and ``disk`` default to the process-wide
    defaults (1 GiB each unless changed by :func:`set_default_limits`)."""

    timeout_s: float = 10.0
    output_cap: int = 64 * 1024
    drain_cap: int = 8 * 1024 * 1024
    tmp_size: int = 256 * 1024 * 1024
    file_size: int = 64 * 1024 * 1024
    open_files: int = 1024
    processes: int = 256
    memory: int = field(default_factory=lambda: _defaults["memory"])
    disk: int = field(default_factory=lambda: _defaults["disk"])


LimitHit = Literal["time", "output", "memory", "processes", "disk", "file-size"]




def which_limit(*, timed_out: bool, drained: bool, oom: bool, rlimit_memory: bool, stderr: str, refused: bool,
                disk_full: Callable[[], bool], file_size: bool) -> LimitHit | None:
    """The limit a finished run hit, from what the kernel and the host saw: the first that applies, in this
    order. ``refused``: the run's process count refused a fork; ``rlimit_memory``: only an address-space
    rlimit held the memory (no memory cgroup), so an allocation failure shows only in what the program says;
    ``file_size``: the kernel reported a process of the run killed by SIGXFSZ (never an exit status or words
    the command can choose: ``exit 153`` is not a file-size limit)."""
    if timed_out:
        return "time"
    if drained:
        return "output"
    if oom or (rlimit_memory and any(w in stderr for w in _OOM_WORDS)):
        return "memory"
    if refused:
        return "processes"
    if disk_full():
        return "disk"
    if file_size:
        return "file-size"
    return None


_OOM_WORDS = ("Cannot allocate memory", "out of memory", "MemoryError", "std::bad_alloc")
"""What programs say when an allocation fails under an address-space rlimit (they are not killed): a best
effort, used only where no memory cgroup can be made."""
