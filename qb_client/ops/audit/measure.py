"""Running an audit: which probes go through which route, at once, and the document they make.

The runs (each in a fresh sandbox of its own, all at once up to ``concurrency``)
    through the harness: ``main`` (the shell probe, ending ``exit 7``), ``cap`` (200,000 bytes of output, then
    ``set -e; false; ...``, ending in blanks), ``trim`` (leading blanks, a trailing backslash), ``constructs``
    (``$(...)``, backticks and ``<(...)`` together; one run each only when they did not arrive whole);
    through ``raw`` on the route's own final shell (``raw`` for bash, ``raw@dash`` for ``/bin/sh``), the
    baseline: ``main`` and ``cap``, so every row that R can observe has the value without the harness beside it.
Nothing is specific to a harness: the route object says how to run it (``deliver``), which exec is its final
shell (``final_shell``) and which shell that is (``shell``).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio

from transports.base import Transport
from transports.raw import Raw
from transports.sandbox import Limits
from transports.sandbox.exectrace import Exec, Trace

from . import probes
from .model import Audit, Run
from .route import AuditError, baseline_name, final_shell, route_of
from .rows import Runs, rows
from .run import FinalOf, Observation, crashed, observe

Job = tuple[Transport, Callable[[str], str], FinalOf]
"""What one probe run is: the transport, the probe (given the output directory), how its final shell is found."""

ATTEMPTS = 3
"""A run whose harness died of a signal before it started a final shell (:func:`.run.crashed`) is run again, up to
this many times in all; the crashes are kept on the run."""
DEFAULT_TIMEOUT_S = 120.0
"""Per run: a loaded 2-core machine has taken 45 s for one mini-swe-agent run with three others beside it."""


async def audit(name: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, concurrency: int = 4) -> Audit:
    """Send the probes through harness ``name`` and ``raw``, and make the document (:mod:`.rows`)."""
    route = route_of(name)
    raw = Raw(route.shell)
    limits = Limits(timeout_s=timeout_s)
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    def final(trace: Trace | None) -> Exec | None:
        return final_shell(route, trace)

    def first(trace: Trace | None) -> Exec | None:
        return trace.execs[0] if trace is not None and trace.execs else None

    async def batch(jobs: dict[str, Job]) -> dict[str, Observation]:
        """The jobs at once (up to the limiter), their observations in the jobs' order."""
        done: dict[str, Observation] = {}

        async def one(key: str, transport: Transport, probe: Callable[[str], str], final_of: FinalOf) -> None:
            async with limiter:
                label = baseline_name(route) if key.startswith("raw ") else None
                crashes: list[str] = []
                for _ in range(ATTEMPTS):
                    ob = await observe(transport, probe, final_of, limits, label)
                    if not crashed(ob):
                        break
                    crashes.append(signal_name(ob.exit_code))
                ob.crashes = crashes
                done[key] = ob

        async with anyio.create_task_group() as tg:
            for key, (transport, probe, final_of) in jobs.items():
                tg.start_soon(one, key, transport, probe, final_of)
        return {key: done[key] for key in jobs}

    seen = await batch({
        "main": (route, probes.main_probe, final), "cap": (route, probes.cap_probe, final),
        "trim": (route, probes.trim_probe, final), "constructs": (route, probes.constructs_probe, final),
        "raw main": (raw, probes.main_probe, first), "raw cap": (raw, probes.cap_probe, first),
    })
    for ob in seen.values():
        if ob.harness_error is not None:
            raise AuditError(ob.harness_error)
    together = seen["constructs"]
    if together.received != together.command:
        seen |= await batch({f"construct {n}": (route, _one_construct(n), final) for n in probes.CONSTRUCTS})
    runs = Runs(route=route, baseline=baseline_name(route), seen=seen)
    isolation = next((o.isolation for o in seen.values() if o.isolation is not None), None)
    return Audit(harness=route.harness, version=route.version, route=route.boundary, baseline=runs.baseline,
                 isolation=isolation, rows=rows(runs), runs=[_run(k, o) for k, o in seen.items()])


def signal_name(code: int | None) -> str:
    """``exit 132 (SIGILL)``: what a crash is recorded as (its stderr, a crash reporter's text and link, is not kept)."""
    try:
        return f"exit {code} ({signal.Signals((code or 0) - 128).name})"
    except ValueError:
        return f"exit {code}"


def _one_construct(name: str) -> Callable[[str], str]:
    return lambda o: probes.constructs_probe(o, [name])


def _run(key: str, ob: Observation) -> Run:
    return Run(probe=key.removeprefix("raw "), transport=ob.transport, received_equals_command=ob.received == ob.command,
               received_note=ob.received_note, transport_error=ob.transport_error, exit_code=ob.exit_code,
               timed_out=ob.timed_out, exec_ms=round(ob.exec_ms, 1) if ob.exec_ms is not None else None,
               crashes=ob.crashes)
