"""``quotebench bench``: what the harness costs, as ratios to a bare ``bash -c true``.

Absolute milliseconds depend on the machine; the ratio to the cheapest possible
shell call measured in the same run does not (much), so it is what we report and
compare across changes. Speed goals live here, never in timed tests.
"""

from __future__ import annotations

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
from transports.sandbox import Sandbox, isolation_available


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
    """Every reference solution (solution and solution_disclosed) on every transport."""
    tasks = list(suite())
    pairs = [(t, cmd, tr) for t in tasks for cmd in (t.solution, t.solution_disclosed) for tr in transports]
    limiter = anyio.CapacityLimiter(concurrency)
    passed = 0

    async def one(task, cmd, tr) -> None:
        nonlocal passed
        async with limiter:
            rec = await execute(task, tr, cmd)
        passed += rec.verdict.passed

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for p in pairs:
            tg.start_soon(one, *p)
    return {"executions": len(pairs), "seconds": round(time.perf_counter() - start, 3), "passed": passed,
            "concurrency": concurrency}


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

