"""The launcher of one run: the argv that applies the limits, drops root, builds the bubblewrap sandbox and then
runs the command, in that order (each stage execs the next, so nothing of the harness stays in between).

    /bin/sh -c LIMITS_SCRIPT   stops itself (the tracer seizes it at rest), joins the run's cgroups, sets
                               the file-size, open-files (and, without a memory cgroup, address-space) rlimits;
    setpriv                    drops to the unprivileged uid (:mod:`transports.sandbox.hostuid`), as root only;
    bwrap ... /bin/sh -c WRAPPER   the namespaces, binds and masks; the wrapper keeps the pid namespace
                               while a background job holds the output;
    the command.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import cgroups, exectrace, hostuid
from .isolation import SYSTEM_PATH, bwrap_program, masks, system_binds
from .limits import Limits

INSIDE_ROOT = "/sandbox"  # where the private root appears under bwrap: fixed, so $HOME and $PWD are reproducible
FILES_INSIDE = "/run/qb-files"  # where Sandbox.write_file's files appear under bwrap (read-only)
# $0 names the run's cgroup directories, space-separated (empty: none); 125 = the limits could not be applied,
# nothing ran. {vmem} is an address-space limit, used only where no memory cgroup can be made.
# The shell moves itself with ``echo 0 > tasks`` where the hierarchy has that file (cgroup v1): a single thread
# moving itself is the one migration the kernel does without write-locking every thread group of the system,
# which waits for an RCU grace period (about 10 ms here, every run, since runs are further apart than that).
# cgroup v2 has no such file (nor a delegation that left it unwritable): cgroup.procs, and the grace period.
LIMITS_SCRIPT = (exectrace.STOP_PREFIX + 'for g in $0; do {{ echo 0 > "$g/tasks"; }} 2>/dev/null '
                 '|| echo $$ > "$g/cgroup.procs" || exit 125; done; '
                 'ulimit -f {blocks} && ulimit -n {files}{vmem} && exec "$@"')
WRAPPER = 'exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); exec <&- >&- 3>&-; kill -STOP $$'
"""Inside bwrap: run the command as a child, then stay with the output closed, so that the pid namespace (which
ends with its first process) lives on while a background job still holds the output; the host ends the run.
It stays by stopping itself (no program to exec, nothing scheduled: the host's SIGKILL ends a stopped process).
The wrapper's own stderr is /dev/null while it waits: a shell reports a child killed by a signal ("Terminated"),
which ``bash -c R`` alone never prints; the command gets the real stderr through fd 3, in its own subshell."""


def limits_prefix(lim: Limits, group: cgroups.Group | None) -> list[str]:
    """The limits shell and the uid drop: everything before bubblewrap."""
    vmem = "" if group is not None and "memory" in group.dirs else f" && ulimit -v {lim.memory // 1024}"
    # POSIX sh counts -f in 512-byte blocks; joining the cgroup first makes every later fork count
    prefix = ["/bin/sh", "-c", LIMITS_SCRIPT.format(blocks=max(1, lim.file_size // 512), files=lim.open_files,
                                                    vmem=vmem),
              group.joined() if group is not None else ""]
    return prefix + hostuid.drop_prefix()  # root is dropped after the cgroups are joined, before bwrap starts


def bwrap_argv(lim: Limits, root: Path, chdir: str, ro: list[tuple[Path, str]], *, network: bool) -> list[str]:
    """bubblewrap with every namespace unshared (``network`` keeps the host's), the system read-only, the
    private root writable at its fixed and its host path, ``ro`` bound read-only (a source the dropped uid
    cannot reach through a host bind mount it can), then the wrapper."""
    iso = [bwrap_program() or "bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    if network:
        iso.append("--share-net")
    iso += system_binds() + masks()
    iso += ["--proc", "/proc", *hostuid.kernel_binds(), "--dev", "/dev", "--size", str(lim.tmp_size),
            "--tmpfs", "/tmp", "--size", str(16 * 1024 * 1024), "--tmpfs", "/run",
            "--bind", str(root), INSIDE_ROOT, "--bind", str(root), str(root)]
    for host, inside in ro:
        iso += ["--ro-bind", hostuid.reachable_path(host), inside]
    return iso + ["--chdir", chdir, "--", "/bin/sh", "-c", WRAPPER, "qb-run"]


_SHELL_PROGRAMS = ("bash", "sh", "dash", "zsh", "busybox")
_shells: list[frozenset[exectrace.Identity]] = []


def shell_identities() -> frozenset[exectrace.Identity]:
    """The files of the installed shells: every run reads their command lines whole (they are what a
    transport's ``received`` is taken from) and their environments."""
    if not _shells:
        found = (exectrace.identity(p) for p in (shutil.which(n, path=SYSTEM_PATH) for n in _SHELL_PROGRAMS) if p)
        _shells.append(frozenset(i for i in found if i is not None))
    return _shells[0]


