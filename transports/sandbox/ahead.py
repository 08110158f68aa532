"""A sandbox's first launcher, started before its run is asked for: the launch chain off the record's path.

Why
    Most of a record's time is the launch chain (the limits shell, ``setpriv``, bubblewrap's namespaces and
    mounts: ``quotebench bench --phases``), and none of it depends on the command. So a sandbox built ahead
    (:mod:`transports.sandbox.pool`) also starts its first run's launcher ahead: seized by its tracer, in its
    run's cgroups, with its rlimits, past the uid drop and bwrap, its pid 2 waiting at a second gate
    (:mod:`~transports.sandbox.gate`). The run then hands it the command's argv through an
    argument file (a memfd only that launcher holds) and one gate line; the gate execs the command with the
    environment bwrap gave the gate, untouched, as bwrap would have given it to the command.

What stays as strong
    Nothing of the command runs before the gate line: until then the sandbox holds only bwrap's init and
    the gate, so the host may still write the fixture into its root. The tracer is the run's own from the
    launcher's first instruction; the gate's exec is the launcher's (left out of the trace, as setpriv's
    is without bwrap), so the command's first program is the first exec in the trace, as
    always. A launcher is used for one run at most, and only when the launcher that run would start is the
    same argv but for the command (the same binds, working directory, network, cgroups) and the same
    environment, one the gate reads nothing of (:func:`~transports.sandbox.gate.takes`); otherwise
    (a host-written file, an argument over 64 KiB, whose fit only the kernel can judge, more words than
    bwrap takes) the run starts its own.

Which launchers
    A sandbox starts one launcher ahead per :class:`Launch` its transport names (default: one plain run).
    A transport whose delivery makes several runs with arguments known before the command (``ssh``: the
    local side with its client's directory and environment, then the server's plain run) names each, and
    each run takes the one that fits it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tasks import forking

from . import cgroups, exectrace, gate, launch, reaper
from .execution import Bind
from .limits import Limits
from .process import discard_ready


_lock = threading.Lock()
forking.new_locks_in_child(globals(), "_lock")
GATE_WAIT_S = 10.0
"""How long a launcher started ahead may take to reach its gate before it is given up."""


@dataclass(frozen=True)
class Launch:
    """What a run's launcher depends on besides its command: ``Sandbox.run``'s ``env``, ``binds`` and
    ``network``. A launcher started ahead with these serves only a run that passes the same."""

    env: dict[str, str] = field(default_factory=dict)
    binds: tuple[Bind, ...] = ()
    network: bool = False


PLAIN = (Launch(),)
"""The launchers a transport's delivery starts when it names none: one run with the sandbox's own arguments."""


class Waiting(list["Ahead"]):
    """A sandbox's launchers started ahead, shared by every view of it (``copy.copy``), so that a launcher one
    run took is gone for all, and ``passed_by`` counts every view's runs that found none fitting them."""

    passed_by: int = 0


@dataclass
class Ahead:
    """A launcher waiting at its second gate, and what its run must match."""

    tracer: exectrace.Tracer
    group: cgroups.Group | None
    full: list[str]
    env: dict[str, str]
    fd: int
    used: bool = False
    ended: bool = False  # taken or dropped: a view of the sandbox (copy.copy) may hold it too, and finds it gone
    owner: int = field(default_factory=os.getpid)
    """The process whose tracer thread holds the launcher: a forked child's copy of the sandbox can neither take
    it (its command would run in the parent's launcher, and the child wait for a tracer it does not have) nor
    end it (the parent's launcher killed, its cgroup removed)."""


