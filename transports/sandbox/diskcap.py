"""A disk cap for a sandbox: its private root is a size-limited tmpfs.

Why a tmpfs
    Without it one command wrote 2.4 GB to the host disk in 0.1 s: RLIMIT_FSIZE caps
    each file, not their number. A tmpfs of ``size`` bytes mounted on the sandbox's
    private root caps everything the command can write there (``ENOSPC`` past it),
    and unmounting it drops the whole tree at once, however deep or hostile. Its
    pages are charged to the writing run's memory cgroup, so a tmpfs file also
    counts against the memory limit.

Who can
    Mounting needs root (CAP_SYS_ADMIN). Elsewhere, or with ``QB_NO_DISK_CAP=1``,
    the sandbox stays a plain directory and only RLIMIT_FSIZE applies: records
    then say ``disk: "file-size only"``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

MS_NOSUID = 2
MS_NODEV = 4
MNT_DETACH = 2

_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError:
            return None
    return _libc


def possible() -> bool:
    return os.geteuid() == 0 and not os.environ.get("QB_NO_DISK_CAP") and libc() is not None


def mount(path: Path, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes (mode 0700) on the empty directory ``path``; False if it cannot."""
    lib = libc()
    if lib is None or not possible():
        return False
    opts = f"size={max(size, 1 << 20)},mode=0700,nr_inodes={max(1024, size // 4096)}".encode()
    return lib.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0


def unmount(path: Path) -> bool:
    """Detach the tmpfs at ``path`` (its contents go with it); never raises."""
    lib = libc()
    if lib is None:
        return False
    return lib.umount2(os.fsencode(path), MNT_DETACH) == 0


def full(path: Path, slack: int = 64 * 1024) -> bool:
    """Whether the tmpfs at ``path`` has (almost) no room left, or no inodes."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < slack or (st.f_files > 0 and st.f_favail < 8)
