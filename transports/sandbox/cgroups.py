"""Control groups for sandboxed runs: a process-count limit and a memory limit.

Why cgroups
    RLIMIT_NPROC does nothing for uid 0, and campaigns often run as root (CI, containers), so a fork bomb would
    otherwise have until the wall clock to exhaust the host's process table; and an rlimit on address space
    breaks programs that reserve much and use little. A memory cgroup counts what a run really uses, the pages
    of its tmpfs files included, and its OOM killer ends only that run.

Layout
    ``<root>/quotebench-<pid>/sandbox-<n>/run-<m>``: a parent per harness process, a group per sandbox holding
    both limits for everything the sandbox runs, all runs together (``pids.max`` and the memory limit: the
    ``ssh`` transport's local run and the embedded server's runs for it, and any runs a reply starts at once,
    share one cap; a cap per run would let three concurrent remote runs of one sandbox hold three times it), and a
    group per run under it, without limits of its own: what is killed and emptied when that run ends, and where
    its OOM kills are counted. The limit wrapper writes its own pid into the run group's ``cgroup.procs`` before
    it execs bwrap, so the very first fork already counts.

Refused forks
    cgroup v1 counts a fork refused at a sandbox's ``pids.max`` in the ``pids.events`` of the *forking task's*
    group, a run group, not in the sandbox's (reading the sandbox's alone would say ``limit_hit: null``). A run's
    record reads its own run group (:func:`refused_in_run`), so a concurrent run of the same sandbox whose forks
    are refused never marks it. Where that count is not per run (cgroup v2, or a run that could not get a group
    of its own), :func:`pid_limit_hits` counts the sandbox's whole subtree before and after the run, run groups
    already removed included (their count is kept when they go).

Machines differ (``mechanisms()`` says what applied, and records carry it)
    * cgroup v1 with writable ``pids`` and ``memory`` hierarchies (this machine): ``cgroup-v1``;
    * a pure cgroup v2 host where this process may create groups under the root with the ``pids`` and
      ``memory`` controllers enabled: ``cgroup-v2``;
    * otherwise, or with ``QB_NO_CGROUP=1``: processes ``none`` (the wall clock and the process-group kill
      still end a runaway) and memory ``rlimit-as`` (an address-space limit set by the limit wrapper,
      ``ulimit -v``).
    A process killed before its atexit leaves its groups behind; the next harness process removes the groups
    of processes that no longer exist, and only those. A forked child probes a parent group of its own: in its
    parent's, under the names the parent makes next (the counter is copied), it would kill the parent's runs.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .ownexit import at_exit

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory")


@dataclass(frozen=True)
class Group:
    """One group per controller: two directories on cgroup v1, one directory for both on v2."""

    dirs: dict[str, Path]

    def unique(self) -> list[Path]:
        return list(dict.fromkeys(self.dirs.values()))

    def joined(self) -> str:
        """The limit wrapper's argument: the group directories, space-separated (no spaces in them)."""
        return " ".join(str(d) for d in self.unique())

    def exists(self) -> bool:
        return any(d.is_dir() for d in self.unique())

    def __truediv__(self, name: str) -> Path:
        """A control file, from the controller its name starts with (``group / "pids.peak"``)."""
        return self.dirs.get(name.split(".", 1)[0], self.unique()[0]) / name


class _State:
    checked = False
    version: str | None = None          # "cgroup-v1" | "cgroup-v2" | None
    parents: dict[str, Path] = {}


_counter = itertools.count()


def _writable(path: Path) -> bool:
    return os.access(path / "cgroup.procs", os.W_OK)


def _probe() -> tuple[str | None, dict[str, Path]]:
    """The cgroup version this process can use and its own parent group per controller (made here)."""
    if os.environ.get("QB_NO_CGROUP"):
        return None, {}
    pid = os.getpid()
    v1 = {c: CGROUP_ROOT / c for c in CONTROLLERS if _writable(CGROUP_ROOT / c)}
    if v1:
        parents: dict[str, Path] = {}
        for c, root in v1.items():
            _sweep_stale(root)
            try:
                (root / f"quotebench-{pid}").mkdir(exist_ok=True)
            except OSError:
                continue
            parents[c] = root / f"quotebench-{pid}"
            at_exit(_remove_dir, parents[c])
            if c == "memory":  # children inherit it: a run's pages count against its sandbox's limit
                _try_write(parents[c] / "memory.use_hierarchy", "1")
        return ("cgroup-v1" if parents else None), parents
    if (CGROUP_ROOT / "cgroup.controllers").is_file() and _writable(CGROUP_ROOT):
        try:
            available = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
            if not all(c in available for c in CONTROLLERS):
                return None, {}
            (CGROUP_ROOT / "cgroup.subtree_control").write_text("+pids +memory")
            _sweep_stale(CGROUP_ROOT)
            parent = CGROUP_ROOT / f"quotebench-{pid}"
            parent.mkdir(exist_ok=True)
            (parent / "cgroup.subtree_control").write_text("+pids +memory")
        except OSError:
            return None, {}
        at_exit(_remove_dir, parent)
        return "cgroup-v2", {c: parent for c in CONTROLLERS}
    return None, {}


