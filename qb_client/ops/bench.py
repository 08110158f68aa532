"""``quotebench bench``: what measuring costs (transports, paths, MCP calls), as ratios to a bare ``bash -c true``.

Absolute milliseconds depend on the machine; the ratio to the cheapest possible
shell call measured in the same run does not (much), so it is what we report and
compare across changes. Speed goals live here, never in timed tests.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

import anyio

from qb_server.bench import time_calls
from tasks.load import get_task, suite
from transports.execute import execute
from transports.registry import ORDER, get
from transports.sandbox import Sandbox, floor, isolation_available, phases


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def bare_bash_ms(n: int) -> float:
    """The floor: ``bash -c true`` started from Python with no sandbox."""
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], stdin=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - t) * 1000)
    return _median_ms(samples)


async def per_transport(n: int, transports: list[str], record: bool = True) -> dict[str, dict[str, float]]:
    """Per transport: the process run alone (``exec``) and the whole record path (``record``: sandbox with
    fixture, delivery, validation, cleanup)."""
    task = get_task("file-write/control")
    out: dict[str, dict[str, float]] = {}
    for name in transports:
        t = get(name)
        with Sandbox.create(task) as box:
            await t.deliver("true", box)  # warm-up: ssh server start, shim creation
            run_only = []
            for _ in range(n):
                d = await t.deliver("true", box)
                run_only.append(d.execution.exec_ms if d.execution else 0.0)
        out[name] = {"exec_ms": _median_ms(run_only)}
        if record:
            full = await time_calls(lambda: execute(task, name, "true"), n)
            out[name]["record_ms"] = _median_ms(full)
    return out


async def full_replay(transports: list[str], concurrency: int) -> dict[str, Any]:
    """Every reference solution (solution and solution_disclosed) on every transport; ``failed`` names the
    ones that did not pass and why (a disclosed solution on raw fails by design; an error never does)."""
    tasks = list(suite())
    pairs = [(t, which, tr) for t in tasks for which in ("solution", "solution_disclosed") for tr in transports]
    limiter = anyio.CapacityLimiter(concurrency)
    failed: list[dict[str, str]] = []

    async def one(task, which, tr) -> None:
        async with limiter:
            rec = await execute(task, tr, getattr(task, which))
        if not rec.verdict.passed:
            why = rec.error or next((c.detail for c in rec.verdict.checks if not c.ok), "")
            failed.append({"task": task.id, "solution": which, "transport": tr, "why": why[:200]})

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for p in pairs:
            tg.start_soon(one, *p)
    failed.sort(key=lambda f: (f["task"], f["solution"], f["transport"]))
    return {"executions": len(pairs), "seconds": round(time.perf_counter() - start, 3),
            "passed": len(pairs) - len(failed), "concurrency": concurrency, "failed": failed}


PATH_GOAL = 3.0
TMUX_GOAL = 10.0  # a pane, a prompt round trip and a terminal are real work


async def path_costs(n: int) -> dict[str, dict[str, Any]]:
    """Each deployment path's process run against raw on the same final shell (its baseline), with the goal:
    at most 3x (tmux 10x). The same command, ``true``, in one warm sandbox per path."""
    from qb_client.report.paths import baseline
    from transports.registry import catalogue, shell_of

    from transports.harnesses import HARNESSES

    # a real agent harness is not held to a path's goal: its cost is the harness's start-up (docs/harnesses.md)
    names = [r["name"] for r in catalogue() if r["source"] and "laboratory" not in r["source"]
             and r["name"] not in HARNESSES]
    bases = sorted({baseline(shell_of(name)) for name in names})
    timed = await per_transport(n, bases + names, record=False)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        base = baseline(shell_of(name))
        ratio = round(timed[name]["exec_ms"] / timed[base]["exec_ms"], 2) if timed[base]["exec_ms"] else None
        goal = TMUX_GOAL if name.startswith("tmux") else PATH_GOAL
        out[name] = {"exec_ms": timed[name]["exec_ms"], "baseline": base, "baseline_ms": timed[base]["exec_ms"],
                     "vs_baseline": ratio, "goal": goal, "within_goal": ratio is not None and ratio <= goal}
    return out


def peak_memory_mib() -> float:
    """Peak resident memory of this process and of its waited-for children (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


def mcp_paths(n: int) -> dict[str, float]:
    """Median ms of one `true` call per MCP path (qb_server.bench times them interleaved)."""
    from qb_server.bench import main

    results = anyio.run(main, n, max(3, n // 10), max(1, min(10, n // 5)))
    keep = ("execute()", "in-process MCP", "stdio MCP", "HTTP MCP (stateless, _meta id)", "HTTP MCP (legacy, session id)")
    return {k: _median_ms(v) for k, v in results.items() if k in keep}


def run_bench(n: int = 30, transports: list[str] | None = None, replay: bool = True,
              mcp: Callable[[int], dict[str, float]] | None = mcp_paths, paths: bool = False) -> dict[str, Any]:
    from transports.harnesses import HARNESSES

    names = transports or [n for n in ORDER if n not in HARNESSES]  # a harness run costs about a second: by name only
    floor = bare_bash_ms(n)
    by_transport = anyio.run(per_transport, n, names)
    doc: dict[str, Any] = {
        "isolation": isolation_available(),
        "cores": os.cpu_count(),
        "bash_c_true_ms": floor,
        "transports": {k: {**v, "exec_ratio": round(v["exec_ms"] / floor, 2), "record_ratio": round(v["record_ms"] / floor, 2)}
                       for k, v in by_transport.items()},
    }
    if mcp is not None:
        paths = mcp(n)
        direct = paths.get("execute()")
        doc["mcp"] = {k: {"ms": v, "ratio": round(v / floor, 2),
                          "vs_execute": round(v / direct, 2) if direct else None} for k, v in paths.items()}
    if paths:
        costs = anyio.run(path_costs, n)
        doc["paths"] = {k: {**v, "exec_ratio": round(v["exec_ms"] / floor, 2)} for k, v in costs.items()}
    if replay:
        doc["full_replay"] = anyio.run(full_replay, names, os.cpu_count() or 2)
    doc["peak_memory_mib"] = peak_memory_mib()
    return doc


# ---------------------------------------------------------------- quotebench bench --phases
# Where one record's time goes, phase by phase (transports.sandbox.phases), against bash -c true and the
# sandbox's floors (transports.sandbox.floor), all measured in the same rounds, interleaved.

def _serialise(record: Any) -> bytes:
    """A record as the results file gets it (one JSON line; the writer's fsync is left out)."""
    return (json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n").encode("utf-8")


async def _profiled_record(task: Any, name: str) -> tuple[dict[str, float], float]:
    start = time.perf_counter()
    with phases.recording() as rec:
        record = await execute(task, name, "true")
        _serialise(record)
        rec.mark("record: serialise")
    return rec.durations_ms(), (time.perf_counter() - start) * 1000


async def phase_profile(n: int, transports: list[str]) -> dict[str, Any]:
    """``n`` rounds; each times ``bash -c true``, both floors and one profiled record per transport."""
    task = get_task("file-write/control")
    program = ["/bin/bash", "-c", "true"]
    bare: list[float] = []
    iso: list[float] = []
    traced: list[float] = []
    per: dict[str, list[dict[str, float]]] = {t: [] for t in transports}
    totals: dict[str, list[float]] = {t: [] for t in transports}
    with Sandbox.create(task) as box:
        for name in transports:  # warm-up: the ssh server's start, first imports, page cache
            await execute(task, name, "true")
        for _ in range(n):
            bare.append(bare_bash_ms(1))
            iso.append(await anyio.to_thread.run_sync(floor.isolation_ms, box, program))
            traced.append(await anyio.to_thread.run_sync(floor.traced_ms, box, program))
            for name in transports:
                durations, total = await _profiled_record(task, name)
                per[name].append(durations)
                totals[name].append(total)
    bash_ms = _median_ms(bare)
    floors = {"bash_c_true_ms": bash_ms, "isolation_ms": _median_ms(iso), "isolation_trace_ms": _median_ms(traced)}
    out: dict[str, Any] = {"rounds": n, **floors, "transports": {}}
    for name in transports:
        keys = list(dict.fromkeys(k for d in per[name] for k in d))
        table = {k: _median_ms([d.get(k, 0.0) for d in per[name]]) for k in keys}
        record_ms = _median_ms(totals[name])
        out["transports"][name] = {
            "record_ms": record_ms, "record_ratio": round(record_ms / bash_ms, 2),
            "vs_isolation_trace": round(record_ms / floors["isolation_trace_ms"], 2),
            "phases": {k: {"ms": v, "ratio": round(v / bash_ms, 3)} for k, v in table.items()}}
    return out


def run_phases(n: int, transports: list[str]) -> dict[str, Any]:
    """``quotebench bench --phases``: the profile, its floors and the goals, in one document."""
    doc: dict[str, Any] = {"isolation": isolation_available(), "cores": os.cpu_count(), "load": os.getloadavg()[0],
                           **anyio.run(phase_profile, n, transports)}
    doc["goals"] = goals(doc)
    return doc


GOALS = (("raw", "bash_c_true_ms", 4.0), ("raw", "isolation_trace_ms", 1.3), ("nested", "bash_c_true_ms", 5.0),
         ("ssh", "raw", 3.0))
"""(transport, what it is measured against, at most this ratio): the goals of a record's cost."""


def goals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal whose transports were measured, with its ratio and whether it is within."""
    out = []
    recs = doc["transports"]
    for name, against, limit in GOALS:
        if name not in recs or (against not in doc and against not in recs):
            continue
        base = recs[against]["record_ms"] if against in recs else doc[against]
        ratio = round(recs[name]["record_ms"] / base, 2)
        out.append({"record": name, "against": against, "ratio": ratio, "goal": limit, "within": ratio <= limit})
    return out
