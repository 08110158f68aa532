"""Userlands: which implementation of coreutils, sed, grep, find and friends a sandboxed command gets.

``gnu`` is the system's own (Debian: GNU coreutils, sed, grep, findutils). ``uutils``
puts the Rust coreutils (Debian ``rust-coreutils``: ``coreutils``, a multi-call program)
first in the same way; it has no sed, grep or find, so those stay GNU's. ``busybox``
puts a directory of symlinks to Debian's ``busybox``, one per applet, first on the
command's PATH (bound read-only at ``/run/qb-userland`` under bwrap), so ``sed``,
``grep``, ``find``, ``sort``, ``cat``, ``printf`` (the program; bash's builtin still wins
in bash) ... are busybox's. Shells are never replaced (``sh``, ``ash``, ``hush``:
the final shell is its own dimension), and git, jq, python3 and the task tools are
not busybox applets, so they keep working; the tools' own helpers (``dirname``,
``env -0``) work with busybox's applets too.

A command that names a program by absolute path (``/usr/bin/sed``) still gets
GNU's: the userland is what PATH lookup finds, which is what agents' commands use.
The directory is made once per process (``qb-userland-<pid>-*`` in the temp
directory, removed at exit, and swept like sandbox roots if the process dies).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .ownexit import at_exit

USERLANDS: tuple[str, ...] = ("gnu", "busybox", "uutils")
PROGRAMS = {"busybox": ("busybox", "busybox"), "uutils": ("coreutils", "rust-coreutils")}
"""userland -> (its multi-call program, the Debian package that installs it)."""
DEFAULT = "gnu"
MOUNT = "/run/qb-userland"
NEVER_REPLACED = frozenset({"sh", "ash", "hush", "bash", "[[", "busybox"})
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class UserlandError(ValueError):
    """An unknown userland, or one that is not installed; one line."""


def check(name: str) -> str:
    if name not in USERLANDS:
        raise UserlandError(f"unknown userland '{name}' (known: {', '.join(USERLANDS)})")
    return name


_dirs: dict[str, Path] = {}


def program_path(name: str) -> str:
    program, package = PROGRAMS[name]
    found = shutil.which(program, path=SYSTEM_PATH)
    if found is None:
        raise UserlandError(f"{name}: {program} is not installed (Debian: apt-get install {package})")
    return found


def busybox_path() -> str:
    return program_path("busybox")


def applets(program: str) -> list[str]:
    """The applets a multi-call program provides (busybox ``--list``; uutils' ``--help`` lists its
    "defined functions"), minus the shells."""
    if Path(program).name == "busybox":
        names = subprocess.run([program, "--list"], capture_output=True, text=True, timeout=10, check=True).stdout.split()
    else:
        text = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=10).stdout
        names = text.split("functions:", 1)[-1].replace(",", " ").split() if "functions:" in text else []
    return sorted(a for a in names if a and "/" not in a and a not in NEVER_REPLACED)


def directory(name: str) -> Path | None:
    """The host directory of the userland's programs (None for ``gnu``: nothing is put on PATH)."""
    check(name)
    if name == "gnu":
        return None
    if name not in _dirs:
        target = program_path(name)
        d = Path(tempfile.mkdtemp(prefix=f"qb-userland-{os.getpid()}-")).resolve()
        for applet in applets(target):
            os.symlink(target, d / applet)
        d.chmod(0o755)
        at_exit(shutil.rmtree, d, True)
        _dirs[name] = d
    return _dirs[name]


def version(name: str) -> str:
    """``busybox 1.35.0`` and the like, for records; ``gnu`` is the system's."""
    if name == "gnu":
        return "gnu"
    try:
        first = subprocess.run([program_path(name), "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError, UserlandError):
        return name
    words = first.split()
    return f"{name} {words[1].lstrip('v')}" if len(words) > 1 else name


_userland = [DEFAULT]


def set_default_userland(name: str) -> None:
    """The userland every later sandbox gets unless told otherwise (the CLI's ``--userland``); see
    :mod:`transports.sandbox.userland`. An unknown or missing one is :class:`~transports.sandbox.userland.UserlandError`."""
    directory(check(name))  # fails now, not on the first run
    _userland[0] = name


def default_userland() -> str:
    return _userland[0]