def start(sandbox_group: cgroups.Group | None, limits: Limits, env: dict[str, str], workdir: Path,
          launcher: Callable[..., tuple[list[str], int]]) -> Ahead | None:
    """Start the launcher (``launcher``: the sandbox's own argv builder); None when it cannot start."""
    if not gate.takes(env):
        return None
    group, fd = None, -1
    try:
        group = cgroups.child(sandbox_group, limits.memory)
        fd = os.memfd_create("qb-run", os.MFD_CLOEXEC)
        full, _ = launcher(gate.argv(fd), group=group, env=env)
        tracer = exectrace.Tracer(full, env=env, cwd=str(workdir), stdin=True, watch=launch.shell_identities(),
                                  launcher_execs=gate.EXECS, inner=True, late_fd=fd,
                                  pass_fds=(gate.NULL,))
        tracer.start()
    except (OSError, exectrace.TraceError):
        if fd >= 0:
            os.close(fd)
        cgroups.remove(group)
        return None
    found = Ahead(tracer, group, full, env, fd)
    # ready once bwrap has started the gate
    if not tracer.gate_reached.wait(GATE_WAIT_S) or tracer.main_exited.is_set():
        drop(found)
        return None
    return found


def start_each(launches: Sequence[Launch], sandbox_group: cgroups.Group | None, limits: Limits,
               env_for: Callable[[dict[str, str]], dict[str, str]], workdir: Path,
               launcher: Callable[..., tuple[list[str], int]]) -> list[Ahead]:
    """One launcher per ``launches`` (those that start): the environment ``env_for(how.env)``, the binds and
    network ``how`` names."""
    started = (start(sandbox_group, limits, env_for(how.env), workdir,
                     partial(launcher, binds=how.binds, network=how.network)) for how in launches)
    return [a for a in started if a is not None]


def fits(ahead: Ahead, run_env: dict[str, str], launcher_for: Callable[[list[str]], list[str]]) -> bool:
    """Whether a run in ``run_env`` whose own launcher would be ``launcher_for(command)`` may take ``ahead``:
    the same environment and the same argv but for the command (its rlimits and sizes are in the argv; its
    memory and process caps are the sandbox's group's, whichever run sets them first). Changes nothing (an
    ``OSError`` of ``launcher_for`` is raised)."""
    return (not ahead.ended and ahead.owner == os.getpid() and run_env == ahead.env
            and launcher_for(gate.argv(ahead.fd)) == ahead.full)


def pick(waiting: Waiting, run_env: dict[str, str],
         launcher_for: Callable[[list[str], cgroups.Group | None], list[str]]) -> Ahead | None:
    """The first of ``waiting`` that :func:`fits` a run (``launcher_for(command, group)``: that run's own
    launcher in a given run group), removed from the list; None if none does (the list is left as it is, and
    counted in ``passed_by`` if it held any)."""
    for candidate in list(waiting):
        if fits(candidate, run_env, lambda late: launcher_for(late, candidate.group)):
            waiting.remove(candidate)
            return candidate
    waiting.passed_by += bool(waiting)
    return None


def take(ahead: Ahead, argv: list[str]) -> tuple[Ahead, bytes] | None:
    """``ahead`` and the argument file of a run of ``argv`` (which :func:`fits` it), if it still waits; else
    None. Either way it is no other run's: one run takes it at most, and a second call (another view of the
    same sandbox) finds it ended. An argv the argument file cannot carry ends it too."""
    with _lock:
        if ahead.ended or ahead.owner != os.getpid():  # a forked child neither takes nor ends its parent's
            return None
        ahead.ended = True
    payload = gate.payload(argv)
    if payload is None or ahead.tracer.main_exited.is_set():
        _end(ahead)
        return None
    ahead.used = True
    return ahead, payload


def drop(ahead: Ahead) -> None:
    """End a launcher no run took: killed now, the rest off the caller's path; once (a later call, or one
    for a launcher a run took, does nothing)."""
    with _lock:
        if ahead.ended or ahead.owner != os.getpid():
            return
        ahead.ended = True
    _end(ahead)


def _end(ahead: Ahead) -> None:
    discard_ready(ahead.tracer)
    group, fd = ahead.group, ahead.fd

    def finish() -> None:
        os.close(fd)
        cgroups.remove(group)
    reaper.later(finish)
