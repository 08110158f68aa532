"""The gate of a launcher started ahead (:mod:`transports.sandbox.ahead`): bwrap's pid 2, waiting for its run.

What it does
    It waits for the tracer's second line, read a byte at a time so that nothing after it is taken from the
    run's input (``-``: the run's stdin is ``/dev/null``, the host's, opened by the harness and handed down
    as descriptor :data:`NULL`, as the limits shell of a run's own launcher opens it before bwrap), reads the
    command's argv from the argument file (descriptor ``fd``, NUL-separated), closes both and execs the
    command, failing as bwrap's own ``execvp`` fails (such a run is set aside and the run starts its own
    launcher, so the failure is bwrap's).

Why Perl, not a shell
    The gate must hand on the environment exactly as bwrap gave it, in its order: the command would otherwise
    see which launcher ran it. Perl passes its ``environ`` on untouched while ``%ENV`` is not written. Every
    shell rebuilds it (bash adds ``SHLVL`` and ``PWD`` and orders it its own way; dash adds ``PWD``, rewrites
    ``IFS`` and sorts it), so a shell gate needs ``env -i`` after it: one exec and one trace stop more on the
    record's path (about 1 ms here). ``perl-base`` is part of every Debian and Ubuntu system; without
    ``/usr/bin/perl`` no launcher is started ahead.

What it reads of the environment it hands on
    Perl reads its own ``PERL*`` variables at start (``PERL5OPT`` loads modules), its dynamic loader reads
    ``LD_*`` and glibc's tunables, and it sets the locale, warning on stderr of one it cannot set. So a
    launcher is started ahead only for an environment with none of those names, whose locale Perl is seen
    to set silently (:func:`takes`); any other run starts its own launcher and gets what bwrap gives it.

What a command can still tell (a command that reads them sees which launcher ran it; no validator does)
    bwrap's init holds the launcher's gate pipe as its stdin (and its own descriptors at other numbers); its
    command line ends in the gate's program; and what exec keeps: the process's start time, I/O counters
    and page faults include the gate's.
"""

from __future__ import annotations

import functools
import os
import subprocess

from tasks import forking

PROGRAM = "/usr/bin/perl"

SCRIPT = ('my ($l, $c) = ("", ""); while (1) {{ sysread(STDIN, $c, 1) or exit 125; last if $c eq "\\n"; $l .= $c }} '
          'if ($l eq "-") {{ open(STDIN, "<&", {null}) or exit 125 }} open(my $n, "<&=", {null}) or exit 125; close $n; '
          'open(my $f, "<&=", {fd}) or exit 125; my @a = do {{ local $/ = "\\0"; my @w = <$f>; chomp @w; @w }}; '
          'close $f; @a or exit 125; exec {{ $a[0] }} @a; print STDERR "bwrap: execvp $a[0]: $!\\n"; exit 1')

EXECS = 1
"""The gate's own execs at the start of the trace (bwrap's exec of perl), left out of it."""

READ_PREFIXES = ("PERL", "LD_")
READ_NAMES = frozenset({"GLIBC_TUNABLES", "LOCPATH", "GCONV_PATH"})
LOCALE_NAMES = frozenset({"LANG", "LANGUAGE"})

MAX_ARG = 64 * 1024
MAX_TOTAL = 1 << 20
MAX_WORDS = 4096
"""bwrap refuses a command line of more than 9000 words, its own options included: a run's own launcher fails
there, so a longer argv starts its own and fails the same way."""


NULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
"""The host's ``/dev/null``, open for the life of the process (one descriptor, whatever the number of launchers;
a forked child has it too) and handed to every launcher started ahead (``Tracer``'s ``pass_fds``)."""


def argv(fd: int) -> list[str]:
    """bwrap's command for a launcher started ahead, reading its run from descriptor ``fd``, with the host's
    ``/dev/null`` as descriptor :data:`NULL`."""
    return [PROGRAM, "-e", SCRIPT.format(fd=fd, null=NULL)]


def takes(env: dict[str, str]) -> bool:
    """Whether the gate starts in ``env`` as if it were not there: Perl is installed, ``env`` names nothing
    Perl or its loader reads at start, and Perl sets its locale silently. Perl's presence is checked on every
    call, not cached with the locale's probe: a Perl removed or installed while the process runs counts."""
    if not os.access(PROGRAM, os.X_OK):
        return False
    if any(name.startswith(READ_PREFIXES) or name in READ_NAMES for name in env):
        return False
    return _starts_silently(tuple(sorted((k, v) for k, v in env.items()
                                         if k in LOCALE_NAMES or k.startswith("LC_"))))


@functools.lru_cache(maxsize=64)
def _starts_silently(locale: tuple[tuple[str, str], ...]) -> bool:
    """Perl started with only these locale variables exits 0 and writes nothing: the sandbox sees the host's
    locale files (the system is bound read-only), so once per process and locale is enough."""
    try:
        done = forking.run([PROGRAM, "-e", "1"], env=dict(locale), timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and not done.stdout and not done.stderr


def payload(command: list[str]) -> bytes | None:
    """The argument file's content for a run of ``command``: each word NUL-terminated. None when the run
    must start its own launcher: an argument so long that only the kernel can say whether it fits, or more
    words than bwrap takes (:data:`MAX_WORDS`)."""
    if not command or len(command) > MAX_WORDS:
        return None
    words = [os.fsencode(a) for a in command]
    if any(len(w) > MAX_ARG or b"\0" in w for w in words) or sum(len(w) + 1 for w in words) > MAX_TOTAL:
        return None
    return b"".join(w + b"\0" for w in words)