_detect_lock = threading.Lock()


def _parents() -> dict[str, Path]:
    """Probed once, under a lock: sandboxes made at once in worker threads must all see the parents, never a
    half-made table (a sandbox that saw none would run without a process cap)."""
    if not _State.checked or any(not p.is_dir() for p in _State.parents.values()):
        with _detect_lock:
            if not _State.checked or any(not p.is_dir() for p in _State.parents.values()):
                _State.version, _State.parents = _probe()
                _State.checked = True
    return _State.parents


def mechanisms() -> dict[str, str]:
    """How the process and memory limits are applied on this machine (see the module docstring)."""
    parents, version = _parents(), _State.version or "none"
    return {"processes": version if "pids" in parents else "none",
            "memory": version if "memory" in parents else "rlimit-as"}


def available() -> Group | None:
    """This process's parent groups, or None where no cgroup can be made."""
    parents = _parents()
    return Group(dict(parents)) if parents else None


def new_group(max_pids: int, memory: int | None = None) -> Group | None:
    """A sandbox's group, allowing ``max_pids`` processes and, given ``memory``, that many bytes (swap
    included) for all its runs together; None when there is no cgroup at all."""
    parents = _parents()
    if not parents:
        return None
    name = f"sandbox-{next(_counter)}"
    group = Group(dirs := {c: p / name for c, p in parents.items()})
    try:
        for d in group.unique():
            d.mkdir()
            if _State.version == "cgroup-v2":
                (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in dirs))
        if "pids" in dirs:
            (dirs["pids"] / "pids.max").write_text(str(max_pids))
        if memory is not None:
            _limit_memory(group, memory)
    except OSError:
        remove(group)
        return None
    return group


def _limit_memory(group: Group, memory: int) -> None:
    """The memory limit of a sandbox's group (once: every later run of the sandbox shares it)."""
    mem = group.dirs.get("memory")
    if mem is None or mem in _memory_limited:
        return
    if _State.version == "cgroup-v2":
        (mem / "memory.max").write_text(str(memory))
        _try_write(mem / "memory.swap.max", "0")
    else:
        (mem / "memory.limit_in_bytes").write_text(str(memory))
        _try_write(mem / "memory.memsw.limit_in_bytes", str(memory))
    _memory_limited.add(mem)


_memory_limited: set[Path] = set()
"""Sandbox memory groups whose limit is set (a set, not a file read per run)."""


def child(group: Group | None, memory: int | None = None) -> Group | None:
    """A run's group under the sandbox's ``group``, with no limit of its own: the sandbox's limits hold
    every run at once. ``memory``: the sandbox's memory limit, set on ``group`` if :func:`new_group` was
    not given it (the first run sets it; later ones share it)."""
    if group is None:
        return None
    name = f"run-{next(_counter)}"
    sub = Group({c: d / name for c, d in group.dirs.items()})
    try:
        if memory is not None:
            _limit_memory(group, memory)
        for d in sub.unique():
            d.mkdir()
    except OSError:
        remove(sub)
        return None
    return sub


def _try_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass  # swap accounting off: the memory limit alone still holds


