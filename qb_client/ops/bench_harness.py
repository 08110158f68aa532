"""``quotebench bench harnesses``: what one run through a real agent harness costs (docs/harnesses.md).

A harness run is a whole program's start (Claude Code's 235 MB native program, mini-swe-agent's litellm
import), so it is timed apart from the transports, and never in CI's default bench, against two floors
measured in the same run (and our frame's share):

* raw on the harness's own final shell (ours: sandbox, limits and a shell, nothing else);
* our frame alone (``frame_ms``): the launcher starting the courier and waiting for its port, then ``true`` in
  the harness's place: what a route run costs beyond the harness's own work;
* the harness's own bare start (``claude --version``, ``codex --version``, ``gemini --version``, the
  Python harnesses' interpreter importing their package), run the way the route runs the harness: in the
  same warm sandbox, from the same install, with the route's environment. What a route run adds to it is
  ours (the launcher, the courier, the exec trace) plus the harness's one model round trip and its shell:
  the goal is at most :data:`BARE_GOAL` x the bare start.

The timed runs alternate route run, bare start and frame, so a machine that slows down mid-measurement slows
all three.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio

from tasks.load import get_task, suite
from tasks.safefs import remove_tree
from transports.execute import execute
from transports.harnesses.harness import COURIER, LAUNCHER, HarnessRoute
from transports.paths.npm_cache import node_program
from transports.registry import get
from transports.sandbox import Limits, Sandbox, isolation_available

from .bench import bare_bash_ms, peak_memory_mib
from ..campaign.jobs import cpu_count, memory_jobs

HARNESS_TIMEOUT_S = 120.0
"""Wall clock per harness run here: a harness takes seconds, and the sandbox's default 10 s is close on a
loaded machine for mini-swe-agent (about 7 s a run)."""

BARE_GOAL = 1.2
"""A route run may cost its harness's bare start plus at most 20%."""

BARE_START: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "claude-code": ("claude --version", lambda program: [program, "--version"]),
    "codex": ("codex --version", lambda program: [program, "--version"]),
    "gemini-cli": ("node gemini.js --version", lambda program: [node_program(), program, "--version"]),
    "mini-swe-agent": ("python -c 'import minisweagent.run.mini, litellm'",
                       lambda program: [program, "-c", "import minisweagent.run.mini, litellm"]),
    "openai-agents": ("python -I -B -c 'import agents'", lambda program: [program, "-I", "-B", "-c", "import agents"]),
}
"""Per harness route: what its smallest start is called in the table, and its argv from the program the route
starts (the native program, the JavaScript bundle, or the venv's python). mini-swe-agent reaches every model
through litellm, which it imports on its first model call: its smallest start that could run a task is
its command's module and litellm (about 5 s, litellm's import being nearly all of it). The Agents SDK has no
command line, so its start is the import our driver makes."""


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


async def bare_start(route: HarnessRoute, box: Sandbox) -> tuple[float | None, str | None]:
    """One bare start of ``route``'s harness in ``box``: its ``exec_ms``, or the one-line reason it failed."""
    prefix = await anyio.to_thread.run_sync(route.installed)
    program = route.program(prefix)
    mount = box.mount_point(prefix, f"qb-{route.harness}")
    inside = f"{mount}/{program.relative_to(prefix)}" if mount != str(prefix) else str(program)
    ex = await box.run(BARE_START[route.name][1](inside), env=route.env(), binds=((prefix, mount),))
    if ex.exit_code != 0:
        said = (ex.stderr.text.strip().splitlines() or [""])[-1][:200]
        return None, f"the bare start exited {ex.exit_code}{': ' + said if said else ''}"
    return ex.exec_ms, None


async def frame_start(route: HarnessRoute, box: Sandbox) -> float | None:
    """Our frame alone, in ``box``: the route's launcher starting the courier, waiting for its port and
    exec'ing ``true`` where the harness would be. Its ``exec_ms``, or None if it failed."""
    run = box.scratch("frame")
    box.make_dir(run)
    try:
        command = box.write_file("command", b"true")
        courier = box.write_file("courier.py", COURIER.read_bytes())
        ex = await box.run(["/bin/sh", "-c", LAUNCHER, "qb-harness", courier, command,
                            f"{box.inside(run)}/courier.log", route.url_var, route.url_path, "true"], env=route.env())
    finally:
        remove_tree(run)
    return ex.exec_ms if ex.exit_code == 0 else None


