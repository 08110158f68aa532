"""The floor a record is measured against (``quotebench bench --phases``): what isolation alone costs.

Two floors, both running the same program in the same sandbox as a record does, with nothing of the host's
work around it (no cgroup, no rlimits, no output reading, no verdict):

* ``isolation``: the uid drop (``setpriv``, as root) and ``bwrap`` with the sandbox's own arguments, started
  with ``subprocess.run``;
* ``isolation + trace``: the same launched behind the tracer's gate (the one ``sh`` that waits for the
  tracer's line, so the trace starts before anything runs) and traced by :class:`~.exectrace.Tracer` as a
  run is: the least a record can cost while ``received`` is the kernel's.

Without bwrap (``isolation: none``) both are the program alone, behind the uid drop.
"""

from __future__ import annotations

import subprocess
import time

from . import exectrace, hostuid, launch
from .box import Sandbox
from .launch import shell_identities


def argv(box: Sandbox, program: list[str]) -> list[str]:
    """``program`` behind the uid drop and bubblewrap exactly as ``box`` would wrap it, without the limits."""
    iso = [] if box.isolation == "none" else launch.bwrap_argv(box.limits, box.root, box.inside(box.workdir), [],
                                                              network=False)
    return hostuid.drop_prefix() + iso + program


def isolation_ms(box: Sandbox, program: list[str]) -> float:
    """One run of the isolation floor, in ms."""
    full = argv(box, program)
    start = time.perf_counter()
    subprocess.run(full, env=box.env(), cwd=str(box.workdir), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - start) * 1000


def traced_ms(box: Sandbox, program: list[str]) -> float:
    """One run of the isolation floor behind the gate, traced, in ms (the spawn to the last process reaped)."""
    full = ["/bin/sh", "-c", exectrace.GATE_PREFIX + 'exec "$@"', "sh", *argv(box, program)]
    inner = box.isolation == "bwrap"
    start = time.perf_counter()
    tracer = exectrace.Tracer(full, env=box.env(), cwd=str(box.workdir), stdin=False, watch=shell_identities(),
                              launcher_execs=0 if inner or not hostuid.drop_prefix() else 1, inner=inner)
    proc = tracer.start()
    tracer.main_exited.wait()
    tracer.kill_all()
    tracer.join()
    elapsed = (time.perf_counter() - start) * 1000
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return elapsed
