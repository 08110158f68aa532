"""What a killed harness process left behind: sandbox roots, their tmpfs mounts, shim, ssh, userland and
bwrap-copy directories, and bind-mount points, named with the pid that made them. Removed once per process,
only for pids that no longer exist and only when owned by this user (or the uid commands ran as). (A launcher
needs no sweep: one the harness had not yet seized ends itself when the harness's end of its stdin closes,
see :data:`transports.sandbox.exectrace.GATE_PREFIX`.)
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from tasks.safefs import remove_tree

from . import diskcap, hostuid

LEFTOVER_PREFIXES = ("qb-sandbox-", "qb-shim-", "qb-ssh-", "qb-userland-", "qb-fixture-cache-", "qb-bwrap-")


def discard(root: Path, mounted: bool) -> None:
    """Remove a sandbox root: detach its tmpfs (the whole tree goes at once), else an iterative,
    link-safe removal that survives any depth (shutil.rmtree recursed and died past ~1000 levels)."""
    try:
        if mounted and diskcap.unmount(root):
            os.rmdir(root)
            return
    except OSError:
        pass
    remove_tree(root)


_swept = False


def sweep_leftovers() -> None:
    """Once per process: remove sandbox, shim and ssh directories that a killed harness process left in
    the temp directory. Only directories named with a pid that no longer exists, and owned by this user,
    are touched; a live process's directories never are."""
    global _swept
    if _swept:
        return
    _swept = True
    entries: list[os.DirEntry[str]] = []
    # /tmp too: the ssh endpoint's directory goes there when the temp directory is too deep for a socket path
    for tmp in dict.fromkeys((os.path.realpath(tempfile.gettempdir()), "/tmp")):
        try:
            entries += os.scandir(tmp)
        except OSError:
            continue
    for entry in entries:
        if entry.name.startswith("qb-binds-") and _dead(entry.name[len("qb-binds-"):].split("-", 1)[0]):
            try:  # only a real directory of ours: a link planted there would make root unmount what it names
                ours = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
            except OSError:
                ours = False
            if ours:
                hostuid.release_binds(Path(entry.path))  # mount points one by one, never a recursive removal
            continue
        prefix = next((p for p in LEFTOVER_PREFIXES if entry.name.startswith(p)), None)
        if prefix is None:
            continue
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            # a sandbox root belongs to the uid its commands ran as (65534 when root was dropped)
            owners = {os.geteuid()} | ({hostuid.DROP_UID} if os.geteuid() == 0 and prefix == "qb-sandbox-" else set())
            if entry.stat(follow_symlinks=False).st_uid not in owners or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(pid_text), 0)
            continue  # alive (or reused by another process): not ours to judge
        except ProcessLookupError:
            pass
        except OSError:
            continue
        path = Path(entry.path)
        discard(path, os.path.ismount(path))
    _sweep_mounts()


def _dead(pid_text: str) -> bool:
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _sweep_mounts() -> None:
    """Sandbox tmpfs roots of dead harness processes wherever they were made (a TMPDIR elsewhere): the
    mount table names them, so none is missed by looking in one directory only."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            lines = fh.read(1 << 22).splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(b" ")
        if len(fields) < 5:
            continue
        point = fields[4].decode("utf-8", "surrogateescape")
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point)
        name = os.path.basename(point)
        if name.startswith("qb-sandbox-") and _dead(name[len("qb-sandbox-"):].split("-", 1)[0]):
            discard(Path(point), True)
