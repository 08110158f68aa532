"""The launcher of one run: the argv that applies the limits, drops root, builds the bubblewrap sandbox and then
runs the command, in that order (each stage execs the next, so nothing of the harness stays in between).

    /bin/sh -c LIMITS_SCRIPT   waits for the tracer's line (sent once seized), joins the run's cgroups, sets
                               the file-size, open-files (and, without a memory cgroup, address-space) rlimits;
    setpriv                    drops to the unprivileged uid (:mod:`transports.sandbox.hostuid`), as root only;
    bwrap ...                  the namespaces, binds and masks; its pid 1 inside is bwrap's own init;
    the command                bwrap's pid 2.

Why no ``--die-with-parent`` and no wrapper of our own
    bwrap's init (pid 1 of the run's pid namespace) waits for every process of the namespace, and the
    pid namespace ends with it; bwrap's monitor outside reports pid 2's exit and leaves. So a background
    job that still holds the output lives on after the command's first program, as under ``ssh`` (the host
    ends the run: :mod:`transports.sandbox.process`). ``--die-with-parent`` would kill that init as the
    monitor leaves; what it guarded against (a harness that dies) is covered by the tracer's
    ``PTRACE_O_EXITKILL`` (every process of the run is a tracee) and the run's cgroup. The init ignores
    every signal sent from inside its namespace (the kernel's rule for a namespace's init), so the command
    cannot stop or kill its parent to end the namespace early. This replaced a ``sh`` wrapper between bwrap
    and the command: one exec, one fork and three trace stops fewer per run (about 1.5 ms here).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import cgroups, exectrace, hostuid
from .isolation import SYSTEM_PATH, bwrap_program, masks
from .limits import Limits
from .systemdirs import system_binds

INSIDE_ROOT = "/sandbox"  # where the private root appears under bwrap: fixed, so $HOME and $PWD are reproducible
FILES_INSIDE = "/run/qb-files"  # where Sandbox.write_file's files appear under bwrap (read-only)
# $0 names the run's cgroup directories, space-separated (empty: none); 125 = the limits could not be applied,
# nothing ran. {vmem} is an address-space limit, used only where no memory cgroup can be made.
# The shell moves itself with ``echo 0 > tasks`` where the hierarchy has that file (cgroup v1): a single thread
# moving itself is the one migration the kernel does without write-locking every thread group of the system,
# which waits for an RCU grace period (about 10 ms here, every run, since runs are further apart than that).
# cgroup v2 has no such file (nor a delegation that left it unwritable): cgroup.procs, and the grace period.
LIMITS_SCRIPT = (exectrace.GATE_PREFIX + 'for g in $0; do {{ echo 0 > "$g/tasks"; }} 2>/dev/null '
                 '|| echo $$ > "$g/cgroup.procs" || exit 125; done; '
                 'ulimit -f {blocks} && ulimit -n {files}{vmem} && {locale}exec "$@"')
C_LOCALE = "LC_ALL=C "
"""Put before the limits shell's exec when ``setpriv`` comes next and bwrap after it: setpriv loads the
locale's files (0.4 ms per run here) only to translate its error messages; bwrap sets the command's own
``LC_ALL`` back (:func:`bwrap_argv`'s ``lc_all``), so the command's environment never has it. bwrap's own
processes keep it: its init is pid 1 of the command's namespace, and ``/proc/1/environ`` shows ``LC_ALL=C``
where root was dropped (as ``/proc/1/cmdline`` shows bwrap's arguments): bwrap's, not the command's."""


def limits_prefix(lim: Limits, group: cgroups.Group | None, *, c_locale: bool = False) -> list[str]:
    """The limits shell and the uid drop: everything before bubblewrap (``c_locale``: see C_LOCALE)."""
    vmem = "" if group is not None and "memory" in group.dirs else f" && ulimit -v {lim.memory // 1024}"
    # POSIX sh counts -f in 512-byte blocks; joining the cgroup first makes every later fork count
    prefix = ["/bin/sh", "-c", LIMITS_SCRIPT.format(blocks=max(1, lim.file_size // 512), files=lim.open_files,
                                                    vmem=vmem, locale=C_LOCALE if c_locale else ""),
              group.joined() if group is not None else ""]
    return prefix + hostuid.drop_prefix()  # root is dropped after the cgroups are joined, before bwrap starts


def bwrap_argv(lim: Limits, root: Path, chdir: str, ro: list[tuple[Path, str]], *, network: bool,
               lc_all: str | None = None) -> list[str]:
    """bubblewrap with every namespace unshared (``network`` keeps the host's), the system read-only, the
    private root writable at its fixed and its host path, ``ro`` bound read-only (a source the dropped uid
    cannot reach through a host bind mount it can); the command follows, with ``LC_ALL`` set to ``lc_all``
    when given (the command's own value, after C_LOCALE)."""
    iso = [bwrap_program() or "bwrap", "--unshare-all", "--cap-drop", "ALL"]
    if network:
        iso.append("--share-net")
    iso += system_binds() + masks()
    iso += ["--proc", "/proc", *hostuid.kernel_binds(), "--dev", "/dev", "--size", str(lim.tmp_size),
            "--tmpfs", "/tmp", "--size", str(16 * 1024 * 1024), "--tmpfs", "/run",
            "--bind", str(root), INSIDE_ROOT, "--bind", str(root), str(root)]
    for host, inside in ro:
        iso += ["--ro-bind", hostuid.reachable_path(host), inside]
    if lc_all is not None:
        iso += ["--setenv", "LC_ALL", lc_all]
    return iso + ["--chdir", chdir, "--"]


_SHELL_PROGRAMS = ("bash", "sh", "dash", "zsh", "busybox")
_shells: list[frozenset[exectrace.Identity]] = []


def shell_identities() -> frozenset[exectrace.Identity]:
    """The files of the installed shells: every run reads their command lines whole (they are what a
    transport's ``received`` is taken from) and their environments."""
    if not _shells:
        found = (exectrace.identity(p) for p in (shutil.which(n, path=SYSTEM_PATH) for n in _SHELL_PROGRAMS) if p)
        _shells.append(frozenset(i for i in found if i is not None))
    return _shells[0]


