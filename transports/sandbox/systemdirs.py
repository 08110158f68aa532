"""The host's system directories as every sandbox sees them: read-only binds of /usr, /etc, /lib... (merged-/usr
symlinks stay symlinks), and the probe that asks whether bwrap can build a sandbox here.

Why only these, never ``/`` itself: a recursive bind of the host's root takes in every mount below it,
other sandboxes' roots among them, and remounts each one read-only; one that is unmounted meanwhile fails
the whole bind (``remount "/newroot/tmp/qb-sandbox-...": No such file or directory``). A probe that failed so
would decide, for the whole process, that bwrap cannot work or that root cannot be dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

_system: list[list[str]] = []


def system_binds() -> list[str]:
    """bwrap's arguments for the system directories. The host's layout, read once per process (eight lstats
    and readlinks were a third of building every run's launcher)."""
    if not _system:
        _system.append(_read_system_binds())
    return list(_system[0])


def _read_system_binds() -> list[str]:
    args: list[str] = []
    for top in ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    return args


def probe_argv(bwrap: str) -> list[str]:
    """bwrap with the namespaces and the system every run has, up to its command. ``--as-pid-1``: the probe's
    program is the namespace's init, so no init of bwrap's is left behind for a harness that is a child
    subreaper (a container's pid 1) to collect as a zombie."""
    return [bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--cap-drop", "ALL", *system_binds(),
            "--proc", "/proc", "--dev", "/dev", "--"]
