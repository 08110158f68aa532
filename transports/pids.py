"""A process-count limit for sandboxed runs: one pids cgroup per sandbox.

RLIMIT_NPROC does nothing for uid 0, and campaigns often run as root (CI,
containers), so a fork bomb in a reply would otherwise have until the wall
clock to exhaust the host's process table. Where the cgroup-v1 ``pids``
hierarchy is writable, every sandbox gets its own group with ``pids.max`` and
the limit wrapper moves the run into it before exec'ing the command (so the
very first fork already counts). Where none is writable (not root, or cgroup v2
without delegation) there is no process-count limit: the wall clock and the
process-group kill still end a runaway, and ``available()`` says so.
"""

from __future__ import annotations

import atexit
import itertools
import os
import signal
import time
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/pids")

_parent: Path | None = None
_checked = False
_counter = itertools.count()


def available() -> Path | None:
    """This process's parent group (made on first use), or None where no pids cgroup can be made."""
    global _parent, _checked
    if _checked and (_parent is None or _parent.is_dir()):
        return _parent
    _checked, _parent = True, None
    if os.environ.get("QB_NO_PIDS_CGROUP") or not os.access(V1_ROOT / "cgroup.procs", os.W_OK):
        return None
    _sweep_stale()
    parent = V1_ROOT / f"quotebench-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    atexit.register(remove_group, parent)
    _parent = parent
    return parent


def new_group(max_pids: int) -> Path | None:
    """A fresh group allowing ``max_pids`` processes, or None (no limit available)."""
    parent = available()
    if parent is None:
        return None
    group = parent / f"sandbox-{next(_counter)}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(max_pids))
    except OSError:
        remove_group(group)
        return None
    return group


def child(group: Path | None) -> Path | None:
    """A subgroup for one run: the sandbox's pids.max still counts it, and it can be emptied alone
    (the ssh transport's local and remote runs share a sandbox and overlap in time)."""
    if group is None:
        return None
    sub = group / f"run-{next(_counter)}"
    try:
        sub.mkdir()
    except OSError:
        return None
    return sub


def kill_all(group: Path | None) -> None:
    """SIGKILL every process still in the group (a ``setsid`` escapes the process group, not the cgroup)."""
    if group is None:
        return
    try:
        members = (group / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in members:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


def remove_group(group: Path | None) -> None:
    """Remove a group and every subgroup left in it (a run group whose removal raced its last
    process), killing what is still inside; a group that will not go is left, never waited on long."""
    if group is None or not group.is_dir():
        return
    for child in group.iterdir():
        if child.is_dir():
            remove_group(child)
    kill_all(group)
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY while killed members are still being reaped
            time.sleep(0.002)


def _sweep_stale() -> None:
    """Groups left by processes that were killed before their atexit ran (their pid is gone)."""
    for old in V1_ROOT.glob("quotebench-*"):
        try:
            os.kill(int(old.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            remove_group(old)
        except (ValueError, PermissionError):
            pass
