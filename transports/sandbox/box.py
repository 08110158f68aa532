"""Sandboxed execution: where every agent command runs, on every path.

Lifecycle
    ``Sandbox.create(task)`` makes a fresh private root (a temp directory) holding ``work/`` (the working
    directory, filled from the task's fixture), ``home/`` (``$HOME``), ``tmp/`` and ``meta/`` (transport scratch
    space: received-capture files, temporary scripts; never inside ``work/``, so it cannot disturb a directory-
    state check). ``run()`` may be called any number of times; state in ``work/`` persists between calls (the
    MCP server relies on that). ``close()`` removes the root; the sandbox is also an (async) context manager.
    Every run is traced (:mod:`transports.sandbox.exectrace`): ``Execution.trace`` is the kernel's record of the
    programs it executed, from which transports take ``received``.

Limits (``Limits``)
    * wall clock: ``timeout_s`` (default 10 s), kept by a thread of the run, not the event loop
      (:mod:`transports.sandbox.process`); on expiry every process of the run is killed with SIGKILL and
      ``timed_out`` is set. A run ends when the command's first program has exited and no process of it holds
      its output any more (as ``ssh`` and ``docker exec`` wait); then everything left of it is killed, so
      nothing outlives a call;
    * output: each of stdout and stderr is kept up to ``output_cap`` bytes and marked ``truncated`` beyond it; a
      run that writes more than ``drain_cap`` bytes to one stream is killed (exit 137), so a ``yes`` cannot spin
      until the timeout;
    * file size and open files: RLIMIT_FSIZE and RLIMIT_NOFILE set by a ``ulimit`` prefix (one ``/bin/sh``
      exec), never through ``preexec_fn``, which would force a fork of a possibly large parent;
    * processes: at most ``processes`` at once, through a pids cgroup per sandbox where one can be made
      (RLIMIT_NPROC does nothing for root);
    * memory: at most ``memory`` bytes per sandbox (default 1 GiB), all its runs and both ends of ssh together,
      through a memory cgroup per sandbox; where no cgroup can be made, an address-space rlimit of the same size
      per process (:mod:`transports.sandbox.cgroups`);
    * disk: the private root is a tmpfs of ``disk`` bytes (default 1 GiB) where the harness runs as root
      (:mod:`transports.sandbox.diskcap`); elsewhere only the per-file limit applies;
    * stdin is ``/dev/null`` unless the caller passes bytes or a byte stream (the SSH server forwards its
      client's stdin);
    * the private ``/tmp`` is a tmpfs of at most ``tmp_size`` bytes (its pages count against the memory limit
      too).
    ``Execution.limits_applied`` says which mechanism enforced each limit, and ``Execution.limit_hit`` which
    limit ended or failed the run (``time``, ``output``, ``memory``, ``processes``, ``disk``, ``file-size``), if
    any.

Leftovers, no host root, isolation
    Roots are named ``qb-sandbox-<pid>-*``; the first sandbox a process makes removes what dead harness
    processes left (:mod:`transports.sandbox.leftovers`). ``close()`` never raises: a tree of any depth,
    with links, FIFOs or unreadable directories, is removed without following anything out of it. As root,
    the launcher drops to uid 65534 before bwrap starts (:mod:`transports.sandbox.hostuid`). With bwrap
    (:mod:`transports.sandbox.isolation`) every run has all namespaces unshared (no network: a host
    loopback listener is unreachable), the system read-only, only the sandbox root writable, a private
    ``/tmp``, ``/proc`` (``/proc/sys`` read-only) and ``/dev``, bwrap's own init as pid 1, every capability
    dropped, and the password hashes and SSH host keys under ``/etc`` masked (:mod:`transports.sandbox.launch`).
    ``network=True`` keeps the host network namespace (only the ``ssh`` fallback client talking to a real
    sshd needs it). Without bwrap the command still runs, with a one-time warning on stderr, and
    ``isolation`` is ``"none"``.

Environment
    Scrubbed: a fixed PATH, HOME inside the sandbox, LANG=C.UTF-8, TZ=UTC, and nothing of the caller's
    environment (API keys above all).

Paths
    Under bwrap the private root is mounted at ``/sandbox`` (working directory ``/sandbox/work``,
    ``HOME=/sandbox/home``, ``TMPDIR=/tmp``), so a command sees the same paths on every run and replays are
    byte-reproducible; it is also bound at its host path, so a host path handed in still resolves. Transports
    that name a file to the command use ``inside(path)``. Without bwrap the command sees the host paths.

Errors
    ``SandboxError`` when the sandbox cannot be built or the launcher cannot be started. A command's own
    failure is not an error: it is data in the returned ``Execution``.
"""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tasks.fixture import materialize
from tasks.safefs import remove_tree
from tasks.schema import Task

