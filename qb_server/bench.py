"""Per-call cost of the MCP server against running the same command directly (a script, not a test).

``python -m qb_server.bench [-n 200]`` times ``true`` through:

* ``bash -c true``        - a plain subprocess, the floor;
* ``execute()``           - ``transports.execute.execute``: fresh sandbox, deliver, validate, delete;
* ``session direct``      - what the server does per call, without MCP: deliver + validate + record
                            in one reused sandbox (and the same without the fsync'd record);
* ``in-process MCP``      - ``Client(server)`` in this process (no serialisation to a pipe);
* ``stdio MCP``           - ``python -m qb_server`` as a subprocess;
* ``HTTP MCP``            - the same with ``--http 127.0.0.1:0``, stateless (``_meta`` id) and legacy mode.

The paths are timed in interleaved rounds. Medians (and p90) in ms, and each median's ratio to ``execute()`` and to ``session direct``.
The records are written to a throwaway file with fsync, as a real run would.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from tasks.load import get_task
from transports.execute import execute

from .app import build_app
from .sessions import META_KEY, SessionKey

TASK = "file-write/control"


async def time_calls(fn: Callable[[], Awaitable[object]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _mcp(client: Client, meta: dict[str, str] | None) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        r = await client.call_tool("bash", {"command": "true"}, meta=meta)
        assert not r.is_error, r.content

    return call


def _http_server(record: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "qb_server", "--http", "127.0.0.1:0", "--record", str(record)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"MCP on (http://\S+)", line):
            return proc, m.group(1)
    raise RuntimeError("the HTTP server did not start")


async def main(n: int, warmup: int, rounds: int) -> dict[str, list[float]]:
    """All paths are open at once and timed in interleaved rounds, so load drift hits them alike."""
    task = get_task(TASK)
    work = Path(tempfile.mkdtemp(prefix="qb-bench-"))
    env = {**os.environ, "TMPDIR": str(work)}
    app = build_app(record=work / "direct.jsonl")
    bare = build_app()  # no record file: the fsync'd append is left out
    key = SessionKey.meta("bench")

    async def floor() -> None:
        await anyio.run_process(["bash", "-c", "true"])

    async def direct() -> None:
        async with app.sessions.use(key) as s:
            await app.sessions.run(s, "true")

    async def direct_bare() -> None:
        async with bare.sessions.use(key) as s:
            await bare.sessions.run(s, "true")

    proc, url = _http_server(work / "http.jsonl", env)
    try:
        async with AsyncExitStack() as stack:
            inproc = await stack.enter_async_context(Client(app.mcp))
            stdio = await stack.enter_async_context(Client(StdioServerParameters(
                command=sys.executable, env=env, args=["-m", "qb_server", "--record", str(work / "stdio.jsonl")])))
            stateless = await stack.enter_async_context(Client(url))
            legacy = await stack.enter_async_context(Client(url, mode="legacy"))
            paths: dict[str, Callable[[], Awaitable[object]]] = {
                "bash -c true": floor,
                "execute()": lambda: execute(task, "raw", "true"),
                "session direct": direct,
                "session direct, no record": direct_bare,
                "in-process MCP": _mcp(inproc, {META_KEY: "bench-mcp"}),
                "stdio MCP": _mcp(stdio, None),
                "HTTP MCP (stateless, _meta id)": _mcp(stateless, {META_KEY: "bench"}),
                "HTTP MCP (legacy, session id)": _mcp(legacy, None),
            }
            results: dict[str, list[float]] = {k: [] for k in paths}
            for fn in paths.values():
                await time_calls(fn, warmup)
            for _ in range(rounds):
                for k, fn in paths.items():
                    results[k] += await time_calls(fn, max(1, n // rounds))
        await app.aclose()
        await bare.aclose()
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict[str, list[float]]) -> str:
    med = {k: statistics.median(v) for k, v in results.items()}
    base, session = med["execute()"], med["session direct"]
    lines = [f"{'path':34} {'median ms':>9} {'p90 ms':>7} {'/execute()':>10} {'/session':>9}"]
    for k, v in results.items():
        p90 = statistics.quantiles(v, n=10)[-1]
        lines.append(f"{k:34} {med[k]:9.2f} {p90:7.2f} {med[k] / base:10.2f} {med[k] / session:9.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    print(report(anyio.run(main, a.n, a.warmup, a.rounds)))