async def _timed_runs(name: str, n: int, timeout_s: float) -> dict[str, Any]:
    """``n`` runs of ``true`` through ``name`` in one warm sandbox (after one warm-up run), each followed by
    the harness's bare start there when ``name`` is a harness route: the medians, or the one-line reason
    nothing ran (a missing component, a transport error)."""
    task = get_task("file-write/control")
    t = get(name)
    harness = isinstance(t, HarnessRoute) and t.name in BARE_START
    samples: list[float] = []
    bare: list[float] = []
    frame: list[float] = []
    bare_error: str | None = None
    with Sandbox.create(task, Limits(timeout_s=timeout_s)) as box:
        for k in range(n + 1):
            d = await t.deliver("true", box)
            if d.harness_error is not None or d.transport_error is not None or d.execution is None:
                return {"exec_ms": None, "error": d.harness_error or d.transport_error or "nothing ran"}
            if k:  # the first run is the warm-up: the install check, page cache, the harness's first files
                samples.append(d.execution.exec_ms)
            if harness and bare_error is None:
                ms, bare_error = await bare_start(t, box)  # type: ignore[arg-type]
                if k and ms is not None:
                    bare.append(ms)
                framed = await frame_start(t, box)  # type: ignore[arg-type]
                if k and framed is not None:
                    frame.append(framed)
    out: dict[str, Any] = {"exec_ms": median_ms(samples), "min_ms": round(min(samples), 3),
                           "max_ms": round(max(samples), 3)}
    if harness:
        bare_ms = median_ms(bare) if bare and bare_error is None else None
        ratio = round(out["exec_ms"] / bare_ms, 2) if bare_ms else None
        out.update({"bare": BARE_START[name][0], "bare_ms": bare_ms, "vs_bare": ratio, "bare_goal": BARE_GOAL,
                    "frame_ms": median_ms(frame) if frame else None,
                    "within_bare_goal": ratio is not None and ratio <= BARE_GOAL,
                    **({"bare_error": bare_error} if bare_error else {})})
    return out


async def harness_costs(n: int, harnesses: list[str], timeout_s: float = HARNESS_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """Per harness route: the median process run of ``true`` through the harness, through raw on the same
    final shell (its baseline) and of the harness's bare start, timed in this run."""
    from qb_client.report.paths import baseline
    from transports.registry import shell_of

    out: dict[str, dict[str, Any]] = {}
    bases: dict[str, dict[str, Any]] = {}
    for name in harnesses:
        base = baseline(shell_of(name))
        if base not in bases:
            bases[base] = await _timed_runs(base, n, timeout_s)
        own = await _timed_runs(name, n, timeout_s)
        base_ms = bases[base]["exec_ms"]
        ratio = round(own["exec_ms"] / base_ms, 2) if own["exec_ms"] is not None and base_ms else None
        out[name] = {**own, "runs": n, "baseline": base, "baseline_ms": base_ms, "vs_baseline": ratio}
    return out


def sweep_jobs(name: str, jobs: int, timeout_s: float = HARNESS_TIMEOUT_S) -> int:
    """Harness runs at once in a sweep of ``name``: ``jobs``, held to the host budget's memory
    (:func:`qb_client.campaign.jobs.memory_jobs`) for the runs one delivery holds at once."""
    from qb_server.budget import runs_per_call

    return memory_jobs(jobs, Limits(timeout_s=timeout_s), runs_per_call(get(name)))


async def harness_sweep(harnesses: list[str], jobs: int,
                        timeout_s: float = HARNESS_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """The full sweep: every reference solution (the 56 raw and the 56 disclosed) through each harness, with
    :func:`sweep_jobs` runs at a time; per harness the wall time, the median ``exec_ms`` and the pass counts."""
    return {name: await _sweep_one(name, sweep_jobs(name, jobs, timeout_s), timeout_s) for name in harnesses}


async def _sweep_one(name: str, concurrency: int, timeout_s: float) -> dict[str, Any]:
    limits = Limits(timeout_s=timeout_s)
    tasks = list(suite())
    limiter = anyio.CapacityLimiter(concurrency)
    passed = {"raw": 0, "disclosed": 0}
    times: list[float] = []
    errors = 0

    async def one(task, contract: str, cmd: str) -> None:
        nonlocal errors
        async with limiter:
            rec = await execute(task, name, cmd, limits=limits)
        if rec.error:  # a harness error (the component is missing): out of the counts, as out of every rate
            errors += 1
            return
        passed[contract] += rec.verdict.passed
        if rec.timing.exec_ms is not None:
            times.append(rec.timing.exec_ms)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for t in tasks:
            tg.start_soon(one, t, "raw", t.solution)
            tg.start_soon(one, t, "disclosed", t.solution_disclosed)
    return {"executions": 2 * len(tasks), "passed": passed, "errors": errors,
            "seconds": round(time.perf_counter() - start, 3),
            "median_exec_ms": median_ms(times) if times else None, "concurrency": concurrency}


def run_harness_bench(n: int, harnesses: list[str] | None = None, sweep: bool = False, jobs: int | None = None,
                      timeout_s: float = HARNESS_TIMEOUT_S) -> dict[str, Any]:
    """``quotebench bench harnesses``: each harness run's cost against ``bash -c true``, against raw on its
    final shell and against its bare start; with ``sweep``, the 112 reference solutions through each harness
    as well, ``jobs`` at once (default: the CPU count) within the host's memory."""
    from transports.harnesses import HARNESSES

    names = harnesses or list(HARNESSES)
    floor = bare_bash_ms(max(n, 5))
    costs = anyio.run(harness_costs, n, names, timeout_s)
    doc: dict[str, Any] = {
        "isolation": isolation_available(), "cores": os.cpu_count(), "bash_c_true_ms": floor,
        "harnesses": {k: {**v, "exec_ratio": round(v["exec_ms"] / floor, 2) if v["exec_ms"] is not None else None,
                          "baseline_ratio": round(v["baseline_ms"] / floor, 2) if v["baseline_ms"] is not None else None}
                      for k, v in costs.items()},
    }
    if sweep:
        doc["sweep"] = anyio.run(harness_sweep, names, jobs or cpu_count(), timeout_s)
    doc["peak_memory_mib"] = peak_memory_mib()
    return doc
