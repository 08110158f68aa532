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


async def per_transport(n: int, transports: list[str]) -> dict[str, dict[str, float]]:
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
        full = await time_calls(lambda: execute(task, name, "true"), n)
        out[name] = {"exec_ms": _median_ms(run_only), "record_ms": _median_ms(full)}
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
              mcp: Callable[[int], dict[str, float]] | None = mcp_paths) -> dict[str, Any]:
    names = transports or list(ORDER)
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
    if replay:
        doc["full_replay"] = anyio.run(full_replay, names, os.cpu_count() or 2)
    doc["peak_memory_mib"] = peak_memory_mib()
    return doc