from . import ahead, cgroups, diskcap, exectrace, hostuid, launch, reaper, userland as userlands
from .phases import mark
from .isolation import SYSTEM_PATH, Isolation, isolation_available, warn_no_isolation_once, warn_root_once
from .launch import FILES_INSIDE, INSIDE_ROOT, shell_identities
from .leftovers import discard, sweep_leftovers
from .limits import Limits, which_limit
from .ahead import PLAIN, Launch, Waiting
from .execution import ArgumentTooLong, Bind, Execution, SandboxError, exit_code_of
from .process import NotReleased, Stdin, TooLong, run_traced
from .userland import default_userland



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
        self.runs = 0  # how many runs were started in this sandbox (a chain's later turns see what earlier ones left)
        self.cgroup: cgroups.Group | None = None
        self.mounted = False
        self.closed = False
        self.files: Path | None = None  # host-written files (write_file): outside the root, bound read-only
        self.waiting = Waiting()  # launchers started ahead for the first runs (transports.sandbox.ahead)

    @classmethod
    def create(cls, task: Task | None = None, limits: Limits | None = None,
               isolation: Isolation | None = None, userland: str | None = None) -> "Sandbox":
        """A fresh sandbox; ``task`` fills the working directory with its fixture; ``userland`` defaults to
        the process-wide one (:func:`set_default_userland`)."""
        available = isolation_available()  # also decides, once, which uid sandboxed commands run as
        iso = isolation or available
        if hostuid.user() == "root":
            warn_root_once()
        ul = userlands.check(userland or default_userland())  # an unknown one: nothing is made
        if iso == "none":
            warn_no_isolation_once()
        sweep_leftovers()
        mark("create: thread hop, checks")
        box: Sandbox | None = None
        try:
            root = Path(tempfile.mkdtemp(prefix=f"qb-sandbox-{os.getpid()}-", dir=hostuid.temp_base())).resolve()
            box = cls(root, limits or Limits(), iso, ul)
            mark("create: root directory")
            box.mounted = diskcap.mount(root, box.limits.disk)
            mark("create: tmpfs mount")
            for d in (box.workdir, box.home, box.tmp, box.meta):
                d.mkdir()
            box.cgroup = cgroups.new_group(box.limits.processes)
            mark("create: directories, cgroup")
            if task is not None:
                materialize(task.fixture, box.workdir)
            mark("create: fixture")
            if (uid := hostuid.sandbox_uid()) is not None:
                hostuid.give(root, uid)  # the command's uid owns its tree; the host reads it as root
            mark("create: chown")
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
        (:mod:`transports.sandbox.reaper`): nothing of the sandbox runs any more when this returns, but its
        files and groups may still exist for a few milliseconds."""
        if self.closed:
            return
        self.closed = True
        for waiting in self.waiting:
            ahead.drop(waiting)
        cgroups.kill_all(self.cgroup)  # now: nothing of it may run on; the removal itself can wait
        mark("close: kill the cgroup's members")
        group, root, mounted, files = self.cgroup, self.root, self.mounted, self.files

        def remove() -> None:
            cgroups.remove(group)
            discard(root, mounted)
            if files is not None:
                remove_tree(files)
        if wait:
            remove()
        else:
            reaper.later(remove)
        mark("close: removal (or its queueing)")

    def start_ahead(self, launches: Sequence[Launch] = PLAIN) -> bool:
        """Start the first runs' launchers now, before any run, one per ``launches``
        (:mod:`transports.sandbox.ahead`); False when none was started (each run then starts its own, as always)."""
        if self.isolation == "bwrap" and not self.runs and not self.waiting and not self.closed:
            self.waiting += ahead.start_each(launches, self.cgroup, self.limits, self.env, self.workdir, self.launcher)
        return bool(self.waiting)

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
                 cwd: Path | None = None, group: cgroups.Group | None = None,
                 env: dict[str, str] | None = None) -> tuple[list[str], int]:
        """The full argv (limits, then the uid drop, then isolation, then the command) and how many execs
        the tracer will see of the launcher's own before the command's first program: setpriv's, without bwrap;
        none under bwrap, where the launcher's execs are never stopped at (``Tracer``'s ``inner``).

        Read-only binds whose source the dropped uid cannot reach (a Python under root's home) are bound
        through a read-only host bind mount it can reach (:func:`transports.sandbox.hostuid.reachable_path`)."""
        stages = 1 if hostuid.user() == "dropped" else 0
        c_locale = stages == 1 and self.isolation == "bwrap"  # bwrap sets the command's own LC_ALL back
        prefix = launch.limits_prefix(self.limits, group or self.cgroup, c_locale=c_locale)
        if self.isolation == "none":
            return prefix + argv, stages
        ro: list[tuple[Path, str]] = []
        if self.files is not None:
            ro.append((self.files, FILES_INSIDE))
        if self.userland_dir is not None:
            ro.append((self.userland_dir, userlands.MOUNT))
        for b in binds:
            ro.append((b, str(b)) if isinstance(b, Path) else (b[0], b[1]))
        lc_all = (env or self.env())["LC_ALL"] if c_locale else None  # always set: Sandbox.env's base
        iso = launch.bwrap_argv(self.limits, self.root, self.inside(cwd or self.workdir), ro, network=network,
                                lc_all=lc_all)
        return prefix + iso + argv, 0

    # -- running -------------------------------------------------------------

    def _end_of(self, group: cgroups.Group | None) -> Callable[[], None]:
        """What ends a run's processes that the tracer cannot kill by pid (a ``CLONE_UNTRACED`` child): under
        bwrap nothing (killing the pid namespace's init kills them, and its exit is reported once they are all
        gone, so the tracer's join waits for them); without a pid namespace, the run's cgroup."""
        if self.isolation == "bwrap":
            return lambda: None
        return lambda: cgroups.kill_all(group)

    async def run(self, argv: list[str], *, env: dict[str, str] | None = None, network: bool = False,
                  binds: tuple[Bind, ...] = (), cwd: Path | None = None, stdin: Stdin = None,
                  watch: frozenset[exectrace.Identity] = frozenset(),
                  input_of: Callable[[exectrace.Exec], bool] | None = None, log_fd: int | None = None
                  ) -> Execution:
        """Run ``argv`` in the working directory under the limits; never raises for the command's failure.

        The run is traced (:mod:`transports.sandbox.exectrace`): ``Execution.trace`` lists every program it
        executed, as the kernel held it; ``watch`` names the program files (shells) whose command line is
        read whole; ``input_of`` picks the program whose terminal input is recorded (``trace.input``), and
        ``log_fd`` names that program's descriptor whose writes are copied too (``trace.shell_log``).
        Raises ``ArgumentTooLong`` when the kernel refuses the argument vector (nothing ran)
        and ``SandboxError`` when the launcher cannot start at all.
        """
        self.runs += 1
        mark("transport: before the run")
        run_env = self.env(env)
        first_try = True
        while True:
            taken, group = None, None
            try:
                if first_try:  # the launcher started ahead that this run's own would equal, if one waits
                    found = ahead.pick(self.waiting, run_env, lambda late, g: self.launcher(
                        late, network=network, binds=binds, cwd=cwd, group=g, env=run_env)[0])
                    taken = ahead.take(found, argv) if found is not None else None
                if taken is not None:
                    group, full, stages = taken[0].group, taken[0].full, 0
                else:
                    group = cgroups.child(self.cgroup, self.limits.memory)
                    full, stages = self.launcher(argv, network=network, binds=binds, cwd=cwd, group=group,
                                                 env=run_env)
            except OSError as e:
                cgroups.remove(group)
                raise SandboxError(f"cannot bind a source into the sandbox: {e}") from e
            mark("run: the run's cgroup, launcher argv")
            refused_forks = cgroups.refused_count(group, self.cgroup, fresh=taken is None)
            mark("run: fork counter")
            lim = self.limits
            try:
                outcome = await run_traced(
                    full, env=run_env, cwd=str(cwd or self.workdir), stdin=stdin, timeout_s=lim.timeout_s,
                    output_cap=lim.output_cap, drain_cap=lim.drain_cap, watch=watch | shell_identities(),
                    launcher_execs=stages, on_end=self._end_of(group), input_of=input_of, log_fd=log_fd,
                    inner=self.isolation == "bwrap", ready=(taken[0].tracer, taken[1]) if taken else None)
            except NotReleased:
                outcome = None
            except TooLong:
                cgroups.remove(group)
                raise ArgumentTooLong("the program is longer than the kernel allows for one argument "
                                      "(131072 bytes); nothing ran") from None
            except (OSError, exectrace.TraceError) as e:
                cgroups.remove(group)
                raise SandboxError(f"cannot start {full[0]}: {getattr(e, 'strerror', None) or e}") from e
            finally:
                if taken is not None:  # the launcher holds its own copy until its gate closes it
                    os.close(taken[0].fd)
            # a launcher started ahead that ran nothing of the command (killed from outside, or its exec of
            # the command failed, which the run's own launcher reports as bwrap does): the run starts its own
            if taken is None or (outcome is not None and (outcome.trace.execs or outcome.timed_out)):
                break
            reaper.later(lambda g=group: cgroups.remove(g))
            first_try = False
        assert outcome is not None
        mark("end: loop wakes, pipes drained")
        oom = cgroups.oom_killed(group)
        refused_after = cgroups.refused_count(group, self.cgroup)  # before the group's removal is queued
        reaper.later(lambda: cgroups.remove(group))
        mark("end: oom and fork counters, cgroup removal queued")
        out, err, timed_out = outcome.stdout, outcome.stderr, outcome.timed_out
        exit_code = None if timed_out or outcome.status is None else exit_code_of(outcome.status)
        hit = which_limit(timed_out=timed_out, drained=out.drained or err.drained, oom=oom,
                          rlimit_memory=group is None, stderr=err.text, refused=refused_after > refused_forks,
                          disk_full=lambda: self.mounted and diskcap.full(self.root),
                          file_size=any(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGXFSZ
                                        for st in outcome.trace.exits.values()))
        return Execution(
            exit_code=exit_code, stdout=out, stderr=err, timed_out=timed_out,
            exec_ms=outcome.exec_ms, isolation=self.isolation,
            limit_hit=hit, limits_applied=self.applied(), trace=outcome.trace,
        )