def _counter_in(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def oom_killed(group: Group | None) -> bool:
    """Whether the memory controller's OOM killer ran in this (run) group."""
    mem = group.dirs.get("memory") if group is not None else None
    events = "memory.events" if _State.version == "cgroup-v2" else "memory.oom_control"
    return mem is not None and _counter_in(mem / events, "oom_kill") > 0


def refused_in_run(run: Group | None) -> int | None:
    """How many forks of this run were refused, or None where the kernel does not count them per run.
    cgroup v1 counts a refused fork in the forking task's own group (the run group, which only this run's
    processes can be in), so the count is this run's alone, whatever other runs of the sandbox do at the same
    time; cgroup v2 counts it in the group whose limit was hit (the sandbox's), shared by its runs."""
    pids = run.dirs.get("pids") if run is not None else None
    if pids is None or _State.version != "cgroup-v1":
        return None
    return _counter_in(pids / "pids.events", "max")


def refused_count(run: Group | None, sandbox: Group | None, *, fresh: bool = False) -> int:
    """What a run compares before and after itself: its run group's own count where the kernel counts per run
    (:func:`refused_in_run`), else the sandbox's whole subtree (:func:`pid_limit_hits`). ``fresh``: the run
    group was made for this run and nothing has joined it yet, so where the kernel counts per run the count
    is 0 without a read (0.2 ms a run)."""
    if fresh and run is not None and "pids" in run.dirs and _State.version == "cgroup-v1":
        return 0
    own = refused_in_run(run)
    return own if own is not None else pid_limit_hits(sandbox)


def pid_limit_hits(group: Group | None) -> int:
    """How often a fork was refused in the (sandbox) group or any group under it so far, removed run groups
    included; compare before and after a run. Never decreases while the group lives (see "Refused forks")."""
    pids = group.dirs.get("pids") if group is not None else None
    if pids is None:
        return 0
    with _hits_lock:  # held for a walk of reads only: a removal's slow rmdir is never inside it
        return _subtree_hits(pids) + _removed_hits.get(pids, 0)


def _subtree_hits(top: Path) -> int:
    """Every group's count under ``top``, but for groups being removed (theirs are in the tally already)."""
    total, stack = 0, [top]
    while stack:
        d = stack.pop()
        if d in _removing:
            continue
        total += _counter_in(d / "pids.events", "max")
        stack.extend(_subgroups(d))
    return total


def _subgroups(d: Path) -> list[Path]:
    """The groups directly under ``d``, from the directory's own entry types: a cgroup directory holds some
    thirty control files, and a ``stat`` of each (``Path.is_dir``) made the refused-fork count that every
    run takes twice cost ~0.35 ms."""
    try:
        with os.scandir(d) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


_hits_lock = threading.Lock()
_removed_hits: dict[Path, int] = {}
"""Refused forks counted in run groups already removed (or being removed), by their sandbox's pids directory."""
_removing: set[Path] = set()
"""pids directories being removed: their count moved to the tally before the removal began."""


def _tally(sandbox: Path, hits: int) -> None:
    if hits and (left := _removed_hits.get(sandbox, 0) + hits):
        _removed_hits[sandbox] = left
    elif hits:
        _removed_hits.pop(sandbox, None)


def kill_all(group: Group | None) -> None:
    """SIGKILL every process still in the group (a ``setsid`` escapes the process group, not the cgroup)."""
    if group is None:
        return
    for d in group.unique():
        try:
            members = (d / "cgroup.procs").read_text().split()
        except OSError:
            continue
        for pid in members:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass


def remove(group: Group | None) -> None:
    """Remove the group's directories and every subgroup left in them, killing what is inside;
    a group that will not go is left, never waited on long. Never raises."""
    if group is None:
        return
    pids = group.dirs.get("pids")
    hits = 0
    if pids is not None:
        # the group's refused forks move to its sandbox's tally before it goes, under the lock that the count
        # takes; the removal itself (rmdir, which can wait on the kernel and retry) runs outside it, so a
        # removal queued by one run never holds up the count that the next run takes on the event loop
        with _hits_lock:
            hits = _subtree_hits(pids)
            _tally(pids.parent, hits)
            _removing.add(pids)
    try:
        for d in group.unique():
            _remove_dir(d)
    finally:
        if pids is not None:
            with _hits_lock:
                _removing.discard(pids)
                if pids.exists():  # it would not go: the walk counts it again, the tally gives its count back
                    _tally(pids.parent, -hits)
                else:
                    _removed_hits.pop(pids, None)
    mem = group.dirs.get("memory")
    if mem is not None and not mem.exists():
        _memory_limited.discard(mem)


def _remove_dir(top: Path) -> None:
    """Depth-first without recursion (groups nest three levels at most, but a stale tree may not)."""
    stack, order = [top], []
    while stack:
        d = stack.pop()
        order.append(d)
        stack.extend(_subgroups(d))
    for d in reversed(order):
        try:
            members = (d / "cgroup.procs").read_text().split()
        except OSError:
            members = []
        for pid in members:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # EBUSY while killed members are still being reaped
                time.sleep(0.002)


def _sweep_stale(root: Path) -> None:
    """Groups left by processes that were killed before their atexit ran (their pid is gone)."""
    try:
        olds = list(root.glob("quotebench-*"))
    except OSError:
        return
    for old in olds:
        try:
            os.kill(int(old.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            _remove_dir(old)
        except (ValueError, PermissionError, OSError):
            pass


def _forked() -> None:  # a parent group of its own (the module's Layout); a thread of the parent may hold a lock
    global _detect_lock, _hits_lock
    _State.checked, _State.version, _State.parents = False, None, {}
    _detect_lock, _hits_lock = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_forked)
