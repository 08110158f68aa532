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

import os
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


GATE_PROGRAM = "/usr/bin/perl"
BUILTIN_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8"})


LATE_GATE = ('my ($l, $c) = ("", ""); while (1) {{ sysread(STDIN, $c, 1) or exit 125; last if $c eq "\\n"; $l .= $c }} '
             'if ($l eq "-") {{ open(STDIN, "<", "/dev/null") or exit 125 }} '
             'open(my $f, "<&=", {fd}) or exit 125; my @a = do {{ local $/ = "\\0"; my @w = <$f>; chomp @w; @w }}; '
             'close $f; @a or exit 125; exec {{ $a[0] }} @a; print STDERR "bwrap: execvp $a[0]: $!\\n"; exit 1')
"""The program of a launcher started ahead of its run (:mod:`transports.sandbox.pool`), bwrap's pid 2, in Perl: it
waits for the tracer's second line, read a byte at a time so that nothing after it is taken from the run's
input (``-``: the run's stdin is ``/dev/null``), reads the command's argv from the argument file (descriptor
``fd``, NUL-separated), closes it and execs the command, failing as bwrap's own ``execvp`` fails.

Why Perl, not a shell
    The gate must hand on the environment exactly as bwrap gave it, in its order: the command would otherwise
    see which launcher ran it. Perl passes its ``environ`` on untouched while ``%ENV`` is not written; every
    shell rebuilds it (bash adds ``SHLVL`` and ``PWD`` and reorders it; dash adds ``PWD`` and rewrites
    ``IFS``), so a shell gate needs ``env -i`` after it: one exec and one trace stop more on the record's
    path (0.7 ms here). ``perl-base`` is part of every Debian and Ubuntu system; without ``perl`` no launcher
    is started ahead.

What the gate reads of the environment it hands on
    Perl reads its own ``PERL*`` variables at start (``PERL5OPT`` loads modules) and the locale, and warns
    on stderr of a locale it cannot set. So a launcher is started ahead only for an environment with no
    ``PERL*`` name and an ``LC_ALL`` that is always there (:func:`gate_takes`); any other run starts its own."""


def late_argv(fd: int) -> list[str]:
    """bwrap's command for a launcher started ahead, reading its run from descriptor ``fd``."""
    return [GATE_PROGRAM, "-e", LATE_GATE.format(fd=fd)]


def gate_takes(env: dict[str, str]) -> bool:
    """Whether the gate (:data:`LATE_GATE`) can start in ``env`` without reading any of it: perl is installed,
    no ``PERL*`` name is set, and ``LC_ALL`` names a locale that needs no file."""
    return (os.access(GATE_PROGRAM, os.X_OK) and env.get("LC_ALL") in BUILTIN_LOCALES
            and not any(name.startswith("PERL") for name in env))


LATE_EXECS = 1
MAX_LATE_ARG = 64 * 1024
MAX_LATE_TOTAL = 1 << 20


def late_payload(argv: list[str]) -> bytes | None:
    """The argument file's content for a launcher started ahead: the argv, each word NUL-terminated. None when
    this run must start its own (an argument so long that only the kernel can say whether it fits)."""
    if not argv:
        return None
    words = [os.fsencode(a) for a in argv]
    if any(len(w) > MAX_LATE_ARG or b"\0" in w for w in words) or sum(len(w) + 1 for w in words) > MAX_LATE_TOTAL:
        return None
    return b"".join(w + b"\0" for w in words)


_SHELL_PROGRAMS = ("bash", "sh", "dash", "zsh", "busybox")
_shells: list[frozenset[exectrace.Identity]] = []


def shell_identities() -> frozenset[exectrace.Identity]:
    """The files of the installed shells: every run reads their command lines whole (they are what a
    transport's ``received`` is taken from) and their environments."""
    if not _shells:
        found = (exectrace.identity(p) for p in (shutil.which(n, path=SYSTEM_PATH) for n in _SHELL_PROGRAMS) if p)
        _shells.append(frozenset(i for i in found if i is not None))
    return _shells[0]


