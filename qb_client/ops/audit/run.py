"""One probe through one route, in a fresh sandbox of its own, and what the host can read after it.

The hook
    :func:`transports.execute.deliver` is the one execution path every record takes (the component check,
    then the route's own ``deliver``); the audit calls it on a :class:`transports.sandbox.Sandbox` it made
    itself, so after the run the working directory and HOME are still there to read (``execute`` judges and
    closes them). Nothing is mocked and the sandbox is the usual one: bwrap, limits, the exec trace.

What is planted, and how
    Before the probe, the rc files (:mod:`.probes`) are written by a ``/bin/sh`` run *in* the sandbox
    (``Sandbox.run``), as the command's own user; the probes' output directory is made with
    ``Sandbox.make_dir``. Nothing else is changed.

What is read back
    The probe's files and the rc log, through :func:`tasks.safefs.read_under` (no link followed, capped: the
    command owns the tree); the route's delivery (``received``, its note, the courier's log); the final shell's
    exec from the kernel's trace (``HarnessRoute.final_shell``, or the run's first program on ``raw``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tasks.safefs import UnsafeRead, list_under, read_under
from transports.base import Transport
from transports.execute import deliver
from transports.sandbox import Limits, Sandbox
from transports.sandbox.exectrace import Exec, Trace

from . import probes

FILE_CAP = 256 * 1024


@dataclass
class Observation:
    """What one probe run left: the delivery's facts, the final shell's exec, and the files the probe wrote."""

    transport: str
    command: str
    received: str | None = None
    received_note: str | None = None
    transport_error: str | None = None
    harness_error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    exec_ms: float | None = None
    isolation: str | None = None
    crashes: list[str] = field(default_factory=list)
    log: str | None = None
    final: Exec | None = None
    wrapper: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    rc_log: str = ""


FinalOf = Callable[[Trace | None], Exec | None]


async def observe(transport: Transport, command_of: Callable[[str], str], final_of: FinalOf,
                  limits: Limits, label: str | None = None) -> Observation:
    """Run ``command_of(OUT_DIR)`` through ``transport`` in a fresh planted sandbox and read what it left."""
    import anyio

    box = await anyio.to_thread.run_sync(lambda: Sandbox.create(None, limits))
    with box:
        home = box.inside(box.home)
        plant = await box.run(["/bin/sh", "-c", probes.plant_script(), "qb-plant", *probes.plant_args(home)])
        if plant.exit_code != 0:
            raise RuntimeError(f"planting the rc files failed (exit {plant.exit_code}): {plant.stderr.text.strip()}")
        out = box.workdir / probes.OUT
        box.make_dir(out)
        command = command_of(box.inside(out))
        d = await deliver(transport, command, box)
        ob = Observation(label or transport.name, command, d.received, d.received_note, d.transport_error, d.harness_error)
        if d.harness is not None:
            ob.log, ob.wrapper = d.harness.log, d.harness.wrapper
        if (ex := d.execution) is not None:
            ob.exit_code, ob.timed_out, ob.exec_ms, ob.isolation = ex.exit_code, ex.timed_out, ex.exec_ms, ex.isolation
            ob.final = final_of(ex.trace)
        ob.files = _read_dir(box, f"work/{probes.OUT}")
        try:
            ob.rc_log = read_under(box.home, probes.RC_LOG, FILE_CAP).decode("utf-8", "replace")
        except (OSError, UnsafeRead):
            ob.rc_log = ""
    return ob


def crashed(ob: Observation) -> bool:
    """The harness died of a signal before it started any final shell: a crash of the harness (Claude Code 2.1.197's
    runtime died of SIGILL in 5 of about 50 runs here, on a loaded machine), not something it does to R."""
    return ob.final is None and not ob.timed_out and ob.exit_code is not None and ob.exit_code > 128


def _read_dir(box: Sandbox, rel: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    try:
        names = list_under(box.root, rel, 200)
    except (OSError, UnsafeRead):
        return files
    for name in sorted(names):
        try:
            files[name] = read_under(box.root, f"{rel}/{name}", FILE_CAP)
        except (OSError, UnsafeRead):
            continue
    return files
